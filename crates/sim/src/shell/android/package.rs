//! What the phone knows of each installed package: the app set's apps plus the system packages
//! every phone has; where its APK lives, its version, its launcher activity, and
//! `dumpsys package` about it. Apps named `com.droidmesh.*`, the keyboard apps
//! ([`crate::keyboards`]) and the clipboard helper ([`crate::clipboard`]) are the user's
//! (third-party); the rest are system packages.
use std::fmt::Write;

use super::intent::short_component;
use crate::device::Device;

/// System packages that are not apps of the app set.
const SYSTEM_EXTRA: &[&str] = &[
    "android",
    "com.android.inputmethod.latin",
    "com.android.shell",
    "com.android.systemui",
];

/// Every installed package, sorted.
pub(super) fn packages(dev: &Device) -> Vec<String> {
    let mut all: Vec<String> = dev.apps.apps.iter().map(|a| a.package.clone()).collect();
    all.extend(SYSTEM_EXTRA.iter().map(|s| (*s).to_owned()));
    all.extend(dev.keyboard_packages().iter().map(|s| (*s).to_owned()));
    all.push(crate::clipboard::CLIPPER_PACKAGE.to_owned());
    all.sort();
    all
}

pub(super) fn installed(dev: &Device, package: &str) -> bool {
    dev.apps.app_index(package).is_some()
        || SYSTEM_EXTRA.contains(&package)
        || dev.keyboard_packages().contains(&package)
        || package == crate::clipboard::CLIPPER_PACKAGE
}

/// Whether the user installed it (`pm list packages -3`), rather than the system image.
pub(super) fn third_party(package: &str) -> bool {
    package.starts_with("com.droidmesh.")
        || package == crate::keyboards::PORTAL_PACKAGE
        || package == crate::keyboards::ADB_KEYBOARD_PACKAGE
        || package == crate::clipboard::CLIPPER_PACKAGE
}

/// A stable 64-bit hash of a name, for the made-up numbers a phone prints about it.
pub(super) fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The path of the package's APK, as `pm path` prints it.
pub(super) fn apk_path(package: &str) -> String {
    let priv_app = |dir: &str, name: &str| format!("/system_ext/priv-app/{dir}/{name}.apk");
    match package {
        "android" => "/system/framework/framework-res.apk".into(),
        "com.android.settings" => priv_app("Settings", "Settings"),
        "com.android.launcher3" => priv_app("Launcher3QuickStep", "Launcher3QuickStep"),
        "com.android.systemui" => priv_app("SystemUI", "SystemUI"),
        "com.android.shell" => "/system/priv-app/Shell/Shell.apk".into(),
        "com.android.inputmethod.latin" => "/system/app/LatinIME/LatinIME.apk".into(),
        p if third_party(p) => {
            let h = hash(p);
            format!(
                "/data/app/~~{:016x}==/{p}-{:016x}==/base.apk",
                h,
                h.rotate_left(17)
            )
        }
        p => {
            let last = p.rsplit('.').next().unwrap_or(p);
            let mut name: Vec<char> = last.chars().collect();
            if let Some(c) = name.first_mut() {
                *c = c.to_ascii_uppercase();
            }
            let name: String = name.into_iter().collect();
            format!("/system/app/{name}/{name}.apk")
        }
    }
}

/// `(versionCode, versionName)`: system packages are the platform's, user apps their own.
pub(super) fn version(package: &str) -> (u32, &'static str) {
    if third_party(package) {
        (1, "1.0")
    } else {
        (34, "14")
    }
}

/// The uid a package runs as.
pub(super) fn uid(dev: &Device, package: &str) -> u32 {
    match package {
        "android" | "com.android.settings" => 1000,
        "com.android.shell" => 2000,
        p => 10_000 + dev.apps.app_index(p).map_or(150, |i| 120 + i as u32),
    }
}

/// An app's launcher activity as `resolve-activity --brief` prints it (`pkg/.Name`).
pub(super) fn launcher_activity(dev: &Device, package: &str) -> Option<String> {
    let app = dev.apps.apps.get(dev.apps.app_index(package)?)?;
    let first = app.screens.first()?;
    let full = if first.activity.starts_with('.') {
        format!("{package}{}", first.activity)
    } else {
        first.activity.clone()
    };
    Some(short_component(&format!("{package}/{full}")))
}

/// `dumpsys package PKG`: the activity resolver entry of its launcher activity, then the
/// package record with the fields tools read (versions, flags, install times, signatures,
/// permissions; it requests none).
pub(super) fn dumpsys_package(dev: &Device, package: &str) -> String {
    let h = hash(package);
    let mut out = String::new();
    if let Some(app) = dev
        .apps
        .app_index(package)
        .and_then(|i| dev.apps.apps.get(i))
    {
        let category = if app.launcher {
            "android.intent.category.LAUNCHER"
        } else {
            "android.intent.category.HOME"
        };
        if let Some(component) = launcher_activity(dev, package) {
            let _ = write!(
                out,
                "Activity Resolver Table:\n  Non-Data Actions:\n      android.intent.action.MAIN:\n        {:07x} {component} filter {:07x}\n          Action: \"android.intent.action.MAIN\"\n          Category: \"{category}\"\n\n",
                h & 0xfff_ffff,
                (h >> 28) & 0xfff_ffff
            );
        }
    }
    let (code, name) = version(package);
    let system = if third_party(package) { "" } else { "SYSTEM " };
    let path = apk_path(package);
    let dir = path.rsplit_once('/').map_or(path.as_str(), |(d, _)| d);
    let min_sdk = if third_party(package) { 26 } else { 34 };
    let stopped = dev
        .apps
        .app_index(package)
        .is_some_and(|i| dev.procs.get(i).is_none() && third_party(package));
    let _ = write!(
        out,
        "Packages:\n  Package [{package}] ({:07x}):\n    userId={}\n    pkg=Package{{{:07x} {package}}}\n    codePath={dir}\n    resourcePath={dir}\n    primaryCpuAbi=arm64-v8a\n    versionCode={code} minSdk={min_sdk} targetSdk=34\n    versionName={name}\n    splits=[base]\n    apkSigningVersion=3\n    flags=[ {system}HAS_CODE ALLOW_CLEAR_USER_DATA ]\n    dataDir=/data/user/0/{package}\n    timeStamp=2026-01-01 00:00:00\n    lastUpdateTime=2026-01-01 00:00:00\n    signatures=PackageSignatures{{{:07x} version:3, signatures:[{:08x}], past signatures:[]}}\n    installPermissionsFixed=true\n    pkgFlags=[ {system}HAS_CODE ALLOW_CLEAR_USER_DATA ]\n    requested permissions:\n    install permissions:\n    User 0: ceDataInode={} installed=true hidden=false suspended=false distractionFlags=0 stopped={stopped} notLaunched=false enabled=0 instant=false virtual=false\n      firstInstallTime=2026-01-01 00:00:00\n      runtime permissions:\n",
        h & 0xfff_ffff,
        uid(dev, package),
        (h >> 8) & 0xfff_ffff,
        (h >> 16) & 0xfff_ffff,
        (h >> 32) as u32,
        h % 100_000
    );
    out
}
