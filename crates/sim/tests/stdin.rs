//! Standard input through Debian's adb, as a phone's shell reads it: piped into a command
//! (shell v2), into `exec-in`, and as the script of a shell started without a command, which
//! ends at `exit N` or end of input with that status. Also the services a user build refuses.
use std::time::{Duration, Instant};

use droidmesh_sim::testkit::{one_phone, require_adb};

const LIMIT: Duration = Duration::from_secs(20);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_stdin_reaches_commands_and_scripts_end_with_their_status() {
    if !require_adb("piped_stdin_reaches_commands_and_scripts_end_with_their_status") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    // `echo x | adb shell cat`
    let out = adb
        .adb_stdin(&["-s", &s, "shell", "cat"], b"x\n", LIMIT)
        .unwrap();
    assert_eq!(
        (text(&out.stdout).as_str(), out.status.code()),
        ("x\n", Some(0))
    );
    let out = adb
        .adb_stdin(&["-s", &s, "shell", "wc", "-l"], b"a\nb\nc\n", LIMIT)
        .unwrap();
    assert_eq!(text(&out.stdout).trim(), "3");

    // A shell without a command runs its input as a script and exits with `exit`'s status.
    let out = adb
        .adb_stdin(
            &["-s", &s, "shell"],
            b"echo one\nexit 5\necho never\n",
            LIMIT,
        )
        .unwrap();
    assert_eq!(text(&out.stdout), "one\n", "{out:?}");
    assert_eq!(out.status.code(), Some(5));
    // End of input ends it too, with the last command's status; the script's own commands
    // read the rest of the input, as on a phone.
    let out = adb
        .adb_stdin(
            &["-s", &s, "shell"],
            b"echo two\ncat\nrest of input\n",
            LIMIT,
        )
        .unwrap();
    assert_eq!(text(&out.stdout), "two\nrest of input\n", "{out:?}");
    assert_eq!(out.status.code(), Some(0));
    let out = adb
        .adb_stdin(&["-s", &s, "shell"], b"echo three\nfalse\n", LIMIT)
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    // exec-in: the bytes become the command's stdin; the file holds all of them.
    let data: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let out = adb
        .adb_stdin(&["-s", &s, "exec-in", "cat > /sdcard/in.txt"], &data, LIMIT)
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut size = String::new();
    // exec-in returns when its input is handed to the adb server, which may still be sending
    // the last of 200 kB when the next command starts (as with a phone): wait for it.
    for _ in 0..100 {
        size = adb.shell(&s, "wc -c < /sdcard/in.txt").unwrap_or_default();
        if size.trim() == data.len().to_string() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(size.trim(), data.len().to_string());
    let back = adb
        .adb(&["-s", &s, "exec-out", "cat", "/sdcard/in.txt"])
        .unwrap();
    assert!(
        back.stdout == data,
        "exec-out returned {} bytes",
        back.stdout.len()
    );
}

/// How many `exec-in` runs the race test makes, and the time they may take together.
const RUNS: usize = 200;
const RUNS_LIMIT: Duration = Duration::from_secs(240);

/// `adb exec-in` returns as soon as it has handed its input to the adb server; the command on
/// the phone finishes after that. A command adb runs next must still see what that input did:
/// each run writes a file of a new size and the next command counts its bytes.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_after_exec_in_sees_the_file_it_wrote() {
    if !require_adb("a_command_after_exec_in_sees_the_file_it_wrote") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    let start = Instant::now();
    let mut wrong = Vec::new();
    for run in 0..RUNS {
        assert!(
            start.elapsed() < RUNS_LIMIT,
            "{run} of {RUNS} runs took longer than {RUNS_LIMIT:?}"
        );
        let data = vec![b'a' + (run % 26) as u8; 1000 + run];
        let out = adb
            .adb_stdin(
                &["-s", &s, "exec-in", "cat > /data/local/tmp/f"],
                &data,
                LIMIT,
            )
            .unwrap();
        assert!(out.status.success(), "run {run}: {out:?}");
        let counted = adb
            .adb(&["-s", &s, "shell", "wc -c /data/local/tmp/f"])
            .unwrap();
        let said = text(&counted.stdout) + &text(&counted.stderr);
        if said != format!("{} /data/local/tmp/f\n", data.len()) {
            wrong.push(format!(
                "run {run}: wrote {} bytes, wc said {said:?}",
                data.len()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {RUNS} runs:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // A command that reads its input late (here after a pause of its own) holds up the next
    // command as long, whatever the machine's speed.
    for run in 0..3 {
        let data = vec![b'z'; 500 + run];
        let out = adb
            .adb_stdin(
                &["-s", &s, "exec-in", "sleep 0.3; cat > /data/local/tmp/late"],
                &data,
                LIMIT,
            )
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let size = adb.shell(&s, "wc -c < /data/local/tmp/late").unwrap();
        assert_eq!(size.trim(), data.len().to_string(), "late run {run}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn services_a_user_build_refuses_say_so() {
    if !require_adb("services_a_user_build_refuses_say_so") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    let out = adb.adb(&["-s", &s, "root"]).unwrap();
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        said.contains("adbd cannot run as root in production builds"),
        "{said}"
    );
    let out = adb.adb(&["-s", &s, "remount"]).unwrap();
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("Not running as root"), "{said}");
    let out = adb.adb(&["-s", &s, "reverse", "--list"]).unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = adb
        .adb(&["-s", &s, "reverse", "tcp:8080", "tcp:8080"])
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not supported by the simulated phone"),
        "{out:?}"
    );
    // The device is still there and answers.
    assert_eq!(adb.shell(&s, "echo fine").unwrap(), "fine\n");
}
