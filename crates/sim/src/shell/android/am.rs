//! `am` (start, start-activity, force-stop, kill, broadcast, instrument) and `monkey -p PKG`:
//! how tools open and stop apps. As on Android 14, `am start` prints `Starting: Intent {…}`,
//! sends warnings and errors to stderr (to stdout with `-W`) and exits 0 even when nothing
//! started.
use std::fmt::Write;

use super::intent::Intent;
use crate::device::Device;
use crate::shell::Output;

/// The app and screen an `am start -n pkg/activity` component names.
fn resolve_component(dev: &Device, component: &str) -> Option<(usize, usize)> {
    let (pkg, activity) = component.split_once('/')?;
    let app = dev.apps.app_index(pkg)?;
    let screens = &dev.apps.apps.get(app)?.screens;
    let full = |a: &str| {
        if a.starts_with('.') {
            format!("{pkg}{a}")
        } else {
            a.to_owned()
        }
    };
    let wanted = full(activity);
    let screen = screens.iter().position(|s| full(&s.activity) == wanted)?;
    Some((app, screen))
}

/// Where an intent without a component goes: Settings' screens for `android.settings.*`
/// actions, the launcher for HOME, an app's launcher activity for MAIN with a package.
fn resolve_implicit(dev: &Device, intent: &Intent) -> Option<(usize, Option<usize>)> {
    let settings = dev.apps.app_index("com.android.settings");
    let screen_of = |app: usize, id: &str| {
        dev.apps
            .apps
            .get(app)?
            .screens
            .iter()
            .position(|s| s.id == id)
    };
    let action = intent.action.as_deref().unwrap_or("");
    let settings_screen = match action {
        "android.settings.SETTINGS" => Some("main"),
        "android.settings.WIFI_SETTINGS"
        | "android.settings.WIRELESS_SETTINGS"
        | "android.settings.AIRPLANE_MODE_SETTINGS"
        | "android.settings.DATA_ROAMING_SETTINGS" => Some("network"),
        "android.settings.DISPLAY_SETTINGS" => Some("display"),
        "android.settings.DEVICE_INFO_SETTINGS" => Some("about"),
        "android.settings.ADD_ACCOUNT_SETTINGS" | "android.settings.SYNC_SETTINGS" => {
            Some("accounts")
        }
        _ => None,
    };
    if let (Some(id), Some(app)) = (settings_screen, settings) {
        return Some((app, screen_of(app, id)));
    }
    let main = action.is_empty() || action == "android.intent.action.MAIN";
    if main
        && intent
            .categories
            .iter()
            .any(|c| c == "android.intent.category.HOME")
    {
        return Some((0, None));
    }
    let app = dev.apps.app_index(intent.package.as_deref()?)?;
    (main && intent.data.is_none()).then_some((app, None))
}

