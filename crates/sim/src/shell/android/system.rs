//! `settings`, `ime`, `getprop`, `wm`, `svc`, the `cmd` services that switch radios and
//! location, and `locksettings`: the phone's settings, keyboards, properties and screen. Every
//! switch here is a setting, so the Settings app shows what a command changed.
use std::fmt::Write;

use crate::apps::split_setting;
use crate::device::Device;
use crate::keyboards::LATIN_IME as LATIN;
use crate::shell::Output;

/// Most settings a phone keeps (`settings put` of a new key beyond it is refused).
const MAX_SETTINGS: usize = 1_000;
/// Most properties (`setprop` of a new name beyond it is refused).
pub(super) const MAX_PROPS: usize = 1_000;

pub(super) fn settings(dev: &mut Device, args: &[String]) -> Output {
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
        ["put", ns, k, v, ..] => key(ns, k).and_then(|s| {
            if dev.settings.len() >= MAX_SETTINGS && !dev.settings.contains_key(&s) {
                return Err(Output::fail(
                    255,
                    format!("Error: the simulated phone keeps at most {MAX_SETTINGS} settings"),
                ));
            }
            dev.settings.insert(s, (*v).to_owned());
            Ok(Output::default())
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

/// Enabled keyboards: `secure:enabled_input_methods`, colon separated.
fn enabled_imes(dev: &Device) -> Vec<String> {
    dev.settings
        .get("secure:enabled_input_methods")
        .map(|v| {
            v.split(':')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// One input method as `ime list` (without `-s`) describes it.
fn ime_entry(id: &str) -> String {
    let (package, class) = id.split_once('/').unwrap_or((id, ""));
    let class = match class.strip_prefix('.') {
        Some(rest) => format!("{package}.{rest}"),
        None => class.to_owned(),
    };
    let settings = if id == LATIN {
        " mSettingsActivityName=com.android.inputmethod.latin.settings.SettingsActivity"
    } else {
        ""
    };
    format!(
        "{id}:\n  mId={id}{settings}\n  mIsDefaultResId=0x7f050003\n  Service:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    ServiceInfo:\n      name={class}\n      packageName={package}\n      enabled=true exported=true directBootAware={}\n      permission=android.permission.BIND_INPUT_METHOD\n",
        id == LATIN
    )
}

/// `ime list [-a] [-s]`, `ime enable|disable|set ID`, `ime reset`: the settings
/// `default_input_method` and `enabled_input_methods` follow. The phone's own keyboard and
/// the keyboard apps installed ([`crate::keyboards`]) are known.
pub(super) fn ime(dev: &mut Device, args: &[String]) -> Output {
    let id = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(String::as_str);
    let installed = dev.installed_imes();
    let known = id.is_some_and(|id| installed.contains(&id));
    let mut enabled = enabled_imes(dev);
    let set_enabled = |dev: &mut Device, list: &[String]| {
        dev.settings
            .insert("secure:enabled_input_methods".into(), list.join(":"));
    };
    let flags: String = args
        .iter()
        .skip(1)
        .filter_map(|a| a.strip_prefix('-'))
        .collect();
    match (args.first().map(String::as_str), id) {
        (Some("list"), _) => {
            let all = flags.contains('a');
            let shown = installed
                .iter()
                .filter(|i| all || enabled.iter().any(|e| e == *i));
            let mut out = String::new();
            for i in shown {
                if flags.contains('s') {
                    out.push_str(i);
                    out.push('\n');
                } else {
                    out.push_str(&ime_entry(i));
                }
            }
            Output::ok(out)
        }
        (Some("enable"), Some(id)) if known => {
            let state = if enabled.iter().any(|e| e == id) {
                "already enabled"
            } else {
                "now enabled"
            };
            if !enabled.iter().any(|e| e == id) {
                enabled.push(id.to_owned());
                set_enabled(dev, &enabled);
            }
            Output::ok(format!("Input method {id}: {state} for user #0\n"))
        }
        (Some("disable"), Some(id)) if known => {
            let was = enabled.iter().any(|e| e == id);
            enabled.retain(|e| e != id);
            set_enabled(dev, &enabled);
            let state = if was {
                "now disabled"
            } else {
                "already disabled"
            };
            Output::ok(format!("Input method {id}: {state} for user #0\n"))
        }
        (Some("set"), Some(id)) if known => {
            dev.settings
                .insert("secure:default_input_method".into(), id.to_owned());
            Output::ok(format!("Input method {id} selected for user #0\n"))
        }
        (Some("reset"), _) => {
            dev.settings
                .insert("secure:default_input_method".into(), LATIN.into());
            set_enabled(dev, &[LATIN.to_owned()]);
            Output::ok(format!(
                "Reset current and enabled IMEs for user #0\n  Selected: {LATIN}\n   Enabled: {LATIN}\n"
            ))
        }
        (Some(verb @ ("enable" | "disable" | "set")), Some(id)) => {
            let what = match verb {
                "set" => "selected",
                "enable" => "enabled",
                _ => "disabled",
            };
            Output {
                stderr: format!("Unknown input method {id} cannot be {what} for user #0\n")
                    .into_bytes(),
                ..Output::default()
            }
        }
        _ => Output::fail(
            255,
            "usage: ime list [-a] [-s] | enable ID | disable ID | set ID | reset",
        ),
    }
}

/// `getprop [NAME [DEFAULT]]`.
pub(super) fn getprop(dev: &Device, args: &[String]) -> Output {
    match args.first() {
        Some(k) => {
            let default = args.get(1).map_or("", String::as_str);
            Output::ok(format!(
                "{}\n",
                dev.props.get(k).map_or(default, String::as_str)
            ))
        }
        None => {
            let mut out = String::new();
            for (k, v) in &dev.props {
                let _ = writeln!(out, "[{k}]: [{v}]");
            }
            Output::ok(out)
        }
    }
}

/// `wm size`, `wm density`, `wm dismiss-keyguard` (there is no keyguard). The simulated screen
/// has one size: overriding it is refused.
pub(super) fn wm(args: &[String]) -> Output {
    use crate::view::{DENSITY, HEIGHT, WIDTH};
    match (
        args.first().map(String::as_str),
        args.get(1).map(String::as_str),
    ) {
        (Some("size"), None | Some("reset")) => {
            Output::ok(format!("Physical size: {WIDTH}x{HEIGHT}\n"))
        }
        (Some("density"), None | Some("reset")) => {
            Output::ok(format!("Physical density: {DENSITY}\n"))
        }
        (Some("size" | "density"), Some(_)) => Output::fail(
            255,
            "Error: the simulated phone's screen size and density cannot be overridden",
        ),
        (Some("dismiss-keyguard"), _) => Output::default(),
        _ => Output::fail(
            255,
            "usage: wm [size [reset]|density [reset]|dismiss-keyguard]",
        ),
    }
}

fn switch(dev: &mut Device, key: &str, on: bool) {
    dev.settings
        .insert(key.into(), if on { "1" } else { "0" }.into());
}

fn is_on(dev: &Device, key: &str) -> bool {
    dev.settings.get(key).is_some_and(|v| v != "0")
}

/// `svc wifi|bluetooth|data enable|disable`, `svc power stayon true|false|usb|ac`.
pub(super) fn svc(dev: &mut Device, args: &[String]) -> Output {
    let usage = "usage: svc [wifi|bluetooth|data] [enable|disable] | svc power stayon [true|false|usb|ac|wireless]";
    let key = match args.first().map(String::as_str) {
        Some("wifi") => "global:wifi_on",
        Some("bluetooth") => "global:bluetooth_on",
        Some("data") => "global:mobile_data",
        Some("power") => {
            return match (
                args.get(1).map(String::as_str),
                args.get(2).map(String::as_str),
            ) {
                (Some("stayon"), Some(v @ ("true" | "false" | "usb" | "ac" | "wireless"))) => {
                    let n = match v {
                        "true" => "7",
                        "usb" => "2",
                        "ac" => "1",
                        "wireless" => "4",
                        _ => "0",
                    };
                    dev.settings
                        .insert("global:stay_on_while_plugged_in".into(), n.into());
                    Output::default()
                }
                _ => Output::fail(1, usage),
            };
        }
        _ => return Output::fail(1, usage),
    };
    match args.get(1).map(String::as_str) {
        Some("enable") => switch(dev, key, true),
        Some("disable") => switch(dev, key, false),
        _ => return Output::fail(1, usage),
    }
    Output::default()
}

/// `cmd wifi`, `cmd connectivity airplane-mode`, `cmd location`, `cmd bluetooth_manager`;
/// `None` for other services.
pub(super) fn service(dev: &mut Device, svc: &str, args: &[String]) -> Option<Output> {
    let a: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "-w")
        .collect();
    Some(match (svc, a.as_slice()) {
        ("wifi", ["set-wifi-enabled", v @ ("enabled" | "disabled")]) => {
            switch(dev, "global:wifi_on", *v == "enabled");
            Output::default()
        }
        ("wifi", ["status", ..]) => Output::ok(if is_on(dev, "global:wifi_on") {
            "Wifi is enabled\nWifi scanning is always available\nWifi is disconnected\n"
        } else {
            "Wifi is disabled\nWifi scanning is always available\n"
        }),
        ("connectivity", ["airplane-mode"]) => {
            Output::ok(if is_on(dev, "global:airplane_mode_on") {
                "enabled\n"
            } else {
                "disabled\n"
            })
        }
        ("connectivity", ["airplane-mode", v @ ("enable" | "disable")]) => {
            switch(dev, "global:airplane_mode_on", *v == "enable");
            Output::default()
        }
        ("location", ["is-location-enabled", ..]) => Output::ok(format!(
            "{}\n",
            dev.settings
                .get("secure:location_mode")
                .is_some_and(|m| m != "0")
        )),
        ("location", ["set-location-enabled", v @ ("true" | "false"), ..]) => {
            let mode = if *v == "true" { "3" } else { "0" };
            dev.settings
                .insert("secure:location_mode".into(), mode.into());
            Output::default()
        }
        ("bluetooth_manager", [v @ ("enable" | "disable")]) => {
            switch(dev, "global:bluetooth_on", *v == "enable");
            Output::default()
        }
        ("wifi" | "connectivity" | "location" | "bluetooth_manager", _) => Output::fail(
            255,
            format!("Unknown or unsupported {svc} command: {}", a.join(" ")),
        ),
        _ => return None,
    })
}

const LOCKSETTINGS_HELP: &str = "locksettings service commands:\n\nNOTE: when lock screen is set, all commands require the --old <CREDENTIAL> argument.\n\n  help\n      Prints this help text.\n\n  get-disabled [--old <CREDENTIAL>] [--user USER_ID]\n      Checks whether lock screen is disabled.\n\n  set-disabled [--old <CREDENTIAL>] [--user USER_ID] <true|false>\n      When true, disables lock screen.\n\n  set-pattern [--old <CREDENTIAL>] [--user USER_ID] <PATTERN>\n  set-pin [--old <CREDENTIAL>] [--user USER_ID] <PIN>\n  set-password [--old <CREDENTIAL>] [--user USER_ID] <PASSWORD>\n  clear [--old <CREDENTIAL>] [--user USER_ID]\n  verify [--old <CREDENTIAL>] [--user USER_ID]\n";

/// `locksettings`: the simulated phone has no lock screen, so there is nothing to verify or
/// clear; setting a credential is refused.
pub(super) fn locksettings(args: &[String]) -> Output {
    match args.first().map(String::as_str) {
        Some("help") | None => Output::ok(LOCKSETTINGS_HELP),
        Some("get-disabled") => Output::ok("false\n"),
        Some("verify") => Output::ok("Lock credential verified successfully\n"),
        Some("clear") => Output::ok("Lock credential cleared\n"),
        Some(verb @ ("set-pin" | "set-password" | "set-pattern" | "set-disabled")) => Output::fail(
            255,
            format!(
                "Error while executing command: {verb}\nthe simulated phone has no lock screen to protect"
            ),
        ),
        Some(other) => Output::fail(
            255,
            format!("Error while executing command: {other}\nUnknown command\n{LOCKSETTINGS_HELP}"),
        ),
    }
}
