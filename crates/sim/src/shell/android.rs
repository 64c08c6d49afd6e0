//! Android's own commands: `input`, `am`, `monkey`, `pm`/`cmd package`, `dumpsys`,
//! `settings`, `getprop`/`setprop`, `wm`, `svc`, `ime`, `logcat`, `uiautomator` and
//! `screencap`, with the output formats and error texts of a user build of Android 14.
//! `logcat` dumps the simulator's event log and ends (as `logcat -d`): a shell command here
//! runs to completion, so it cannot follow the log.
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use super::{Input, Output};
use crate::apps::split_setting;
use crate::device::Device;
use crate::{render, xml};

/// Runs an Android command; `None` if `name` is not one. `stdin` is the command's input.
pub fn command(
    device: &Mutex<Device>,
    name: &str,
    args: &[String],
    stdin: &mut Input,
) -> Option<Output> {
    // A gesture's duration passes after the device is released, as the finger moves.
    let mut hold = 0u64;
    let out = {
        let dev = &mut *super::lock(device);
        android(dev, name, args, stdin, &mut hold)?
    };
    if hold > 0 {
        std::thread::sleep(std::time::Duration::from_millis(hold).min(super::MAX_SLEEP));
    }
    Some(out)
}

fn android(
    dev: &mut Device,
    name: &str,
    args: &[String],
    stdin: &mut Input,
    hold: &mut u64,
) -> Option<Output> {
    Some(match name {
        "input" => {
            let (out, ms) = input(dev, args);
            *hold = ms;
            out
        }
        "am" => am(dev, args),
        "monkey" => monkey(dev, args),
        "pm" => pm(dev, args, stdin),
        "logcat" => logcat(dev, args),
        "ime" => ime(args),
        "cmd" => match args.split_first() {
            Some((svc, rest)) if svc == "package" => pm(dev, rest, stdin),
            Some((svc, rest)) if svc == "input_method" => ime(rest),
            Some((svc, rest)) if svc == "settings" => settings(dev, rest),
            Some((svc, _)) => Output::fail(20, format!("cmd: Can't find service: {svc}")),
            None => Output::fail(
                20,
                "cmd: No service specified; use -l to list all running services",
            ),
        },
        "dumpsys" => dumpsys(dev, args),
        "settings" => settings(dev, args),
        "getprop" => getprop(dev, args),
        "setprop" => match args {
            [k, v] => {
                dev.props.insert(k.clone(), v.clone());
                Output::default()
            }
            _ => Output::fail(1, "usage: setprop NAME VALUE"),
        },
        "wm" => wm(args),
        "svc" => svc(dev, args),
        "uiautomator" => uiautomator(dev, args),
        "screencap" => screencap(dev, args),
        _ => return None,
    })
}

fn int(s: &str) -> Option<i32> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v as i32)
}

const INPUT_USAGE: &str = "Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n\nThe sources are:\n      keyboard\n      touchscreen\n\nThe commands and default sources are:\n      text <string> (Default: keyboard)\n      keyevent [--longpress|--doubletap] <key code number or name> ... (Default: keyboard)\n      tap <x> <y> (Default: touchscreen)\n      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n      draganddrop <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n      press (Default: trackball)\n";

