//! What a user sees through `adb`: attach, shell with exit codes, exec-out screenshots, push
//! and pull, an interactive shell, and a device that goes away.
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};

use droidmesh_sim::testkit::{AdbServer, require_adb};
use droidmesh_sim::{SimFleet, SimOptions};

async fn fleet(devices: usize) -> SimFleet {
    droidmesh_sim::start(SimOptions {
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices,
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn adb_attaches_two_devices_and_runs_commands_like_a_phone() {
    if !require_adb("adb_attaches_two_devices_and_runs_commands_like_a_phone") {
        return;
    }
    let fleet = fleet(2).await;
    let adb = AdbServer::start().unwrap();
    let serials: Vec<String> = fleet
        .addrs()
        .iter()
        .map(|a| adb.connect(*a).unwrap())
        .collect();
    let listing = String::from_utf8(adb.adb(&["devices", "-l"]).unwrap().stdout).unwrap();
    for s in &serials {
        assert!(
            listing.contains(s.as_str()) && listing.contains("model:DroidMesh_Sim"),
            "{listing}"
        );
    }
    let s = &serials[0];
    // Exit codes travel over shell v2.
    let out = adb.adb(&["-s", s, "shell", "no_such_tool"]).unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no_such_tool: inaccessible or not found")
    );
    assert_eq!(
        adb.adb(&["-s", s, "shell", "false"]).unwrap().status.code(),
        Some(1)
    );
    assert_eq!(
        adb.shell(s, "getprop ro.build.version.sdk").unwrap().trim(),
        "34"
    );
    assert_eq!(
        adb.shell(s, "wm size").unwrap().trim(),
        "Physical size: 1080x2400"
    );
    assert!(
        adb.shell(s, "pm list packages")
            .unwrap()
            .contains("package:com.android.settings\n")
    );

    // Settings toggles are ground truth the apps show.
    adb.shell(s, "settings put global wifi_on 1").unwrap();
    adb.shell(s, "am start -n com.android.settings/.Settings")
        .unwrap();
    let dump = adb.shell(s, "uiautomator dump /dev/tty").unwrap();
    assert!(
        dump.trim_end()
            .ends_with("UI hierchary dumped to: /dev/tty"),
        "{dump}"
    );
    assert!(
        dump.contains("text=\"ON\""),
        "the Wi-Fi switch shows the setting"
    );
    let file = adb.shell(s, "uiautomator dump").unwrap();
    assert_eq!(
        file.trim(),
        "UI hierchary dumped to: /sdcard/window_dump.xml"
    );
    assert!(
        adb.shell(s, "cat /sdcard/window_dump.xml")
            .unwrap()
            .starts_with("<?xml")
    );

    // The second device is independent of the first.
    assert_eq!(
        adb.shell(&serials[1], "settings get global wifi_on")
            .unwrap()
            .trim(),
        "0"
    );

    // A real PNG of the screen through exec-out.
    let png = adb
        .adb(&["-s", s, "exec-out", "screencap", "-p"])
        .unwrap()
        .stdout;
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (1080, 2400));

    // push and pull through sync:, bigger than one WRTE.
    let dir = std::env::temp_dir().join(format!("droidmesh-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("in.bin");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let push = adb
        .adb(&[
            "-s",
            s,
            "push",
            src.to_str().unwrap(),
            "/sdcard/Download/in.bin",
        ])
        .unwrap();
    assert!(push.status.success(), "{push:?}");
    let dst = dir.join("out.bin");
    let pull = adb
        .adb(&[
            "-s",
            s,
            "pull",
            "/sdcard/Download/in.bin",
            dst.to_str().unwrap(),
        ])
        .unwrap();
    assert!(pull.status.success(), "{pull:?}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    let missing = adb
        .adb(&["-s", s, "pull", "/sdcard/nope.txt", dst.to_str().unwrap()])
        .unwrap();
    assert!(!missing.status.success());
    std::fs::remove_dir_all(&dir).unwrap();

    // An interactive shell reads commands from stdin.
    let mut child = Command::new("adb")
        .args(["-P", &adb.port.to_string(), "-s", s, "shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo from-stdin\nexit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("from-stdin"),
        "{out:?}"
    );

    // A device that stops goes offline or away in the server's list; adb does not hang.
    fleet.shutdown().await;
    let started = std::time::Instant::now();
    let out = adb.adb(&["-s", s, "shell", "echo still-there"]).unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("still-there"));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
