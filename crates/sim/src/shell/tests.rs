//! The shell language and its commands, as a user at `adb shell` would check them.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::apps::AppSet;

fn dev() -> Mutex<Device> {
    Mutex::new(Device::new(
        Arc::new(AppSet::default_set().unwrap()),
        "sim-1",
    ))
}

fn sh(d: &Mutex<Device>, line: &str) -> (String, String, i32) {
    let o = run(d, line);
    (
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
        o.code,
    )
}

fn out(d: &Mutex<Device>, line: &str) -> String {
    sh(d, line).0
}

#[test]
fn coreutils_lists_and_exit_codes_work() {
    let d = dev();
    assert_eq!(
        sh(&d, "echo hi; false; echo $?"),
        ("hi\n1\n".into(), String::new(), 0)
    );
    assert_eq!(out(&d, "false && echo no || echo yes"), "yes\n");
    assert_eq!(
        out(
            &d,
            "echo a > /sdcard/x.txt; echo b >> /sdcard/x.txt; cat /sdcard/x.txt"
        ),
        "a\nb\n"
    );
    assert_eq!(out(&d, "cat /sdcard/x.txt | grep b"), "b\n");
    let (_, err, code) = sh(&d, "frobnicate --now");
    assert_eq!(code, 127);
    assert!(
        err.contains("frobnicate: inaccessible or not found"),
        "{err}"
    );
    assert_eq!(sh(&d, "cat /nope").2, 1);
    assert_eq!(sh(&d, "echo 'unterminated").2, 2);
    assert_eq!(out(&d, "ls /sdcard | head -n 1"), "DCIM\n");
    assert_eq!(out(&d, "printf 'a b\\nc\\n' | wc -l -w -c"), "2 3 6\n");
}

#[test]
fn stderr_redirects_follow_the_order_of_file_descriptors() {
    let d = dev();
    assert_eq!(sh(&d, "echo err >&2"), (String::new(), "err\n".into(), 0));
    assert_eq!(sh(&d, "echo err 1>&2").1, "err\n");
    // `>/dev/null 2>&1` silences both; `2>&1 >/dev/null` keeps stderr on the terminal.
    assert_eq!(
        sh(&d, "cat /nope >/dev/null 2>&1"),
        (String::new(), String::new(), 1)
    );
    let (o, e, _) = sh(&d, "cat /nope 2>&1 >/dev/null");
    assert!(o.contains("cat:") && e.is_empty(), "{o:?} {e:?}");
    sh(
        &d,
        "cat /nope 2> /sdcard/err.txt; echo more 2>> /sdcard/err.txt >&2",
    );
    let log = out(&d, "cat /sdcard/err.txt");
    assert!(log.starts_with("cat:") && log.ends_with("more\n"), "{log}");
    assert_eq!(sh(&d, "{ echo a; echo b >&2; } 2>&1 | wc -l").0, "2\n");
}

#[test]
fn loops_conditionals_variables_and_substitution_run() {
    let d = dev();
    assert_eq!(out(&d, "for i in 1 2 3; do echo $i; done"), "1\n2\n3\n");
    assert_eq!(
        out(
            &d,
            "x=0; while [ $x -lt 3 ]; do echo $x; x=$((x + 1)); done"
        ),
        "0\n1\n2\n"
    );
    assert_eq!(
        out(&d, "n=3; until [ $n -eq 0 ]; do n=$((n-1)); done; echo $n"),
        "0\n"
    );
    assert_eq!(
        out(&d, "if [ -d /sdcard ]; then echo dir; else echo none; fi"),
        "dir\n"
    );
    assert_eq!(
        out(
            &d,
            "if false; then echo a; elif [ a = b ]; then echo b; else echo c; fi"
        ),
        "c\n"
    );
    assert_eq!(out(&d, "echo $(echo hi) `echo there`"), "hi there\n");
    assert_eq!(
        out(&d, "m=$(getprop ro.build.version.sdk); echo \"sdk=$m\""),
        "sdk=34\n"
    );
    assert_eq!(
        out(&d, "L='a b c'; for w in $L; do echo $w; done | wc -l"),
        "3\n"
    );
    assert_eq!(out(&d, "! false && echo negated"), "negated\n");
    // How tools pick a launcher component: `case` on the resolved line.
    assert_eq!(
        out(
            &d,
            "comp=$(cmd package resolve-activity --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER 'com.android.settings' 2>/dev/null | tail -n 1); case \"$comp\" in */*) am start --user 0 -n \"$comp\" ;; *) echo none ;; esac"
        ),
        "Starting: Intent { cmp=com.android.settings/.Settings }\n"
    );
    assert_eq!(
        out(
            &d,
            "for f in a.txt b.png c; do case $f in *.txt|*.md) echo text;; *.p?g) echo image;; *) echo other;; esac; done"
        ),
        "text\nimage\nother\n"
    );
    assert_eq!(
        out(
            &d,
            "cmd package resolve-activity --brief -c android.intent.category.HOME | tail -n 1"
        ),
        "com.android.launcher3/.uioverrides.QuickstepLauncher\n"
    );
    assert_eq!(sh(&d, "echo $((7 / 0))").2, 1);
    // `exit` ends the line at once, with its status.
    assert_eq!(
        sh(&d, "exit 3; echo never"),
        (String::new(), String::new(), 3)
    );
    assert_eq!(sh(&d, "for i in a b; do exit 4; done; echo never").2, 4);
}