/// `input ...`; also how long the gesture lasts (a swipe's duration), in ms.
fn input(dev: &mut Device, args: &[String]) -> (Output, u64) {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if matches!(
        args.first(),
        Some(
            &("touchscreen" | "keyboard" | "touchpad" | "mouse" | "stylus" | "dpad" | "trackball")
        )
    ) {
        args.remove(0);
    }
    if args.first() == Some(&"-d") {
        args.drain(..args.len().min(2));
    }
    let bad = |msg: &str| Output::fail(1, format!("Error: {msg}\n{INPUT_USAGE}"));
    let out = match args.as_slice() {
        ["tap", x, y] => match (int(x), int(y)) {
            (Some(x), Some(y)) => {
                dev.tap(x, y);
                Output::default()
            }
            _ => bad("tap needs numeric coordinates"),
        },
        ["swipe" | "draganddrop", x1, y1, x2, y2, rest @ ..] if rest.len() <= 1 => {
            let pts = (int(x1), int(y1), int(x2), int(y2));
            let dur = rest.first().map_or(Some(300), |d| d.parse::<u64>().ok());
            match (pts, dur) {
                ((Some(x1), Some(y1), Some(x2), Some(y2)), Some(dur)) => {
                    dev.swipe(x1, y1, x2, y2, dur);
                    return (Output::default(), dur);
                }
                _ => bad("swipe needs numeric coordinates and duration"),
            }
        }
        ["text", text] => {
            dev.type_text(&text.replace("%s", " "));
            Output::default()
        }
        ["keyevent", codes @ ..] if !codes.is_empty() => {
            for code in codes.iter().filter(|c| !c.starts_with("--")) {
                match keycode(code) {
                    Some(k) => dev.key(k),
                    None => return (bad(&format!("Unknown keycode: {code}")), 0),
                }
            }
            Output::default()
        }
        ["press"] => Output::default(),
        [] => Output::fail(1, INPUT_USAGE),
        [cmd, ..] => bad(&format!("Unknown command: {cmd}")),
    };
    (out, 0)
}

fn keycode(code: &str) -> Option<u32> {
    if let Ok(n) = code.parse::<u32>() {
        return (n < 400).then_some(n);
    }
    let name = code.strip_prefix("KEYCODE_").unwrap_or(code);
    let named = match name {
        "HOME" => 3,
        "BACK" => 4,
        "CALL" => 5,
        "ENDCALL" => 6,
        "DPAD_UP" => 19,
        "DPAD_DOWN" => 20,
        "DPAD_LEFT" => 21,
        "DPAD_RIGHT" => 22,
        "DPAD_CENTER" => 23,
        "VOLUME_UP" => 24,
        "VOLUME_DOWN" => 25,
        "POWER" => 26,
        "CAMERA" => 27,
        "TAB" => 61,
        "SPACE" => 62,
        "ENTER" => 66,
        "DEL" => 67,
        "MENU" => 82,
        "SEARCH" => 84,
        "ESCAPE" => 111,
        "FORWARD_DEL" => 112,
        "MOVE_HOME" => 122,
        "MOVE_END" => 123,
        "APP_SWITCH" => 187,
        "WAKEUP" => 224,
        "SLEEP" => 223,
        n if n.len() == 1 => {
            let c = n.chars().next()?;
            return match c {
                '0'..='9' => Some(7 + c.to_digit(10)?),
                'A'..='Z' => Some(29 + (c as u32 - 'A' as u32)),
                _ => None,
            };
        }
        _ => return None,
    };
    Some(named)
}

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

