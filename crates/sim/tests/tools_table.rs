//! What widely used automation tools send over ADB, and what the simulator must answer: the
//! answer of a user build of Android 14, consistent with the simulator's own state (its apps,
//! the screen in front, its settings). Rows run in order through Debian's adb against one
//! phone; some change the phone (open an app, turn Wi-Fi on) and later rows read that change.
//!
//! Each row: the tool that sends it, the command, the exit status, patterns (regular
//! expressions, multi-line) that stdout must match, and patterns stderr must match. A pattern
//! starting with `!` must not match.
use droidmesh_sim::testkit::{one_phone, require_adb};
use regex::Regex;

struct Row {
    tool: &'static str,
    cmd: &'static str,
    code: i32,
    out: &'static [&'static str],
    err: &'static [&'static str],
}

const fn row(
    tool: &'static str,
    cmd: &'static str,
    code: i32,
    out: &'static [&'static str],
    err: &'static [&'static str],
) -> Row {
    Row {
        tool,
        cmd,
        code,
        out,
        err,
    }
}

const SETTINGS_FOCUS: &str = r"(?m)^  mCurrentFocus=Window\{[0-9a-f]+ u0 com\.android\.settings/com\.android\.settings\.Settings\}$";
const SETTINGS_APP: &str =
    r"(?m)^  mFocusedApp=ActivityRecord\{[0-9a-f]+ u0 com\.android\.settings/\.Settings t\d+\}$";

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // scrcpy: the API level, the Wi-Fi address for tcpip, then its server.
    row("scrcpy", "getprop ro.build.version.sdk", 0, &["^34\n$"], &[]),
    row("scrcpy", "getprop service.adb.tcp.port", 0, &["^\n$"], &[]),
    row("scrcpy", "ip route", 0, &["!wlan0"], &[]),
    row("scrcpy", "CLASSPATH=/data/local/tmp/scrcpy-server.jar app_process / com.genymobile.scrcpy.Server 3.3.1 tunnel_forward=true", 134, &["^$"], &["^Aborted\n$"]),
    row("scrcpy", "logcat -d -s appproc", 0, &[r"E appproc: ERROR: could not find class 'com\.genymobile\.scrcpy\.Server'"], &[]),
    // adb itself: `adb logcat ARGS` runs logcat in the shell's place (Debian's adb 29, then newer).
    row("adb", "export ANDROID_LOG_TAGS=\"''\"; exec logcat '-d' '-s' 'appproc'", 0, &[r"^--------- beginning of main\n.* E appproc: ERROR: could not find class"], &[]),
    row("adb", "export ANDROID_LOG_TAGS=''; exec logcat '-d' '-t' '1' '-s' 'appproc'; echo never", 0, &["!never"], &[]),
    // uiautomator2 / adbutils: the server jar's hash, screen size and rotation, open an app.
    row("uiautomator2", "toybox md5sum /data/local/tmp/u2.jar", 1, &[], &["md5sum: /data/local/tmp/u2.jar: No such file or directory"]),
    row("uiautomator2", "echo -n hello > /data/local/tmp/h.txt; toybox md5sum /data/local/tmp/h.txt", 0, &["^5d41402abc4b2a76b9719d911017c592  /data/local/tmp/h.txt\n$"], &[]),
    row("adbutils", "wm size", 0, &["^Physical size: 1080x2400\n$"], &[]),
    row("adbutils", "dumpsys display", 0, &[r"DisplayViewport\{type=INTERNAL, valid=true, isActive=true, displayId=0, uniqueId='local:\d+', physicalPort=0, orientation=0, .*deviceWidth=1080, deviceHeight=2400\}", r"real 1080 x 2400", "!orientation=[1-3]"], &[]),
    row("adbutils", "dumpsys SurfaceFlinger --display-id", 0, &[r"^Display \d+ \(HWC display 0\): port=0 "], &[]),
    row("adbutils", "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1", 0, &["(?m)^  bash arg: -p\n  bash arg: com.android.settings\n  bash arg: -c\n  bash arg: android.intent.category.LAUNCHER\n  bash arg: 1$", "(?m)^Events injected: 1$"], &[]),
    row("adbutils", "dumpsys window windows", 0, &[SETTINGS_FOCUS, SETTINGS_APP], &[]),
    row("adbutils", "dumpsys activity activities", 0, &[r"(?m)^    mResumedActivity: ActivityRecord\{[0-9a-f]+ u0 com\.android\.settings/\.Settings t\d+\}$"], &[]),
    row("adbutils", "dumpsys activity top", 0, &[r"(?m)^TASK com\.android\.settings id=\d+ userId=0$", r"(?m)^  ACTIVITY com\.android\.settings/\.Settings [0-9a-f]+ pid=\d+$"], &[]),
    row("uiautomator2", "ps -A", 0, &[r"(?m)^USER +PID +PPID +VSZ +RSS +WCHAN +ADDR +S +NAME$", r"(?m)^system +\d+ +\d+ +\d+ +\d+ +\S+ +0 +S +com\.android\.settings$", "(?m)^shell .* (ps|toybox)$"], &[]),
    row("uiautomator2", "pidof com.android.settings", 0, &[r"^\d+\n$"], &[]),
    row("uiautomator2", "pidof com.android.contacts", 1, &["^$"], &[]),
    row("adbutils", "monkey -p com.example.none -c android.intent.category.LAUNCHER 1", 252, &["bash arg: com.example.none"], &[r"\*\* No activities found to run, monkey aborted\."]),
    row("adbutils", "pm path com.android.settings", 0, &[r"^package:/\S+\.apk\n$"], &[]),
    row("adbutils", "pm path com.example.none", 1, &["^$"], &[]),
    row("adbutils", "dumpsys package com.droidmesh.notes", 0, &[r"(?m)^  Package \[com\.droidmesh\.notes\] \([0-9a-f]+\):$", r"(?m)^    versionCode=\d+ minSdk=\d+ targetSdk=34$", r"(?m)^    versionName=1\.0$", r"(?m)^    pkgFlags=\[ HAS_CODE ALLOW_CLEAR_USER_DATA \]$", r"(?m)^ +firstInstallTime=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", r"(?m)^    lastUpdateTime=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", r"signatures=PackageSignatures\{[0-9a-f]+ version:\d, signatures:\[[0-9a-f]+\]"], &[]),
    row("adbutils", "dumpsys package com.android.settings", 0, &[r"(?m)^    versionName=14$", r"pkgFlags=\[ SYSTEM HAS_CODE", r#"(?m)^        [0-9a-f]+ com\.android\.settings/\.Settings filter [0-9a-f]+\n          Action: "android\.intent\.action\.MAIN"\n          Category: "android\.intent\.category\.LAUNCHER""#], &[]),
    row("adbutils", "dumpsys battery", 0, &["(?m)^  AC powered: false$", "(?m)^  USB powered: true$", "(?m)^  Wireless powered: false$", "(?m)^  Max charging current: \\d+$", "(?m)^  status: 2$", "(?m)^  health: 2$", "(?m)^  present: true$", "(?m)^  level: 87$", "(?m)^  scale: 100$", "(?m)^  voltage: \\d+$", "(?m)^  temperature: \\d+$", "(?m)^  technology: Li-ion$"], &[]),
    row("adbutils", "dumpsys power", 0, &["(?m)^  mWakefulness=Awake$", "mHoldingDisplaySuspendBlocker=true"], &[]),
    row("adbutils", "settings get system screen_brightness_mode", 0, &["^0\n$"], &[]),
    row("adbutils", "ifconfig wlan0", 0, &["!inet addr"], &[]),
    row("adbutils", "svc wifi enable", 0, &["^$"], &[]),
    row("adbutils", "ifconfig wlan0", 0, &[r"inet addr:192\.168\.1\.57  Bcast:192\.168\.1\.255  Mask:255\.255\.255\.0"], &[]),
    row("adbutils", "ip addr show dev wlan0", 0, &[r"(?m)^    inet 192\.168\.1\.57/24 brd 192\.168\.1\.255 scope global wlan0$"], &[]),
    row("scrcpy", "ip route", 0, &[r"(?m)^192\.168\.1\.0/24 dev wlan0 proto kernel scope link src 192\.168\.1\.57 $"], &[]),
    row("adbutils", "rm -f /data/local/tmp/uidump.xml; uiautomator dump /data/local/tmp/uidump.xml && echo success", 0, &["(?m)^UI hierchary dumped to: /data/local/tmp/uidump.xml\nsuccess$"], &[]),
    row("adbutils", "head -c 5 /data/local/tmp/uidump.xml", 0, &["^<\\?xml$"], &[]),
    row("adbutils", "which screenrecord", 1, &["^$"], &[]),
    row("uiautomator2", "am broadcast -a ADB_KEYBOARD_INPUT_TEXT --es text aGk=", 0, &[r"(?m)^Broadcasting: Intent \{ act=ADB_KEYBOARD_INPUT_TEXT flg=0x400000 \(has extras\) \}$", "(?m)^Broadcast completed: result=0$"], &[]),
    row("adbutils", "am broadcast -a android.intent.action.AIRPLANE_MODE --ez state true", 255, &[], &[r"java\.lang\.SecurityException: Permission Denial: not allowed to send broadcast android\.intent\.action\.AIRPLANE_MODE from pid=\d+, uid=2000"]),
    row("uiautomator2", "ime list -s -a", 0, &["^com.android.inputmethod.latin/.LatinIME\n$"], &[]),
    row("uiautomator2", "settings get secure default_input_method", 0, &["^com.android.inputmethod.latin/.LatinIME\n$"], &[]),
    row("uiautomator2", "CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p 9008", 134, &[], &["Aborted"]),
    // appium-adb: API level, focus, lock state, keyboard, packages, starting and stopping.
    row("appium-adb", "echo ping", 0, &["^ping\n$"], &[]),
    row("appium-adb", "whoami", 0, &["^shell\n$"], &[]),
    row("appium-adb", "su root id", 127, &[], &["su: inaccessible or not found"]),
    row("appium-adb", "getprop persist.sys.locale", 0, &["^en-US\n$"], &[]),
    row("appium-adb", "getprop ro.product.locale", 0, &["^en-US\n$"], &[]),
    row("appium-adb", "getprop persist.sys.no.such sentinel", 0, &["^sentinel\n$"], &[]),
    row("appium-adb", "wm density", 0, &["^Physical density: 420\n$"], &[]),
    row("appium-adb", "dumpsys window displays", 0, &[SETTINGS_FOCUS, SETTINGS_APP], &[]),
    row("appium-adb", "dumpsys window", 0, &["mScreenOnFully=true", r"KeyguardStateMonitor\n\s+mIsShowing=false", r"\s+mInputRestricted=false", r"\s+screenState=SCREEN_STATE_ON", "!mCurrentFocus=[^\n]*Keyguard"], &[]),
    row("appium-adb", "dumpsys input", 0, &["(?m)^      SurfaceOrientation: 0$"], &[]),
    row("appium-adb", "dumpsys input_method", 0, &["mInputShown=false", "mIsInputViewShown=false", "mCurMethodId=com.android.inputmethod.latin/.LatinIME"], &[]),
    row("appium-adb", "ime list -a", 0, &["(?m)^com.android.inputmethod.latin/.LatinIME:$", "(?m)^  mId=com.android.inputmethod.latin/.LatinIME "], &[]),
    row("appium-adb", "ime enable io.appium.settings/.UnicodeIME", 0, &[], &["Unknown input method io.appium.settings/.UnicodeIME cannot be enabled for user #0"]),
    row("appium-adb", "cmd package list packages --show-versioncode", 0, &["(?m)^package:com.android.settings versionCode:34$", "(?m)^package:com.droidmesh.notes versionCode:1$"], &[]),
    row("appium-adb", "cmd package list packages --user 0", 0, &["(?m)^package:com.android.settings$", "(?m)^package:com.droidmesh.notes$"], &[]),
    row("appium-adb", "cmd package resolve-activity --brief com.android.contacts", 0, &["(?m)^com.android.contacts/.activities.PeopleActivity$"], &[]),
    row("appium-adb", "am start-activity -W -S -a android.intent.action.MAIN -c android.intent.category.LAUNCHER -f 0x10200000 -n com.android.contacts/.activities.PeopleActivity", 0, &[r"(?m)^Starting: Intent \{ act=android\.intent\.action\.MAIN cat=\[android\.intent\.category\.LAUNCHER\] flg=0x10200000 cmp=com\.android\.contacts/\.activities\.PeopleActivity \}$", "(?m)^Status: ok$", "(?m)^LaunchState: COLD$", "(?m)^Activity: com.android.contacts/.activities.PeopleActivity$", r"(?m)^TotalTime: \d+$", r"(?m)^WaitTime: \d+$", "(?m)^Complete$"], &[]),
    row("appium-adb", "dumpsys activity processes", 0, &[r"ProcessRecord\{[0-9a-f]+ \d+:com\.android\.contacts/u0a\d+\}"], &[]),
    row("appium-adb", "am start -n com.android.contacts/.Nope", 0, &[r"^Starting: Intent \{ cmp=com\.android\.contacts/\.Nope \}\n$"], &[r"^Error type 3\nError: Activity class \{com\.android\.contacts/com\.android\.contacts\.Nope\} does not exist\.\n$"]),
    row("appium-adb", "am start -W -a android.intent.action.VIEW -d https://example.com/a/b", 0, &[r"(?m)^Starting: Intent \{ act=android\.intent\.action\.VIEW dat=https://example\.com/\.\.\. \}$", r"(?m)^Error: Activity not started, unable to resolve Intent \{ act=android\.intent\.action\.VIEW dat=https://example\.com/\.\.\. flg=0x10000000 \}$"], &[]),
    row("appium-adb", "am force-stop com.android.contacts", 0, &["^$"], &[]),
    row("appium-adb", "pidof com.android.contacts", 1, &["^$"], &[]),
    row("appium-adb", "dumpsys window windows | grep -E 'mCurrentFocus|mFocusedApp'", 0, &["com.android.launcher3/com.android.launcher3.uioverrides.QuickstepLauncher", "!contacts"], &[]),
    row("appium-adb", "pm grant com.droidmesh.notes android.permission.CAMERA", 255, &[], &["java.lang.SecurityException: Package com.droidmesh.notes has not requested permission android.permission.CAMERA"]),
    row("appium-adb", "pm grant com.example.none android.permission.CAMERA", 255, &[], &["java.lang.IllegalArgumentException: Unknown package: com.example.none"]),
    row("appium-adb", "ps --help", 0, &["(?m)^-A "], &[]),
    row("appium-adb", "locksettings help && echo __PASS__", 0, &["(?m)^__PASS__$"], &[]),
    row("appium-adb", "locksettings get-disabled", 0, &["^false\n$"], &[]),
    row("appium-adb", "wm dismiss-keyguard", 0, &["^$"], &[]),
    row("appium-adb", "cmd location is-location-enabled", 0, &["^true\n$"], &[]),
    row("appium-adb", "cmd connectivity airplane-mode enable; settings get global airplane_mode_on; cmd connectivity airplane-mode", 0, &["^1\nenabled\n$"], &[]),
    row("appium-adb", "cmd wifi set-wifi-enabled disabled; settings get global wifi_on; cmd wifi status", 0, &["^0\nWifi is disabled\n"], &[]),
    row("appium-adb", "am instrument -w io.appium.uiautomator2.server.test/androidx.test.runner.AndroidJUnitRunner", 1, &["INSTRUMENTATION_STATUS: Error=Unable to find instrumentation info for: ComponentInfo\\{io.appium.uiautomator2.server.test/androidx.test.runner.AndroidJUnitRunner\\}"], &[]),
    row("appium-adb", "date +%Y-%m-%dT%T%z", 0, &[r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}\n$"], &[]),
    row("appium-adb", "run-as com.android.settings id", 1, &[], &["^run-as: package not debuggable: com.android.settings\n$"]),
    row("appium-adb", "run-as com.example.none id", 1, &[], &["^run-as: unknown package: com.example.none\n$"]),
    // DroidRun / Mobilerun: the launch activity, the Portal app it looks for, its gestures.
    row("droidrun", "cmd package resolve-activity --brief com.droidmesh.notes", 0, &["^priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=true\ncom.droidmesh.notes/.MainActivity\n$"], &[]),
    row("droidrun", "content query --uri content://com.mobilerun.portal/state_full", 0, &["!Row: 0"], &["(?m)^Error while accessing provider:com.mobilerun.portal$", "java.lang.IllegalStateException: Could not find provider: com.mobilerun.portal"]),
    row("droidrun", "settings get secure enabled_accessibility_services", 0, &["^null\n$"], &[]),
    row("droidrun", "pm list packages -3", 0, &["^package:ca.zgrs.clipper\npackage:com.droidmesh.clock\npackage:com.droidmesh.expenses\npackage:com.droidmesh.notes\npackage:com.droidmesh.tasks\n$"], &[]),
    row("droidrun", "date", 0, &[r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \w+ \d{4}\n$"], &[]),
    row("droidrun", "input keyevent --longpress 3", 0, &["^$"], &[]),
    // Filters tools pipe answers into.
    row("filters", "dumpsys window | grep -E 'mCurrentFocus|mFocusedApp' | wc -l", 0, &["^4\n$"], &[]),
    row("filters", "dumpsys window windows | grep -o 'u0 [^ ]*/[^ }]*' | head -n 1", 0, &["^u0 com.android.launcher3/com.android.launcher3.uioverrides.QuickstepLauncher\n$"], &[]),
    row("filters", "pm list packages | grep -q com.android.settings && echo yes", 0, &["^yes\n$"], &[]),
    row("filters", "pm list packages | grep -c -i ANDROID", 0, &[r"^\d+\n$"], &[]),
    row("filters", "pm list packages | grep -v -e android -e droidmesh -e clipper", 1, &["^$"], &[]),
    row("filters", "getprop | grep -F '[ro.build.version.sdk]'", 0, &[r"^\[ro\.build\.version\.sdk\]: \[34\]\n$"], &[]),
    row("filters", "pm list packages -3 | cut -d: -f2", 0, &["^ca.zgrs.clipper\ncom.droidmesh.clock\ncom.droidmesh.expenses\ncom.droidmesh.notes\ncom.droidmesh.tasks\n$"], &[]),
    row("filters", "pm list packages -3 | tr -d '\\r' | tr : ' '", 0, &["^package ca.zgrs.clipper\npackage com.droidmesh.clock\npackage com.droidmesh.expenses\npackage com.droidmesh.notes\npackage com.droidmesh.tasks\n$"], &[]),
    row("filters", "pm list packages | sort -r | head -n 1", 0, &["^package:com.droidmesh.tasks\n$"], &[]),
    row("filters", "echo ab | grep -w a", 1, &["^$"], &[]),
];

fn check(pattern: &str, text: &str) -> bool {
    let (negate, pattern) = match pattern.strip_prefix('!') {
        Some(p) => (true, p),
        None => (false, pattern),
    };
    let re = Regex::new(pattern).unwrap_or_else(|e| panic!("bad pattern {pattern}: {e}"));
    re.is_match(text) != negate
}

#[tokio::test(flavor = "multi_thread")]
async fn each_tools_commands_get_android_14s_answers() {
    if !require_adb("each_tools_commands_get_android_14s_answers") {
        return;
    }
    let (_fleet, adb, s) = one_phone().await.unwrap();
    let mut failures = Vec::new();
    for r in TABLE {
        let o = adb.adb(&["-s", &s, "shell", r.cmd]).unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        let code = o.status.code().unwrap_or(-1);
        let mut wrong = Vec::new();
        if code != r.code {
            wrong.push(format!("exit {code}, expected {}", r.code));
        }
        for p in r.out.iter().filter(|p| !check(p, &out)) {
            wrong.push(format!("stdout does not match {p}"));
        }
        for p in r.err.iter().filter(|p| !check(p, &err)) {
            wrong.push(format!("stderr does not match {p}"));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "[{}] {}\n  {}\n  stdout: {out:?}\n  stderr: {err:?}",
                r.tool,
                r.cmd,
                wrong.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows answered unlike Android 14:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}
