//! Processes and the network as the shell sees them: `ps`, `pidof`, `run-as` (no app is
//! debuggable), `app_process` (the simulated phone runs no Java code, so every class is missing),
//! `content` (only the companion app provides content), `ip` and `ifconfig` (wlan0 is up while Wi-Fi is on).
use std::fmt::Write;

use super::package::installed;
use crate::device::Device;
use crate::procs::{SYSTEM, user_of};
use crate::shell::{Output, SHELL_PID};

/// Every process: (user, pid, ppid, name), system ones first, then apps in start order, then
/// this shell and the command listing them.
fn table(dev: &Device, me: &str) -> Vec<(String, u32, u32, String)> {
    let mut rows: Vec<(String, u32, u32, String)> = SYSTEM
        .iter()
        .map(|(u, p, pp, n)| ((*u).to_owned(), *p, *pp, (*n).to_owned()))
        .collect();
    for p in dev.procs.iter() {
        if let Some(app) = dev.apps.apps.get(p.app) {
            rows.push((
                user_of(&app.package, p.app),
                p.pid,
                540,
                app.package.clone(),
            ));
        }
    }
    rows.push(("shell".into(), SHELL_PID, 901, "sh".into()));
    rows.push(("shell".into(), SHELL_PID + 1, SHELL_PID, me.into()));
    rows
}

const PS_HELP: &str = "usage: ps [-AadefLlnwZ] [-gG GROUP,] [-k FIELD,] [-o FIELD,] [-p PID,] [-t TTY,] [-uU USER,]\n\nList processes.\n\nWhich processes to show (-gGuUpPt selections may be comma separated lists):\n\n-A  All\t\t\t\t\t-a  Has terminal not session leader\n-d  All but session leaders\t\t-e  Synonym for -A\n-g  In GROUPs\t\t\t\t-G  In real GROUPs (before sgid)\n-p  PIDs (--pid)\t\t\t-P  Parent PIDs (--ppid)\n-s  In session IDs\t\t\t-t  Attached to selected TTYs\n-T  Show threads also\t\t\t-u  Owned by selected USERs\n-U  Real USERs (before suid)\n\nOutput modifiers:\n\n-k  Sort FIELDs (-FIELD to reverse)\t-M  Measure/pad future field widths\n-n  Show numeric USER and GROUP\t\t-w  Wide output (don't truncate fields)\n";

/// `ps [-A|-e]`: toybox's default columns; without -A only this shell's processes.
pub(super) fn ps(dev: &Device, args: &[String]) -> Output {
    if args.iter().any(|a| a == "--help") {
        return Output::ok(PS_HELP);
    }
    let all = args
        .iter()
        .any(|a| a.starts_with('-') && (a.contains('A') || a.contains('e')));
    let mut out =
        String::from("USER           PID  PPID        VSZ    RSS WCHAN            ADDR S NAME\n");
    for (user, pid, ppid, name) in table(dev, "ps") {
        if !all && user != "shell" {
            continue;
        }
        let vsz = 10_000_000 + u64::from(pid) * 1_337 % 5_000_000;
        let rss = 4_000 + u64::from(pid) * 97 % 200_000;
        let wchan = if name == "ps" { "0" } else { "do_epoll_wait" };
        let state = if name == "ps" { "R" } else { "S" };
        let _ = writeln!(
            out,
            "{user:<10} {pid:>6} {ppid:>5} {vsz:>10} {rss:>6} {wchan:<16} {:>4} {state} {name}",
            0
        );
    }
    Output::ok(out)
}

/// `pidof NAME...`: the pids, or exit 1 when none runs.
pub(super) fn pidof(dev: &Device, args: &[String]) -> Output {
    let rows = table(dev, "pidof");
    let pids: Vec<String> = args
        .iter()
        .flat_map(|n| {
            rows.iter()
                .filter(move |r| &r.3 == n)
                .map(|r| r.1.to_string())
        })
        .collect();
    if pids.is_empty() {
        return Output {
            code: 1,
            ..Output::default()
        };
    }
    Output::ok(pids.join(" ") + "\n")
}

