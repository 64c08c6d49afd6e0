//! Android's own commands: `input`, `am`, `monkey`, `pm`/`cmd package`, `dumpsys`,
//! `settings`, `getprop`/`setprop`, `wm`, `svc`, `ime`, `cmd` services, `locksettings`, `ps`,
//! `pidof`, `run-as`, `app_process`, `content`, `ip`, `ifconfig`, `logcat`, `uiautomator` and
//! `screencap`, with the output formats, error texts and exit codes of a user build of
//! Android 14 (the table of what tools send is `crates/sim/tests/tools_table.rs`).
//! `logcat` dumps the simulator's event log and ends (as `logcat -d`): a shell command here
//! runs to completion, so it cannot follow the log.
mod am;
mod dumpsys;
mod input;
mod intent;
mod keyboard;
mod logcat;
mod package;
mod pm;
pub mod portal;
mod process;
mod providers;
mod system;
mod ui;
mod window;

use std::sync::Mutex;

use super::{Input, Output};
use crate::device::Device;

/// Runs an Android command; `None` if `name` is not one. `stdin` is the command's input.
/// Android's commands this shell runs (`which` finds them).
pub const COMMANDS: &[&str] = &[
    "am",
    "app_process",
    "cmd",
    "content",
    "dumpsys",
    "getprop",
    "ifconfig",
    "ime",
    "input",
    "ip",
    "locksettings",
    "logcat",
    "monkey",
    "pidof",
    "pm",
    "ps",
    "run-as",
    "screencap",
    "setprop",
    "settings",
    "svc",
    "uiautomator",
    "wm",
];

pub fn command(
    device: &Mutex<Device>,
    name: &str,
    args: &[String],
    env: &[(String, String)],
    stdin: &mut Input,
) -> Option<Output> {
    // A gesture's duration passes after the device is released, as the finger moves.
    let mut hold = 0u64;
    if name == "uiautomator" && args.first().is_some_and(|a| a == "dump") {
        // A phone's dump waits for the UI to idle and writes a file: it takes what it takes
        // before it reads the screen, without holding the device.
        let cost = super::lock(device).dump_cost;
        if !cost.is_zero() {
            std::thread::sleep(cost.min(super::MAX_SLEEP));
        }
    }
    let out = {
        let dev = &mut *super::lock(device);
        android(dev, name, args, env, stdin, &mut hold)?
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
    env: &[(String, String)],
    stdin: &mut Input,
    hold: &mut u64,
) -> Option<Output> {
    Some(match name {
        "input" => {
            let (out, ms) = input::input(dev, args);
            *hold = ms;
            out
        }
        "am" => am::am(dev, args),
        "monkey" => am::monkey(dev, args),
        "pm" => pm::pm(dev, args, stdin),
        "logcat" => logcat::logcat(dev, args),
        "ime" => system::ime(dev, args),
        "cmd" => match args.split_first() {
            Some((svc, rest)) if svc == "package" => pm::pm(dev, rest, stdin),
            Some((svc, rest)) if svc == "input_method" => system::ime(dev, rest),
            Some((svc, rest)) if svc == "settings" => system::settings(dev, rest),
            Some((svc, rest)) if svc == "activity" => am::am(dev, rest),
            Some((svc, rest)) if svc == "window" => system::wm(rest),
            Some((svc, rest)) if svc == "lock_settings" => system::locksettings(rest),
            Some((svc, rest)) => match system::service(dev, svc, rest) {
                Some(out) => out,
                None => Output::fail(20, format!("cmd: Can't find service: {svc}")),
            },
            None => Output::fail(
                20,
                "cmd: No service specified; use -l to list all running services",
            ),
        },
        "dumpsys" => dumpsys::dumpsys(dev, args),
        "settings" => system::settings(dev, args),
        "getprop" => system::getprop(dev, args),
        "setprop" => match args {
            [k, v] if dev.props.len() < system::MAX_PROPS || dev.props.contains_key(k) => {
                dev.props.insert(k.clone(), v.clone());
                Output::default()
            }
            [_, _] => Output::fail(1, "setprop: too many properties"),
            _ => Output::fail(1, "usage: setprop NAME VALUE"),
        },
        "wm" => system::wm(args),
        "svc" => system::svc(dev, args),
        "locksettings" => system::locksettings(args),
        "ps" => process::ps(dev, args),
        "pidof" => process::pidof(dev, args),
        "run-as" => process::run_as(dev, args),
        "app_process" | "app_process64" => process::app_process(dev, args, env),
        "content" => process::content(dev, args),
        "ip" => process::ip(dev, args),
        "ifconfig" => process::ifconfig(dev, args),
        "uiautomator" => ui::uiautomator(dev, args),
        "screencap" => ui::screencap(dev, args),
        _ => return None,
    })
}

pub(super) fn int(s: &str) -> Option<i32> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v as i32)
}
