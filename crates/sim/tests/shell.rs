//! Android's shell through Debian's adb: `adb logcat` (which runs `exec logcat` on the phone),
//! the builtins that name and run commands (`type`, `command`, `exec`) answered as Android 14's
//! mksh answers them, and pathname expansion of unquoted words against the phone's files.
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
async fn adb_logcat_dumps_the_log_as_on_a_phone() {
    if !require_adb("adb_logcat_dumps_the_log_as_on_a_phone") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    adb.shell(&s, "input tap 540 1200").unwrap();
    // adb sends `export ANDROID_LOG_TAGS="''"; exec logcat '-d'`.
    let out = adb.adb(&["-s", &s, "logcat", "-d"]).unwrap();
    let log = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(log.starts_with("--------- beginning of main\n"), "{log}");
    assert!(log.contains("I droidmesh.input: tap (540, 1200)"), "{log}");
    let out = adb
        .adb(&["-s", &s, "logcat", "-d", "-s", "ActivityTaskManager"])
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!text(&out.stdout).contains("tap ("), "{out:?}");
    let out = adb.adb(&["-s", &s, "logcat", "-c"]).unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = adb.adb(&["-s", &s, "logcat", "-d"]).unwrap();
    assert_eq!(text(&out.stdout), "--------- beginning of main\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn type_command_and_exec_answer_as_androids_shell() {
    if !require_adb("type_command_and_exec_answer_as_androids_shell") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    // (command, stdout, stderr, exit status): mksh R59c's words (`sh -c` tracks every command
    // it finds on PATH as an alias; `ls` is tracked from the start).
    let rows: &[(&str, &str, &str, i32)] = &[
        ("command -v ls", "/system/bin/ls\n", "", 0),
        ("command -v getprop", "/system/bin/getprop\n", "", 0),
        ("command -v echo", "echo\n", "", 0),
        ("command -v if", "if\n", "", 0),
        ("command -v nope", "", "", 1),
        ("command -v nope ls", "", "", 1),
        ("command -v ls nope", "/system/bin/ls\n", "", 1),
        ("command -v /system/bin/ls", "/system/bin/ls\n", "", 0),
        (
            "command -v type",
            "alias type='\\\\builtin whence -v'\n",
            "",
            0,
        ),
        ("command -V cat", "cat is a shell builtin\n", "", 0),
        ("command echo hi", "hi\n", "", 0),
        ("command", "", "", 0),
        (
            "type ls",
            "ls is a tracked alias for /system/bin/ls\n",
            "",
            0,
        ),
        (
            "type getprop",
            "getprop is a tracked alias for /system/bin/getprop\n",
            "",
            0,
        ),
        ("type echo", "echo is a shell builtin\n", "", 0),
        ("type exec", "exec is a special shell builtin\n", "", 0),
        ("type if", "if is a reserved word\n", "", 0),
        ("type nope", "nope not found\n", "", 1),
        (
            "type nope ls",
            "nope not found\nls is a tracked alias for /system/bin/ls\n",
            "",
            1,
        ),
        (
            "type type",
            "type is an alias for '\\\\builtin whence -v'\n",
            "",
            0,
        ),
        (
            "type /system/bin/ls",
            "/system/bin/ls is /system/bin/ls\n",
            "",
            0,
        ),
        ("whence ls", "/system/bin/ls\n", "", 0),
        // exec runs the command in the shell's place: the rest of the line never runs.
        ("exec echo hi; echo never", "hi\n", "", 0),
        ("exec false; echo never", "", "", 1),
        (
            "exec nope; echo never",
            "",
            "/system/bin/sh: nope: inaccessible or not found\n",
            127,
        ),
        ("exec getprop ro.build.version.sdk", "34\n", "", 0),
        // exec without a command keeps its redirects for the rest of the shell.
        (
            "exec 2>&1; cat /nope; echo after",
            "cat: /nope: No such file or directory\nafter\n",
            "",
            0,
        ),
        (
            "exec >/data/local/tmp/exec.log; echo one; echo two | cat; exec >&2; cat /data/local/tmp/exec.log",
            "",
            "one\ntwo\n",
            0,
        ),
    ];
    let mut wrong = Vec::new();
    for (cmd, out, err, code) in rows {
        let got = shell(&adb, &s, cmd);
        if got != (out.to_string(), err.to_string(), *code) {
            wrong.push(format!(
                "{cmd}\n  expected {:?}\n  got      {got:?}",
                (out, err, code)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} answered unlike Android's shell:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
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