fn am_start(dev: &mut Device, args: &[String]) -> Output {
    let intent = match Intent::parse(args) {
        Ok(i) => i,
        Err(e) => {
            return Output::fail(
                255,
                format!(
                    "Exception occurred while executing 'start':\njava.lang.IllegalArgumentException: {e}"
                ),
            );
        }
    };
    let mut out = Output::ok(format!("Starting: {}\n", intent.describe(false)));
    let report = |out: &mut Output, line: String| {
        let to = if intent.wait {
            &mut out.stdout
        } else {
            &mut out.stderr
        };
        to.extend_from_slice(line.as_bytes());
    };
    let target = match &intent.component {
        Some(c) => match resolve_component(dev, c) {
            Some((app, screen)) => Some((app, Some(screen))),
            None => {
                let (pkg, cls) = c.split_once('/').unwrap_or((c.as_str(), ""));
                let full = if cls.starts_with('.') {
                    format!("{pkg}{cls}")
                } else {
                    cls.to_owned()
                };
                report(
                    &mut out,
                    format!(
                        "Error type 3\nError: Activity class {{{pkg}/{full}}} does not exist.\n"
                    ),
                );
                return out;
            }
        },
        None => resolve_implicit(dev, &intent),
    };
    let Some((app, screen)) = target else {
        report(
            &mut out,
            format!(
                "Error: Activity not started, unable to resolve {}\n",
                intent.describe(true)
            ),
        );
        return out;
    };
    if intent.stop_first {
        dev.force_stop(app);
    }
    let before = dev.top();
    let cold = dev.procs.get(app).is_none();
    dev.launch(app, screen);
    if dev.top() == before && app != 0 {
        report(
            &mut out,
            "Warning: Activity not started, its current task has been brought to the front\n"
                .into(),
        );
    }
    if intent.wait {
        let (package, activity) = dev.focus_component();
        let short = match activity.strip_prefix(package.as_str()) {
            Some(rest) if rest.starts_with('.') => rest.to_owned(),
            _ => activity.clone(),
        };
        let (state, total) = if cold { ("COLD", 412) } else { ("HOT", 58) };
        out.stdout.extend_from_slice(
            format!("Status: ok\nLaunchState: {state}\nActivity: {package}/{short}\nTotalTime: {total}\nWaitTime: {}\nComplete\n", total + 6)
                .as_bytes(),
        );
    }
    out
}

/// Broadcasts only the system may send.
const PROTECTED: &[&str] = &[
    "android.intent.action.AIRPLANE_MODE",
    "android.intent.action.BOOT_COMPLETED",
    "android.intent.action.BATTERY_CHANGED",
    "android.intent.action.SCREEN_ON",
    "android.intent.action.SCREEN_OFF",
    "android.intent.action.ACTION_POWER_CONNECTED",
    "android.intent.action.ACTION_SHUTDOWN",
];

fn broadcast(dev: &mut Device, args: &[String]) -> Output {
    let mut intent = match Intent::parse(args) {
        Ok(i) => i,
        Err(e) => {
            return Output::fail(
                255,
                format!(
                    "Exception occurred while executing 'broadcast':\njava.lang.IllegalArgumentException: {e}"
                ),
            );
        }
    };
    intent.flags |= 0x0040_0000;
    let mut out = Output::ok(format!("Broadcasting: {}\n", intent.describe(false)));
    match intent.action.as_deref() {
        Some(a) if PROTECTED.contains(&a) => {
            out.stderr = format!(
                "Exception occurred while executing 'broadcast':\njava.lang.SecurityException: Permission Denial: not allowed to send broadcast {a} from pid={}, uid=2000\n\tat com.android.server.am.BroadcastController.checkBroadcastFromSystem(BroadcastController.java:1003)\n",
                crate::shell::SHELL_PID
            )
            .into_bytes();
            out.code = 255;
        }
        // ADBKeyBoard (while it is the selected keyboard) sets no result; the clipboard
        // helper answers its two actions with a result code and data.
        _ => {
            super::keyboard::adb_keyboard_receive(dev, &intent);
            let line = match clipper_receive(dev, &intent) {
                Some(r) => format!(
                    "Broadcast completed: result={}, data=\"{}\"\n",
                    r.code, r.data
                ),
                None => "Broadcast completed: result=0\n".to_owned(),
            };
            out.stdout.extend_from_slice(line.as_bytes());
        }
    }
    out
}

/// Delivers a broadcast to the clipboard helper unless it names another package or component.
fn clipper_receive(dev: &mut Device, intent: &Intent) -> Option<crate::clipboard::Reply> {
    use crate::clipboard::CLIPPER_PACKAGE;
    let elsewhere = intent
        .package
        .as_deref()
        .is_some_and(|p| p != CLIPPER_PACKAGE)
        || intent
            .component
            .as_deref()
            .is_some_and(|c| c.split('/').next() != Some(CLIPPER_PACKAGE));
    if elsewhere {
        return None;
    }
    let action = intent.action.as_deref()?;
    dev.clipper_receive(action, intent.extra("text"))
}