/// `run-as PACKAGE CMD`: only a debuggable app's data may be entered, and none is.
pub(super) fn run_as(dev: &Device, args: &[String]) -> Output {
    match args.iter().find(|a| !a.starts_with('-')) {
        None => Output::fail(
            1,
            "usage: run-as <package-name> [--user <uid>] <command> [<args>]",
        ),
        Some(p) if installed(dev, p) => {
            Output::fail(1, format!("run-as: package not debuggable: {p}"))
        }
        Some(p) => Output::fail(1, format!("run-as: unknown package: {p}")),
    }
}

/// `app_process DIR CLASS ARGS`: the runtime aborts when it cannot find the class, as a phone's
/// does; here it never can, since the simulated phone runs no Java code.
pub(super) fn app_process(dev: &mut Device, args: &[String], env: &[(String, String)]) -> Output {
    // app_process [vm-options] cmd-dir [options] class [class-args]: the class follows the dir.
    let mut words = args.iter().filter(|a| !a.starts_with('-'));
    let class = words.nth(1);
    let Some(class) = class else {
        return Output::fail(
            134,
            "Error: no class name or --zygote supplied.\nUsage: app_process [java-options] cmd-dir start-class-name [options]\nAborted",
        );
    };
    let classpath = env
        .iter()
        .rev()
        .find(|(k, _)| k == "CLASSPATH")
        .map_or("", |(_, v)| v.as_str());
    let found: Vec<String> = classpath
        .split(':')
        .filter(|p| !p.is_empty() && dev.fs.kind(p).is_some())
        .map(|p| format!("zip file \"{p}\""))
        .collect();
    dev.log(
        'E',
        "appproc",
        format!("ERROR: could not find class '{class}'"),
    );
    dev.log(
        'F',
        "app_process",
        format!("java.lang.ClassNotFoundException: Didn't find class \"{class}\" on path: DexPathList[[{}],nativeLibraryDirectories=[/system/lib64, /system_ext/lib64]]", found.join(", ")),
    );
    if !found.is_empty() {
        dev.log('I', "droidmesh.sim", "app_process: the simulated phone runs no Java code, so it loads no class from CLASSPATH".into());
    }
    Output::fail(134, "Aborted")
}

/// `content query|insert|update|delete|call --uri content://AUTHORITY/...`: the companion
/// answers queries of its own authority and takes text for its keyboard when the phone has it
/// (`Device::portal`); the apps' providers answer for their records ([`super::providers`]);
/// every other provider is missing. The error goes to stderr and `content` exits 0, as on a
/// phone.
pub(super) fn content(dev: &mut Device, args: &[String]) -> Output {
    let uri = args
        .iter()
        .position(|a| a == "--uri")
        .and_then(|i| args.get(i + 1));
    let Some(uri) = uri else {
        return Output::fail(
            0,
            "usage: adb shell content [subcommand] [options]\n  query --uri <URI> [--user <USER_ID>] [--projection <PROJECTION>] [--where <WHERE>] [--sort <SORT_ORDER>]\n  insert --uri <URI> [--user <USER_ID>] --bind <BINDING> [--bind <BINDING>...]\n  delete --uri <URI> [--user <USER_ID>] --where <WHERE>",
        );
    };
    let authority = uri
        .strip_prefix("content://")
        .unwrap_or(uri)
        .split('/')
        .next()
        .unwrap_or("");
    if dev.portal && authority == super::portal::PACKAGE {
        let path = uri
            .strip_prefix("content://")
            .and_then(|u| u.split_once('/'))
            .map_or("", |(_, p)| p);
        return match args.first().map(String::as_str) {
            Some("query") => Output::ok(super::portal::query(dev, path)),
            Some("insert") => {
                super::keyboard::portal_insert(dev, path, args);
                Output::default()
            }
            _ => Output::default(),
        };
    }
    if let Some(out) = super::providers::content(dev, args, uri) {
        return out;
    }
    Output::fail(
        0,
        format!(
            "Error while accessing provider:{authority}\njava.lang.IllegalStateException: Could not find provider: {authority}\n\tat com.android.commands.content.Content$Command.execute(Content.java:527)\n\tat com.android.commands.content.Content.main(Content.java:768)\n\tat com.android.internal.os.RuntimeInit.nativeFinishInit(Native Method)"
        ),
    )
}

