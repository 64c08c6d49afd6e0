//! With a state directory, typed secrets stay masked across a restart of the device service
//! for every reader, those that send no masks included (the manager, another tenant's task):
//! the masks are kept on disk as digests, never the secret.
use std::os::unix::fs::PermissionsExt as _;

use droidmesh_device::DeviceConfig;

use super::common::*;
use super::secrets::*;

fn kept_in(vault: &Vault, dir: &std::path::Path) -> DeviceConfig {
    DeviceConfig {
        screenshot_max_side: 0,
        state_dir: dir.to_string_lossy().into_owned(),
        ..direct_config(&vault.serial)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_device_service_masks_for_readers_that_send_nothing() {
    let vault = Vault::start().await;
    let serial = &vault.serial;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("device");
    let mut before = serve(kept_in(&vault, &dir)).await;
    let lease = acquire(&mut before, serial, "task-typed").await;
    type_secret(&mut before, serial, &lease)
        .await
        .expect("the answer names the field");

    // What was kept: files only the service's user reads, without the secret.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(mode(&files[0]), 0o600);
    let body = std::fs::read(&files[0]).unwrap();
    assert!(
        !String::from_utf8_lossy(&body).contains(SECRET),
        "the state file holds the secret"
    );

    // A service started without the directory shows the secret to a reader that sends
    // nothing: what the directory is for.
    let mut forgetful = serve(DeviceConfig {
        screenshot_max_side: 0,
        ..direct_config(serial)
    })
    .await;
    let st = read(&mut forgetful, serial, false, &[]).await;
    assert!(words(&st).contains(SECRET), "{}", words(&st));

    // Started again with it, the service masks for everyone from its first read: the field,
    // its pixels, and the secret where the app repeats it (screenshots then withheld).
    let mut after = serve(kept_in(&vault, &dir)).await;
    let st = read(&mut after, serial, true, &[]).await;
    assert!(!words(&st).contains(SECRET), "{}", words(&st));
    let code = by_id(&st, "code");
    assert_eq!(code.text, BULLET.to_string().repeat(SECRET.len()));
    assert_field_blacked(&st, &vault.unmasked_png(), &code.bounds.unwrap());
    let lease = acquire(&mut after, serial, "another-tenant").await;
    tap(&mut after, &lease, by_id(&st, "search").index).await;
    let st = read(&mut after, serial, true, &[]).await;
    assert!(!words(&st).contains(SECRET), "{}", words(&st));
    assert!(
        words(&st).contains(&format!(
            "Results for {}",
            BULLET.to_string().repeat(SECRET.len())
        )),
        "{}",
        words(&st)
    );
    assert!(st.screenshot.is_none() && !st.screenshot_withheld.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_state_directory_that_cannot_be_read_stops_the_start() {
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("masks-6162.json");
    std::fs::write(&file, b"not json").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let started = droidmesh_device::device_service(DeviceConfig {
        adb_server: String::new(),
        state_dir: state.path().to_string_lossy().into_owned(),
        ..DeviceConfig::default()
    });
    let Err(err) = started.map(|_| ()) else {
        panic!("a damaged masks file was accepted");
    };
    let err = err.to_string();
    assert!(
        err.contains(&file.display().to_string()) && err.contains("\"ab\""),
        "{err}"
    );
}