fn am(dev: &mut Device, args: &[String]) -> Output {
    match args.split_first() {
        Some((sub, rest)) if sub == "start" || sub == "start-activity" => {
            let mut component = None;
            let mut action = None;
            let wait = rest.iter().any(|a| a == "-W");
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-n" => component = it.next().cloned(),
                    "-a" => action = it.next().cloned(),
                    "-W" | "-S" | "-R" | "--activity-clear-task" => {}
                    "-c" | "-d" | "-t" | "-f" | "--user" => {
                        it.next();
                    }
                    other
                        if !other.starts_with('-')
                            && component.is_none()
                            && other.contains('/') =>
                    {
                        component = Some(other.to_owned());
                    }
                    _ => {}
                }
            }
            if let Some(c) = component {
                return match resolve_component(dev, &c) {
                    Some((app, screen)) => {
                        let cold = dev.top().app != app;
                        dev.launch(app, Some(screen));
                        let mut text = format!("Starting: Intent {{ cmp={c} }}\n");
                        if wait {
                            let (package, activity) = dev.focus_component();
                            let state = if cold { "COLD" } else { "HOT" };
                            let _ = write!(
                                text,
                                "Status: ok\nLaunchState: {state}\nActivity: {package}/{activity}\nTotalTime: 120\nWaitTime: 125\nComplete\n"
                            );
                        }
                        Output::ok(text)
                    }
                    None => Output::fail(
                        1,
                        format!(
                            "Starting: Intent {{ cmp={c} }}\nError type 3\nError: Activity class {{{c}}} does not exist."
                        ),
                    ),
                };
            }
            match action.as_deref() {
                Some("android.settings.SETTINGS" | "android.settings.WIFI_SETTINGS") => {
                    if let Some(app) = dev.apps.app_index("com.android.settings") {
                        dev.launch(app, None);
                    }
                    Output::ok(format!(
                        "Starting: Intent {{ act={} }}\n",
                        action.unwrap_or_default()
                    ))
                }
                Some(a) => Output::fail(
                    1,
                    format!(
                        "Starting: Intent {{ act={a} }}\nError: Activity not started, unable to resolve Intent {{ act={a} flg=0x10000000 }}"
                    ),
                ),
                None => Output::fail(
                    1,
                    "Error: no intent specified (use -n COMPONENT or -a ACTION)",
                ),
            }
        }
        Some((sub, rest)) if sub == "force-stop" => {
            let top = dev.top();
            let stopped = rest.first().and_then(|p| dev.apps.app_index(p));
            if stopped.is_some_and(|s| s == top.app && s != 0) {
                dev.home();
            }
            Output::default()
        }
        _ => Output::fail(
            1,
            "usage: am [start|force-stop] ...\n  start [-n <COMPONENT>] [-a <ACTION>] [-W] [-S]",
        ),
    }
}

fn monkey(dev: &mut Device, args: &[String]) -> Output {
    let package = args
        .iter()
        .position(|a| a == "-p")
        .and_then(|i| args.get(i + 1));
    let Some(package) = package else {
        return Output::fail(
            1,
            "** Error: no package specified (usage: monkey -p PACKAGE [-c CATEGORY] COUNT)",
        );
    };
    match dev.apps.app_index(package) {
        Some(app) => {
            dev.launch(app, None);
            Output::ok(
                "  bash arg: -p\n  bash arg: ".to_owned()
                    + package
                    + "\nEvents injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n",
            )
        }
        None => Output {
            stdout: b"  bash arg: -p\n".to_vec(),
            stderr: b"** No activities found to run, monkey aborted.\n".to_vec(),
            code: 251,
        },
    }
}

fn packages(dev: &Device) -> Vec<String> {
    let mut all: Vec<String> = dev.apps.apps.iter().map(|a| a.package.clone()).collect();
    all.extend(
        [
            "android",
            "com.android.systemui",
            "com.android.shell",
            "com.android.inputmethod.latin",
        ]
        .map(String::from),
    );
    all.sort();
    all
}

/// An app's launcher activity as `resolve-activity --brief` prints it (`pkg/.Name`).
fn launcher_activity(dev: &Device, package: &str) -> Option<String> {
    let app = dev.apps.apps.get(dev.apps.app_index(package)?)?;
    let first = app.screens.first()?;
    let full = if first.activity.starts_with('.') {
        format!("{package}{}", first.activity)
    } else {
        first.activity.clone()
    };
    Some(match full.strip_prefix(package) {
        Some(rest) if rest.starts_with('.') => format!("{package}/{rest}"),
        _ => format!("{package}/{full}"),
    })
}

