//! Launcher labels for packages.
//!
//! A real phone only gives labels through `dumpsys package`/`cmd package resolve-activity` per
//! package (slow: hundreds of ms each). The cheap path used here: a table of well-known labels
//! of stock apps, then a match of the label against the last segment of installed package
//! names ("Notes" → `com.droidmesh.notes`). Only installed packages are ever returned.

/// Well-known launcher labels of common Android packages.
const KNOWN: &[(&str, &str)] = &[
    ("Settings", "com.android.settings"),
    ("Contacts", "com.android.contacts"),
    ("Contacts", "com.google.android.contacts"),
    ("Notes", "com.droidmesh.notes"),
    ("Launcher", "com.android.launcher3"),
    ("Phone", "com.android.dialer"),
    ("Phone", "com.google.android.dialer"),
    ("Messages", "com.android.messaging"),
    ("Messages", "com.google.android.apps.messaging"),
    ("Chrome", "com.android.chrome"),
    ("Camera", "com.android.camera2"),
    ("Camera", "com.google.android.GoogleCamera"),
    ("Clock", "com.android.deskclock"),
    ("Clock", "com.google.android.deskclock"),
    ("Calculator", "com.android.calculator2"),
    ("Calculator", "com.google.android.calculator"),
    ("Calendar", "com.android.calendar"),
    ("Calendar", "com.google.android.calendar"),
    ("Files", "com.android.documentsui"),
    ("Files", "com.google.android.apps.nbu.files"),
    ("Gallery", "com.android.gallery3d"),
    ("Photos", "com.google.android.apps.photos"),
    ("Gmail", "com.google.android.gm"),
    ("Maps", "com.google.android.apps.maps"),
    ("YouTube", "com.google.android.youtube"),
    ("Play Store", "com.android.vending"),
    ("Email", "com.android.email"),
    ("Music", "com.android.music"),
];

/// The label of a package, if it is one we know.
pub fn label_of(package: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(_, p)| *p == package).map(|(l, _)| *l)
}

/// Resolves a launcher label to an installed package (case-insensitive).
pub fn resolve(label: &str, installed: &[String]) -> Option<String> {
    let wanted = label.trim().to_lowercase();
    if wanted.is_empty() {
        return None;
    }
    let known = KNOWN
        .iter()
        .filter(|(l, _)| l.to_lowercase() == wanted)
        .find(|(_, p)| installed.iter().any(|i| i == p))
        .map(|(_, p)| (*p).to_owned());
    if known.is_some() {
        return known;
    }
    let squashed: String = wanted.chars().filter(|c| c.is_alphanumeric()).collect();
    let mut hits: Vec<&String> = installed
        .iter()
        .filter(|p| {
            p.rsplit('.')
                .next()
                .is_some_and(|last| last.to_lowercase() == squashed)
        })
        .collect();
    hits.sort_by_key(|p| p.len());
    hits.first().map(|p| (*p).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_resolve_against_installed_packages() {
        let installed: Vec<String> = [
            "com.android.settings",
            "com.droidmesh.notes",
            "org.example.weather",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            resolve("settings", &installed).as_deref(),
            Some("com.android.settings")
        );
        assert_eq!(
            resolve("Notes", &installed).as_deref(),
            Some("com.droidmesh.notes")
        );
        assert_eq!(
            resolve("Weather", &installed).as_deref(),
            Some("org.example.weather")
        );
        assert_eq!(resolve("Chrome", &installed), None);
        assert_eq!(resolve("", &installed), None);
        assert_eq!(label_of("com.android.contacts"), Some("Contacts"));
    }
}
