//! Commands that tools written for real phones send, through Debian's adb, answered as a user
//! build of Android 14 answers them: the event log, launcher-activity resolution, the property
//! list, installs refused clearly, gestures that take their duration, password fields masked.
use std::time::{Duration, Instant};

use droidmesh_sim::testkit::{one_phone, require_adb};

/// The centre of the node whose resource-id ends with `id`, from a uiautomator dump.
fn centre(dump: &str, id: &str) -> (i32, i32) {
    let at = dump
        .find(&format!("{id}\""))
        .unwrap_or_else(|| panic!("no {id} in {dump}"));
    let b = &dump[at..];
    let b = &b[b.find("bounds=\"[").unwrap() + 9..];
    let nums: Vec<i32> = b[..b.find('"').unwrap()]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    ((nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2)
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_for_real_phones_work_unchanged() {
    if !require_adb("tools_for_real_phones_work_unchanged") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    let sh = |cmd: &str| adb.shell(&s, cmd).unwrap();

    // How DroidRun-style tools open an app: resolve the launcher activity, then start it.
    let resolved = sh(
        "cmd package resolve-activity --brief -c android.intent.category.LAUNCHER com.android.settings",
    );
    let component = resolved.lines().last().unwrap().trim().to_owned();
    assert_eq!(component, "com.android.settings/.Settings", "{resolved}");
    let started = sh(&format!("am start -W -n {component}"));
    assert!(
        started.contains("Status: ok") && started.contains("Complete"),
        "{started}"
    );
    assert!(
        sh("dumpsys window").contains("mCurrentFocus=Window{")
            && sh("dumpsys window").contains("com.android.settings/com.android.settings.Settings")
    );
    assert_eq!(
        sh("cmd package resolve-activity --brief com.example.none").trim(),
        "No activity found"
    );

    // The event log: app starts, taps and keys, filtered and cleared like logcat.
    sh("input tap 540 1200");
    let log = sh("logcat -d");
    assert!(
        log.contains("ActivityTaskManager: START u0")
            && log.contains("cmp=com.android.settings/.Settings"),
        "{log}"
    );
    assert!(log.contains("tap (540, 1200)"), "{log}");
    let only_starts = sh("logcat -d -s ActivityTaskManager");
    assert!(
        !only_starts.contains("tap (") && only_starts.contains("START u0"),
        "{only_starts}"
    );
    assert_eq!(
        sh("logcat -d -t 1 droidmesh.input:I *:S").lines().count(),
        2
    );
    sh("logcat -c");
    assert!(!sh("logcat -d").contains("tap ("));

    // A user build's properties, all of them listed.
    let props = sh("getprop");
    for line in [
        "[ro.build.type]: [user]",
        "[ro.debuggable]: [0]",
        "[ro.build.version.sdk]: [34]",
        "[ro.product.model]: [DroidMesh Sim]",
    ] {
        assert!(props.contains(line), "{line} missing from\n{props}");
    }

    // `adb install` fails clearly, with a non-zero status.
    let dir = std::env::temp_dir().join(format!("droidmesh-sim-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let apk = dir.join("app.apk");
    std::fs::write(&apk, vec![0x50u8; 70_000]).unwrap();
    let out = adb
        .adb(&["-s", &s, "install", apk.to_str().unwrap()])
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("INSTALL_FAILED") && said.contains("70000 bytes"),
        "{said}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // A swipe takes its duration, as on a phone.
    let t = Instant::now();
    sh("input swipe 540 1600 540 600 700");
    assert!(
        t.elapsed() >= Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );

    // A password field shows bullets in the dump; the log never shows typed text.
    sh("am start -n com.android.settings/.accounts.AddAccountSettings");
    let (x, y) = centre(&sh("uiautomator dump /dev/tty"), "account_password");
    sh(&format!("input tap {x} {y}"));
    sh("input text hunter2");
    let dump = sh("uiautomator dump /dev/tty");
    assert!(
        dump.contains("text=\"\u{2022}\u{2022}\u{2022}\u{2022}\u{2022}\u{2022}\u{2022}\""),
        "{dump}"
    );
    assert!(dump.contains("password=\"true\""));
    assert!(!dump.contains("hunter2"));
    let log = sh("logcat -d");
    assert!(
        log.contains("text: 7 characters") && !log.contains("hunter2"),
        "{log}"
    );
}