fn pm(dev: &Device, args: &[String], stdin: &mut Input) -> Output {
    match args.split_first() {
        Some((cmd, rest)) if cmd == "resolve-activity" => {
            let brief = rest.iter().any(|a| a == "--brief");
            let mut it = rest.iter();
            let mut package = None;
            let mut home = false;
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-c" => {
                        home |= it
                            .next()
                            .is_some_and(|c| c == "android.intent.category.HOME")
                    }
                    "-a" | "--user" | "-d" | "-t" | "--components" => {
                        it.next();
                    }
                    s if !s.starts_with('-') => package = Some(s),
                    _ => {}
                }
            }
            // No package and the HOME category: the launcher.
            let launcher = dev.apps.apps.first().map(|a| a.package.as_str());
            let package = package.or(if home { launcher } else { None });
            match package.and_then(|p| launcher_activity(dev, p)) {
                Some(component) if brief => Output::ok(format!(
                    "priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=true\n{component}\n"
                )),
                Some(component) => Output::ok(format!(
                    "Activity #0:\n  priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=true\n  ActivityInfo:\n    name={}\n    packageName={}\n    enabled=true exported=true directBootAware=false\n",
                    component.replace('/', ""),
                    component.split('/').next().unwrap_or_default()
                )),
                None => Output::ok("No activity found\n"),
            }
        }
        Some((cmd, rest)) if cmd == "install" || cmd == "install-create" => {
            // `adb install` streams the APK here (`cmd package install -S SIZE`) and waits for
            // the answer without closing its side: take the SIZE bytes it sends, then refuse.
            let size = rest
                .iter()
                .position(|a| a == "-S")
                .and_then(|i| rest.get(i + 1))
                .and_then(|n| n.parse::<usize>().ok());
            let received = match size {
                Some(n) => format!(" (received {} bytes)", stdin.take(n).len()),
                None => String::new(),
            };
            Output::fail(
                1,
                format!(
                    "Failure [INSTALL_FAILED_INTERNAL_ERROR: the simulated phone cannot install APKs{received}; its apps are defined in the simulator's app set]"
                ),
            )
        }
        Some((cmd, rest)) if cmd == "uninstall" => match rest.last() {
            Some(p) if packages(dev).contains(p) => {
                Output::fail(1, "Failure [DELETE_FAILED_INTERNAL_ERROR]")
            }
            _ => Output::fail(1, "Failure [DELETE_FAILED_INTERNAL_ERROR]"),
        },
        Some((cmd, rest)) if cmd == "clear" => match rest.last() {
            Some(p) if packages(dev).contains(p) => Output::ok("Success\n"),
            _ => Output::fail(1, "Error: package not found"),
        },
        Some((list, rest)) if list == "list" && rest.first().is_some_and(|p| p == "packages") => {
            let filter = rest.iter().skip(1).find(|a| !a.starts_with('-'));
            let third_party = rest.iter().any(|a| a == "-3");
            let system = rest.iter().any(|a| a == "-s");
            let files = rest.iter().any(|a| a == "-f");
            let mut out = String::new();
            for p in packages(dev) {
                if filter.is_some_and(|f| !p.contains(f.as_str())) {
                    continue;
                }
                let own = p.starts_with("com.droidmesh");
                if third_party && !own || system && own {
                    continue;
                }
                if files {
                    let dir = if own { "/data/app" } else { "/system/app" };
                    let _ = writeln!(out, "package:{dir}/{p}-1/base.apk={p}");
                } else {
                    let _ = writeln!(out, "package:{p}");
                }
            }
            Output::ok(out)
        }
        Some((path, rest)) if path == "path" => match rest.first() {
            Some(p) if packages(dev).contains(p) => {
                Output::ok(format!("package:/data/app/{p}-1/base.apk\n"))
            }
            _ => Output {
                code: 1,
                ..Output::default()
            },
        },
        _ => Output::fail(
            1,
            "usage: pm list packages [-3] [-s] [-f] [FILTER]\n       pm path PACKAGE\n       pm resolve-activity [--brief] [-c CATEGORY] PACKAGE\n       pm install|uninstall|clear ...",
        ),
    }
}