/// `am instrument`: no test package is installed, so no instrumentation can be found.
fn instrument(args: &[String]) -> Output {
    let Some(component) = args
        .iter()
        .rev()
        .find(|a| !a.starts_with('-') && a.contains('/'))
    else {
        return Output::fail(
            255,
            "Error: no instrumentation component given\nusage: am instrument [-w] [-r] [-e <NAME> <VALUE>] COMPONENT",
        );
    };
    Output {
        stdout: format!(
            "INSTRUMENTATION_STATUS: id=ActivityManagerService\nINSTRUMENTATION_STATUS: Error=Unable to find instrumentation info for: ComponentInfo{{{component}}}\nINSTRUMENTATION_STATUS_CODE: -1\nandroid.util.AndroidException: INSTRUMENTATION_FAILED: {component}\n"
        )
        .into_bytes(),
        stderr: Vec::new(),
        code: 1,
    }
}

pub(super) fn am(dev: &mut Device, args: &[String]) -> Output {
    let Some((sub, rest)) = args.split_first() else {
        return Output::fail(255, USAGE);
    };
    let package = || {
        rest.iter()
            .rev()
            .find(|a| !a.starts_with('-'))
            .and_then(|p| dev.apps.app_index(p))
    };
    match sub.as_str() {
        "start" | "start-activity" => am_start(dev, rest),
        "broadcast" => broadcast(dev, rest),
        "instrument" => instrument(rest),
        "force-stop" | "stop-app" => {
            if let Some(app) = package() {
                dev.force_stop(app);
            }
            Output::default()
        }
        "kill" => {
            // Only a process in the background is killed.
            if let Some(app) = package().filter(|a| *a != dev.top().app) {
                dev.procs.stop(app);
            }
            Output::default()
        }
        "kill-all" => {
            let top = dev.top().app;
            let background: Vec<usize> = dev
                .procs
                .iter()
                .map(|p| p.app)
                .filter(|a| *a != top)
                .collect();
            for app in background {
                dev.procs.stop(app);
            }
            Output::default()
        }
        other => Output::fail(255, format!("Unknown command: {other}\n{USAGE}")),
    }
}

const USAGE: &str = "Activity manager (activity) commands:\n  start-activity [-W] [-S] [--user <USER_ID> | current] <INTENT>\n  force-stop [--user <USER_ID> | all | current] <PACKAGE>\n  kill [--user <USER_ID> | all | current] <PACKAGE>\n  kill-all\n  broadcast [--user <USER_ID> | all | current] <INTENT>\n  instrument [-w] [-r] [-e <NAME> <VALUE>] <COMPONENT>";

/// `monkey -p PACKAGE [-c CATEGORY] COUNT`: opens the app's launcher activity, as tools use it.
pub(super) fn monkey(dev: &mut Device, args: &[String]) -> Output {
    let mut echo = String::new();
    for a in args {
        let _ = writeln!(echo, "  bash arg: {a}");
    }
    let package = args
        .iter()
        .position(|a| a == "-p")
        .and_then(|i| args.get(i + 1));
    let Some(package) = package else {
        return Output {
            stdout: echo.into_bytes(),
            stderr:
                b"** Error: monkey needs a package (-p PACKAGE) to run on the simulated phone\n"
                    .to_vec(),
            code: 255,
        };
    };
    let app = dev
        .apps
        .app_index(package)
        .filter(|a| dev.apps.apps.get(*a).is_some_and(|app| app.launcher));
    match app {
        Some(app) => {
            dev.launch(app, None);
            Output::ok(
                echo + "Events injected: 1\n## Network stats: elapsed time=14ms (0ms mobile, 0ms wifi, 14ms not connected)\n",
            )
        }
        None => Output {
            stdout: echo.into_bytes(),
            stderr: b"** No activities found to run, monkey aborted.\n".to_vec(),
            code: 252,
        },
    }
}