/// The phone's Wi-Fi address while Wi-Fi is on.
const WLAN_IP: &str = "192.168.1.57";
const WLAN_MAC: &str = "02:00:00:d5:1e:57";

fn wifi_up(dev: &Device) -> bool {
    dev.settings.get("global:wifi_on").is_some_and(|v| v != "0")
        && dev
            .settings
            .get("global:airplane_mode_on")
            .is_none_or(|v| v == "0")
}

fn ip_addr(dev: &Device, only: Option<&str>) -> Output {
    let up = wifi_up(dev);
    let lo = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n    inet 127.0.0.1/8 scope host lo\n       valid_lft forever preferred_lft forever\n".to_owned();
    let wlan = if up {
        format!(
            "24: wlan0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 3000\n    link/ether {WLAN_MAC} brd ff:ff:ff:ff:ff:ff\n    inet {WLAN_IP}/24 brd 192.168.1.255 scope global wlan0\n       valid_lft forever preferred_lft forever\n"
        )
    } else {
        format!(
            "24: wlan0: <BROADCAST,MULTICAST> mtu 1500 qdisc mq state DOWN group default qlen 3000\n    link/ether {WLAN_MAC} brd ff:ff:ff:ff:ff:ff\n"
        )
    };
    match only {
        None => Output::ok(lo + &wlan),
        Some("lo") => Output::ok(lo),
        Some("wlan0") => Output::ok(wlan),
        Some(other) => Output::fail(1, format!("Device \"{other}\" does not exist.")),
    }
}

/// `ip route`, `ip addr [show [dev] IFACE]`.
pub(super) fn ip(dev: &Device, args: &[String]) -> Output {
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    match words.as_slice() {
        [r, ..] if "route".starts_with(r) => Output::ok(if wifi_up(dev) {
            format!("192.168.1.0/24 dev wlan0 proto kernel scope link src {WLAN_IP} \n")
        } else {
            String::new()
        }),
        [a, rest @ ..] if "address".starts_with(a) => {
            let rest: Vec<&str> = rest
                .iter()
                .copied()
                .filter(|w| !matches!(*w, "show" | "list" | "dev"))
                .collect();
            ip_addr(dev, rest.first().copied())
        }
        _ => Output::fail(
            255,
            "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\nwhere  OBJECT := { address | route }",
        ),
    }
}

/// `ifconfig [IFACE]` in toybox's format.
pub(super) fn ifconfig(dev: &Device, args: &[String]) -> Output {
    let up = wifi_up(dev);
    let lo = "lo        Link encap:Local Loopback  \n          inet addr:127.0.0.1  Mask:255.0.0.0 \n          UP LOOPBACK RUNNING  MTU:65536  Metric:1\n          RX packets:0 errors:0 dropped:0 overruns:0 frame:0 \n          TX packets:0 errors:0 dropped:0 overruns:0 carrier:0 \n          collisions:0 txqueuelen:1000 \n          RX bytes:0 TX bytes:0 \n\n".to_owned();
    let addr = if up {
        format!(
            "          inet addr:{WLAN_IP}  Bcast:192.168.1.255  Mask:255.255.255.0 \n          UP BROADCAST RUNNING MULTICAST  MTU:1500  Metric:1\n"
        )
    } else {
        "          BROADCAST MULTICAST  MTU:1500  Metric:1\n".to_owned()
    };
    let wlan = format!(
        "wlan0     Link encap:Ethernet  HWaddr {WLAN_MAC}\n{addr}          RX packets:0 errors:0 dropped:0 overruns:0 frame:0 \n          TX packets:0 errors:0 dropped:0 overruns:0 carrier:0 \n          collisions:0 txqueuelen:3000 \n          RX bytes:0 TX bytes:0 \n\n"
    );
    match args.first().map(String::as_str) {
        None => Output::ok(if up { lo + &wlan } else { lo }),
        Some("-a") => Output::ok(lo + &wlan),
        Some("lo") => Output::ok(lo),
        Some("wlan0") => Output::ok(wlan),
        Some(other) => Output::fail(1, format!("ifconfig: {other}: No such device")),
    }
}