fn dumpsys(dev: &Device, args: &[String]) -> Output {
    let (package, activity) = dev.focus_component();
    let top = dev.top();
    let hash = 0x5c3a_2b10 + top.app * 16 + top.screen;
    match args.first().map(String::as_str) {
        Some("window") => Output::ok(format!(
            "WINDOW MANAGER WINDOWS (dumpsys window windows)\n  Window #0 Window{{{hash:x} u0 {package}/{activity}}}:\n    mDisplayId=0 rootTaskId=7 mSession=Session{{1 2000:u0a10000}}\n\n  mGlobalConfiguration={{1.0 ?mcc?mnc [en_US] ldltr sw411dp w411dp h914dp 420dpi nrml long port}}\n  mCurrentFocus=Window{{{hash:x} u0 {package}/{activity}}}\n  mFocusedApp=ActivityRecord{{{:x} u0 {package}/{activity} t7}}\n  mInputMethodWindow=Window{{1b2c3d u0 InputMethod}}\n",
            hash + 1
        )),
        Some("input_method") => Output::ok(format!(
            "Input method client state:\n  mCurSeq=3 mCurClient=ClientState{{{package}}}\n  mInputShown={} mShowRequested={}\n  mCurMethodId=com.android.inputmethod.latin/.LatinIME\n  mIsInputViewShown={}\n",
            dev.keyboard, dev.keyboard, dev.keyboard
        )),
        Some("activity") => Output::ok(format!(
            "ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)\n  mResumedActivity: ActivityRecord{{{h:x} u0 {package}/{activity} t7}}\n  topResumedActivity=ActivityRecord{{{h:x} u0 {package}/{activity} t7}}\n",
            h = hash + 1
        )),
        Some("package") => match args.get(1) {
            Some(p) if packages(dev).contains(p) => Output::ok(format!(
                "Packages:\n  Package [{p}] ({:x}):\n    versionCode=34 minSdk=34 targetSdk=34\n    versionName=14\n    flags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ]\n",
                hash + 2
            )),
            Some(p) => Output::ok(format!("Unable to find package: {p}\n")),
            None => Output::ok("Packages:\n"),
        },
        Some("battery") => Output::ok(format!(
            "Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  level: {}\n  scale: 100\n",
            dev.props
                .get("sim.battery.level")
                .map_or("100", String::as_str)
        )),
        Some(svc) => Output::ok(format!("Can't find service: {svc}\n")),
        None => Output::ok(
            "Currently running services:\n  activity\n  battery\n  input_method\n  window\n",
        ),
    }
}

fn settings(dev: &mut Device, args: &[String]) -> Output {
    let usage = "usage:  settings [--user <USER_ID> | current] get namespace key\n        settings [--user <USER_ID> | current] put namespace key value\n        settings [--user <USER_ID> | current] delete namespace key\n        settings [--user <USER_ID> | current] list namespace";
    let args: Vec<&str> = match args {
        [u, _, rest @ ..] if u == "--user" => rest.iter().map(String::as_str).collect(),
        _ => args.iter().map(String::as_str).collect(),
    };
    let key = |ns: &str, k: &str| -> Result<String, Output> {
        let s = format!("{ns}:{k}");
        split_setting(&s)
            .map(|_| s.clone())
            .map_err(|_| Output::fail(1, format!("Invalid namespace '{ns}'\n{usage}")))
    };
    let result = match args.as_slice() {
        ["get", ns, k] => key(ns, k).map(|s| {
            Output::ok(format!(
                "{}\n",
                dev.settings.get(&s).map_or("null", String::as_str)
            ))
        }),
        ["put", ns, k, v, ..] => key(ns, k).map(|s| {
            dev.settings.insert(s, (*v).to_owned());
            Output::default()
        }),
        ["delete", ns, k] => key(ns, k).map(|s| {
            let n = usize::from(dev.settings.remove(&s).is_some());
            Output::ok(format!("Deleted {n} rows\n"))
        }),
        ["list", ns] => key(ns, "x").map(|_| {
            let prefix = format!("{ns}:");
            let mut out = String::new();
            for (k, v) in dev.settings.range(prefix.clone()..) {
                let Some(name) = k.strip_prefix(&prefix) else {
                    break;
                };
                let _ = writeln!(out, "{name}={v}");
            }
            Output::ok(out)
        }),
        _ => Err(Output::fail(1, usage)),
    };
    result.unwrap_or_else(|e| e)
}

