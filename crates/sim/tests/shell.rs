//! Android's shell through Debian's adb: pathname expansion of unquoted words against the
//! phone's files.
use droidmesh_sim::testkit::{AdbServer, one_phone, require_adb};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `adb -s S shell CMD`: stdout, stderr and the exit status.
fn shell(adb: &AdbServer, s: &str, cmd: &str) -> (String, String, i32) {
    let o = adb.adb(&["-s", s, "shell", cmd]).unwrap();
    (
        text(&o.stdout),
        text(&o.stderr),
        o.status.code().unwrap_or(-1),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn unquoted_patterns_expand_to_the_phones_files() {
    if !require_adb("unquoted_patterns_expand_to_the_phones_files") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    adb.shell(
        &s,
        "mkdir /data/local/tmp/g/sub; \
         echo > /data/local/tmp/g/b.txt; echo > /data/local/tmp/g/a.txt; \
         echo > /data/local/tmp/g/c.png; echo > /data/local/tmp/g/.hidden",
    )
    .unwrap();
    let g = "/data/local/tmp/g";
    let rows: Vec<(String, String)> = vec![
        (
            format!("echo {g}/*"),
            format!("{g}/a.txt {g}/b.txt {g}/c.png {g}/sub\n"),
        ),
        (format!("echo {g}/*.txt"), format!("{g}/a.txt {g}/b.txt\n")),
        (format!("echo {g}/?.png"), format!("{g}/c.png\n")),
        (
            format!("echo {g}/[ab].txt"),
            format!("{g}/a.txt {g}/b.txt\n"),
        ),
        (format!("echo {g}/[!a].txt"), format!("{g}/b.txt\n")),
        (
            format!("echo {g}/[a-b].*"),
            format!("{g}/a.txt {g}/b.txt\n"),
        ),
        (format!("echo {g}/.h*"), format!("{g}/.hidden\n")),
        (format!("echo {g}/*/"), format!("{g}/sub/\n")),
        ("echo /data/*/tmp/g".into(), format!("{g}\n")),
        // A relative pattern is read from the shell's directory, `/`.
        (
            "echo data/local/tmp/g/*.png".into(),
            "data/local/tmp/g/c.png\n".into(),
        ),
        // No match leaves the word as written; quotes and backslashes make it literal.
        (format!("echo {g}/*.jpg"), format!("{g}/*.jpg\n")),
        (format!("echo '{g}/*'"), format!("{g}/*\n")),
        (format!("echo \"{g}\"/*.png"), format!("{g}/c.png\n")),
        (format!("echo \"{g}/*\""), format!("{g}/*\n")),
        (format!("echo {g}/\\*"), format!("{g}/*\n")),
        (format!("D={g}; echo \"$D\"/?.png"), format!("{g}/c.png\n")),
        (
            format!("for f in {g}/*.txt; do echo \"[$f]\"; done"),
            format!("[{g}/a.txt]\n[{g}/b.txt]\n"),
        ),
        (format!("ls {g}/*.txt"), format!("{g}/a.txt\n{g}/b.txt\n")),
        (format!("cat {g}/*.txt | wc -l"), "2\n".into()),
        // `case` patterns match words, not files; a quoted pattern is literal.
        (
            "case ab in \"a*\") echo quoted;; a*) echo pattern;; esac".into(),
            "pattern\n".into(),
        ),
    ];
    let mut wrong = Vec::new();
    for (cmd, want) in &rows {
        let got = shell(&adb, &s, cmd);
        if got != (want.clone(), String::new(), 0) {
            wrong.push(format!("{cmd}\n  expected {want:?}\n  got      {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} expanded unlike a POSIX shell:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
}