#[test]
fn a_hostile_line_is_stopped_by_its_budget() {
    let d = dev();
    let started = Instant::now();
    let (_, err, code) = sh(&d, "while true; do :; done");
    assert_ne!(code, 0);
    assert!(err.contains("stopped after 100000 commands"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let (_, err, code) = sh(&d, "x=y; while true; do x=$x$x; done");
    assert_ne!(code, 0, "{err}");
    let deep = "{ ".repeat(40) + "echo x" + &"; }".repeat(40);
    assert_eq!(sh(&d, &deep).2, 2);
}

#[test]
fn a_script_on_stdin_runs_line_by_line_and_commands_read_the_rest() {
    let d = dev();
    let mut s = Session::default();
    let mut input = Input::bytes(&b"for i in a b\ndo echo $i\ndone\nexit 5\necho no\n"[..]);
    let mut got = Vec::new();
    let code = s.run_script(&d, &mut input, |o| got.extend_from_slice(&o.stdout));
    assert_eq!(
        (String::from_utf8_lossy(&got).as_ref(), code),
        ("a\nb\n", 5)
    );

    let mut s = Session::default();
    let mut input = Input::bytes(&b"read name\nhello there\necho \"[$name]\"\ncat\nrest\n"[..]);
    let mut got = Vec::new();
    let code = s.run_script(&d, &mut input, |o| got.extend_from_slice(&o.stdout));
    assert_eq!(
        (String::from_utf8_lossy(&got).as_ref(), code),
        ("[hello there]\nrest\n", 0)
    );
    // Variables persist from line to line; end of input inside a loop is a syntax error.
    let mut s = Session::default();
    let mut input = Input::bytes(&b"x=5\necho $x\nwhile true; do\n"[..]);
    let mut got = Vec::new();
    let code = s.run_script(&d, &mut input, |o| {
        got.extend_from_slice(&o.stdout);
        got.extend_from_slice(&o.stderr);
    });
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("5\n") && got.contains("syntax error"),
        "{got}"
    );
    assert_eq!(code, 2);
}

#[test]
fn exec_and_whence_keep_to_the_shell_they_run_in() {
    let d = dev();
    // A script read from stdin: exec's redirects last from line to line, exec CMD ends it.
    let mut s = Session::default();
    let mut input = Input::bytes(&b"exec 2>&1\ncat /nope\nexec echo last\necho never\n"[..]);
    let mut got = Vec::new();
    let code = s.run_script(&d, &mut input, |o| {
        got.extend_from_slice(&o.stdout);
        assert!(o.stderr.is_empty(), "{o:?}");
    });
    assert_eq!(
        (String::from_utf8_lossy(&got).as_ref(), code),
        ("cat: /nope: No such file or directory\nlast\n", 0)
    );
    // On a terminal mksh tracks only its first commands; `sh -c` tracks all it finds.
    let mut t = Session::on_terminal();
    let o = t.run_line(&d, "type getprop ls", &mut Input::empty());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "getprop is /system/bin/getprop\nls is a tracked alias for /system/bin/ls\n"
    );
    assert_eq!(
        out(&d, "type getprop"),
        "getprop is a tracked alias for /system/bin/getprop\n"
    );
    // -p looks on PATH only; `command -p` runs the command.
    assert_eq!(
        out(&d, "whence -p echo; whence -p if; echo $?"),
        "/system/bin/echo\n1\n"
    );
    assert_eq!(out(&d, "command -p echo hi"), "hi\n");
    assert_eq!(
        out(&d, "command -V getprop"),
        "getprop is a tracked alias for /system/bin/getprop\n"
    );
    // A pipe or a group's redirect still takes what a command prints after `exec >FILE`.
    assert_eq!(
        out(
            &d,
            "exec >/sdcard/e.log; echo a | tr a b > /sdcard/p.log; { echo c; } > /sdcard/g.log; exec >&2; cat /sdcard/e.log /sdcard/p.log /sdcard/g.log >&1"
        ),
        ""
    );
    assert_eq!(
        out(&d, "cat /sdcard/e.log /sdcard/p.log /sdcard/g.log"),
        "b\nc\n"
    );
    // The shell's own input cannot come from a file; options exec does not know are refused.
    let (_, err, code) = sh(&d, "exec </sdcard/g.log");
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read its own input from a file"),
        "{err}"
    );
    let (_, err, code) = sh(&d, "exec -x echo; echo after");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exec: -x: unknown option"), "{err}");
    let (_, err, _) = sh(&d, "exec -z echo");
    assert!(err.contains("exec: -z: unknown option"), "{err}");
}