/// `ime list -s` and friends: one keyboard, always enabled.
fn ime(args: &[String]) -> Output {
    const LATIN: &str = "com.android.inputmethod.latin/.LatinIME";
    match args.first().map(String::as_str) {
        Some("list") => Output::ok(format!("{LATIN}\n")),
        Some("enable" | "set") => {
            Output::ok(format!("Input method {LATIN} selected for user #0\n"))
        }
        Some("disable") => Output::fail(1, format!("Input method {LATIN} cannot be disabled")),
        _ => Output::fail(
            1,
            "usage: ime list [-a] [-s] | enable ID | disable ID | set ID",
        ),
    }
}

/// Log priorities from least to most severe.
const PRIORITIES: &str = "VDIWEFS";

/// `logcat`: the event log in `threadtime` (default), `brief`, `time`, `tag` or `raw` format;
/// `-c` clears, `-t N` keeps the last N lines, `-s TAG` and `TAG:P *:S` filter.
fn logcat(dev: &mut Device, args: &[String]) -> Output {
    let mut format = "threadtime".to_owned();
    let mut last: Option<usize> = None;
    let mut specs: Vec<(String, char)> = Vec::new();
    let mut silent_rest = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-c" => {
                dev.log.clear();
                return Output::default();
            }
            "-d" | "-D" | "--dump" => {}
            "-v" => format = it.next().cloned().unwrap_or_default(),
            "-b" | "-e" | "--pid" | "-r" | "-n" | "-f" => {
                it.next();
            }
            "-t" | "-T" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) => last = Some(n),
                None => return Output::fail(1, "logcat: -t needs a line count"),
            },
            "-s" => silent_rest = true,
            s if s.starts_with('-') => {
                return Output::fail(1, format!("logcat: unknown option -- '{s}'"));
            }
            spec => {
                let (tag, p) = spec.split_once(':').unwrap_or((spec, "V"));
                let p = p.chars().next().unwrap_or('V').to_ascii_uppercase();
                if !PRIORITIES.contains(p) {
                    return Output::fail(1, format!("Invalid filter expression '{spec}'"));
                }
                specs.push((tag.to_owned(), p));
            }
        }
    }
    if silent_rest {
        specs.push(("*".into(), 'S'));
    }
    let level = |p: char| PRIORITIES.find(p).unwrap_or(0);
    let shown = |e: &crate::device::LogEntry| {
        let min = specs
            .iter()
            .find(|(t, _)| t == e.tag)
            .or_else(|| specs.iter().find(|(t, _)| t == "*"))
            .map_or('V', |(_, p)| *p);
        min != 'S' && level(e.priority) >= level(min)
    };
    let lines: Vec<&crate::device::LogEntry> = dev.log.iter().filter(|e| shown(e)).collect();
    let skip = last.map_or(0, |n| lines.len().saturating_sub(n));
    let mut out = String::from("--------- beginning of main\n");
    for e in &lines[skip..] {
        let ms = e.seq * 10;
        let time = format!(
            "01-01 {:02}:{:02}:{:02}.{:03}",
            ms / 3_600_000 % 24,
            ms / 60_000 % 60,
            ms / 1000 % 60,
            ms % 1000
        );
        let tid = e.pid + 16;
        let _ = match format.as_str() {
            "brief" => writeln!(out, "{}/{}({:>5}): {}", e.priority, e.tag, e.pid, e.message),
            "time" => writeln!(
                out,
                "{time} {}/{}({:>5}): {}",
                e.priority, e.tag, e.pid, e.message
            ),
            "tag" => writeln!(out, "{}/{}: {}", e.priority, e.tag, e.message),
            "raw" => writeln!(out, "{}", e.message),
            _ => writeln!(
                out,
                "{time} {:>5} {:>5} {} {}: {}",
                e.pid, tid, e.priority, e.tag, e.message
            ),
        };
    }
    Output::ok(out)
}

