#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::os::unix::fs::symlink;

use super::*;

/// Writes `files` (name, content) as kubelet lays out a Secret volume: the data in a
/// timestamped directory, `..data` a link to it (swapped by a rename), each file a link
/// through `..data`.
fn secret_volume(dir: &Path, version: &str, files: &[(&str, &str)]) {
    let data = dir.join(format!("..{version}"));
    std::fs::create_dir(&data).unwrap();
    for (name, content) in files {
        std::fs::write(data.join(name), content).unwrap();
    }
    let tmp = dir.join("..data_tmp");
    symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The value of `id`, asking again until `want` or 10 s have passed.
fn value_becomes(secrets: &Secrets, id: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = secrets
            .for_request(&ids(&[id]))
            .map(|m| m[id].clone())
            .unwrap_or_else(|e| e.to_string());
        if got == want || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn files_of_a_secret_volume_are_read_trimmed_and_looked_up_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    secret_volume(
        dir.path(),
        "2026_1",
        &[("pin", "4711\n"), ("Mail_Password", "p w\r\n")],
    );
    let env = HashMap::from([("CARD".to_owned(), "4111".to_owned())]);
    let secrets = Secrets::new(env, Some(dir.path().to_owned())).unwrap();
    let got = secrets
        .for_request(&ids(&["PIN", "mail_password", "card"]))
        .unwrap();
    assert_eq!(got["PIN"], "4711");
    assert_eq!(got["mail_password"], "p w");
    assert_eq!(got["card"], "4111");
    let mut values = secrets.values();
    values.sort();
    assert_eq!(values, ["4111", "4711", "p w"]);
    assert!(secrets.for_request(&[]).unwrap().is_empty());
    let shown = format!("{secrets:?}");
    assert!(
        !shown.contains("4711") && !shown.contains("4111"),
        "{shown}"
    );
}

#[test]
fn an_id_held_nowhere_is_refused_naming_where_it_was_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    secret_volume(dir.path(), "2026_1", &[("pin", "4711")]);
    let secrets = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap();
    let e = secrets.for_request(&ids(&["pin", "Card"])).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "secret 'Card' is not held by this executor: it looked for the environment variable \
             DROIDMESH_SECRET_CARD and a file named 'Card' (any case) in {}; set it there, or \
             leave the id out of secret_ids",
            dir.path().display()
        )
    );
    assert!(!e.to_string().contains("4711"));
    let e = Secrets::from(HashMap::new())
        .for_request(&ids(&["pin"]))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("DROIDMESH_SECRET_PIN (no secrets.dir is configured)"),
        "{e}"
    );
}

#[test]
fn a_renewed_secret_is_used_and_a_broken_directory_keeps_the_previous_values() {
    let dir = tempfile::tempdir().unwrap();
    secret_volume(dir.path(), "2026_1", &[("pin", "1111\n")]);
    let secrets = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap();
    assert_eq!(value_becomes(&secrets, "pin", "1111"), "1111");

    // The Secret is renewed and gains an id: both are seen without a restart.
    secret_volume(dir.path(), "2026_2", &[("pin", "2222\n"), ("card", "4111")]);
    assert_eq!(value_becomes(&secrets, "pin", "2222"), "2222");
    assert_eq!(value_becomes(&secrets, "card", "4111"), "4111");

    // A file that cannot be used (empty) keeps every previous value, and a new good one
    // beside it waits until the directory is usable again.
    std::fs::write(dir.path().join("broken"), "\n").unwrap();
    std::fs::write(dir.path().join("new"), "n").unwrap();
    secrets.look_again();
    assert_eq!(secrets.for_request(&ids(&["pin"])).unwrap()["pin"], "2222");
    assert!(secrets.for_request(&ids(&["new"])).is_err());
    // Repaired: read again.
    std::fs::write(dir.path().join("broken"), "fixed").unwrap();
    secrets.look_again();
    assert_eq!(
        secrets.for_request(&ids(&["broken"])).unwrap()["broken"],
        "fixed"
    );
    assert_eq!(secrets.for_request(&ids(&["new"])).unwrap()["new"], "n");
}

#[test]
fn an_unusable_directory_is_refused_at_start_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = Secrets::new(HashMap::new(), Some(missing.clone())).unwrap_err();
    assert!(
        e.starts_with(&format!("secrets.dir {}:", missing.display())),
        "{e}"
    );

    std::fs::write(dir.path().join("pin"), "\r\n").unwrap();
    let e = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap_err();
    assert!(e.ends_with("pin is empty"), "{e}");

    std::fs::write(dir.path().join("pin"), "4711").unwrap();
    let env = HashMap::from([("PIN".to_owned(), "9999".to_owned())]);
    let e = Secrets::new(env, Some(dir.path().to_owned())).unwrap_err();
    assert!(
        e.contains("both hold secret 'pin'") && !e.contains("4711") && !e.contains("9999"),
        "{e}"
    );

    std::fs::write(dir.path().join("PIN"), "4711").unwrap();
    let e = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap_err();
    assert!(e.contains("holds secret 'pin' twice"), "{e}");
    std::fs::remove_file(dir.path().join("PIN")).unwrap();

    std::fs::write(dir.path().join("big"), "x".repeat(70 * 1024)).unwrap();
    let e = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap_err();
    assert!(e.contains("has 71680 bytes, more than the 65536"), "{e}");
    std::fs::remove_file(dir.path().join("big")).unwrap();

    std::fs::write(dir.path().join("bin"), [0xff, 0xfe]).unwrap();
    let e = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap_err();
    assert!(e.ends_with("bin is not UTF-8 text"), "{e}");
}