fn getprop(dev: &Device, args: &[String]) -> Output {
    match args.first() {
        Some(k) => Output::ok(format!("{}\n", dev.props.get(k).map_or("", String::as_str))),
        None => {
            let mut out = String::new();
            for (k, v) in &dev.props {
                let _ = writeln!(out, "[{k}]: [{v}]");
            }
            Output::ok(out)
        }
    }
}

fn wm(args: &[String]) -> Output {
    match args.first().map(String::as_str) {
        Some("size") => Output::ok(format!(
            "Physical size: {}x{}\n",
            crate::view::WIDTH,
            crate::view::HEIGHT
        )),
        Some("density") => Output::ok(format!("Physical density: {}\n", crate::view::DENSITY)),
        _ => Output::fail(1, "usage: wm [size|density]"),
    }
}

fn svc(dev: &mut Device, args: &[String]) -> Output {
    let key = match args.first().map(String::as_str) {
        Some("wifi") => "global:wifi_on",
        Some("bluetooth") => "global:bluetooth_on",
        Some("data") => "global:mobile_data",
        _ => return Output::fail(1, "usage: svc [wifi|bluetooth|data] [enable|disable]"),
    };
    match args.get(1).map(String::as_str) {
        Some("enable") => dev.settings.insert(key.into(), "1".into()),
        Some("disable") => dev.settings.insert(key.into(), "0".into()),
        _ => return Output::fail(1, "usage: svc [wifi|bluetooth|data] [enable|disable]"),
    };
    Output::default()
}

fn uiautomator(dev: &mut Device, args: &[String]) -> Output {
    match args.split_first() {
        Some((dump, rest)) if dump == "dump" => {
            let file = rest
                .iter()
                .find(|a| !a.starts_with("--"))
                .map_or("/sdcard/window_dump.xml", String::as_str);
            let doc = xml::dump(&dev.view());
            if file == "/dev/tty" || file == "/dev/stdout" {
                return Output::ok(format!("{doc}UI hierchary dumped to: {file}\n"));
            }
            match dev.fs.write(file, doc.into_bytes(), false) {
                Ok(()) => Output::ok(format!("UI hierchary dumped to: {file}\n")),
                Err(e) => Output::fail(1, format!("ERROR: could not write {e}")),
            }
        }
        _ => Output::fail(
            1,
            "Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\nhelp: displays help message\n\ndump: creates an XML dump of current UI hierarchy\n",
        ),
    }
}

/// The current screen as PNG, drawn again only when the screen changed.
pub fn screenshot_png(dev: &mut Device) -> Result<Arc<Vec<u8>>, String> {
    let view = dev.view();
    let key = format!("{}{}", xml::dump(&view), view.keyboard);
    if let Some((k, png)) = &dev.shot_cache
        && *k == key
    {
        return Ok(png.clone());
    }
    let png = Arc::new(render::png(&render::draw(&view)).map_err(|e| e.to_string())?);
    dev.shot_cache = Some((key, png.clone()));
    Ok(png)
}

fn screencap(dev: &mut Device, args: &[String]) -> Output {
    let as_png = args.iter().any(|a| a == "-p");
    let file = args.iter().find(|a| !a.starts_with('-'));
    let bytes = if as_png || file.is_some_and(|f| f.ends_with(".png")) {
        match screenshot_png(dev) {
            Ok(png) => png.as_ref().clone(),
            Err(e) => return Output::fail(1, format!("screencap: {e}")),
        }
    } else {
        render::raw(&render::draw(&dev.view()))
    };
    match file {
        Some(f) => match dev.fs.write(f, bytes, false) {
            Ok(()) => Output::default(),
            Err(e) => Output::fail(1, format!("Error opening file: {e}")),
        },
        None => Output::ok(bytes),
    }
}
