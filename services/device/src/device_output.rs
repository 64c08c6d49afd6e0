//! Parsers for the text that Android shell commands print: `dumpsys window` focus,
//! `dumpsys input_method`, `wm size`/`wm density` and `pm list packages`.

/// The focused app from `dumpsys window`: `(package, activity)`.
///
/// Reads `mCurrentFocus=Window{hash u0 PKG/ACTIVITY}`, falling back to
/// `mFocusedApp=ActivityRecord{hash u0 PKG/ACTIVITY t12}` when the focused window is not an
/// activity (a dialog, the status bar, `null`). Activity names are kept as Android prints them
/// (`com.android.settings/.Settings`).
pub fn parse_focus(dumpsys: &str) -> (String, String) {
    let from_current = find_component(dumpsys, "mCurrentFocus=");
    let from_app = find_component(dumpsys, "mFocusedApp=");
    match (from_current, from_app) {
        (Some(c), _) if c.contains('/') => split_component(&c),
        (_, Some(a)) if a.contains('/') => split_component(&a),
        (Some(c), _) => (c, String::new()),
        _ => (String::new(), String::new()),
    }
}

fn find_component(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = &line[line.find(key)? + key.len()..];
        if rest.starts_with("null") {
            return None;
        }
        let inner = rest.split_once('{').map_or(rest, |(_, r)| r);
        let inner = inner.split('}').next().unwrap_or(inner);
        // "hash u0 pkg/act" or "hash u0 pkg/act t12": the token with '/', else the last one.
        let tokens: Vec<&str> = inner.split_whitespace().collect();
        tokens
            .iter()
            .find(|t| t.contains('/'))
            .or(tokens.last())
            .map(|t| (*t).to_owned())
    })
}

fn split_component(c: &str) -> (String, String) {
    let package = c.split('/').next().unwrap_or_default().to_owned();
    (package, c.to_owned())
}

/// Whether the soft keyboard is shown, from `dumpsys input_method`.
pub fn parse_keyboard_shown(dumpsys: &str) -> bool {
    [
        "mInputShown=true",
        "mIsInputViewShown=true",
        "isInputViewShown=true",
    ]
    .iter()
    .any(|k| dumpsys.contains(k))
}

/// Screen size from `wm size` (the override size wins, as input and dumps use it) and density
/// from `wm density` when the output holds it.
pub fn parse_wm(output: &str) -> Option<(u32, u32, u32)> {
    let size = |key: &str| {
        output.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.trim();
            let (w, h) = v.split_once('x')?;
            Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
        })
    };
    let dens = |key: &str| {
        output
            .lines()
            .find_map(|l| l.trim().strip_prefix(key)?.trim().parse::<u32>().ok())
    };
    let (w, h) = size("Override size:").or_else(|| size("Physical size:"))?;
    let density = dens("Override density:")
        .or_else(|| dens("Physical density:"))
        .unwrap_or(0);
    Some((w, h, density))
}

/// Package names from `pm list packages` ("package:NAME" lines; `-f` paths are dropped).
pub fn parse_packages(output: &str) -> Vec<String> {
    let mut v: Vec<String> = output
        .lines()
        .filter_map(|l| {
            let p = l.trim().strip_prefix("package:")?;
            // `pm list packages -f` prints "package:/data/app/x.apk=com.x".
            let p = p.rsplit_once('=').map_or(p, |(_, name)| name);
            (!p.is_empty()).then(|| p.to_owned())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focus_from_current_focus_and_focused_app() {
        let d = "WINDOW MANAGER\n  mCurrentFocus=Window{5c3a2b1 u0 com.android.settings/com.android.settings.Settings}\n  mFocusedApp=ActivityRecord{1 u0 com.android.settings/.Settings t7}\n";
        assert_eq!(
            parse_focus(d),
            (
                "com.android.settings".into(),
                "com.android.settings/com.android.settings.Settings".into()
            )
        );
        let d = "  mCurrentFocus=null\n  mFocusedApp=ActivityRecord{1 u0 com.droidmesh.notes/.MainActivity t7}\n";
        assert_eq!(
            parse_focus(d),
            (
                "com.droidmesh.notes".into(),
                "com.droidmesh.notes/.MainActivity".into()
            )
        );
        let d = "  mCurrentFocus=Window{aa u0 NotificationShade}\n";
        assert_eq!(parse_focus(d), ("NotificationShade".into(), String::new()));
        assert_eq!(parse_focus(""), (String::new(), String::new()));
        assert_eq!(
            parse_focus("mCurrentFocus=Window{"),
            (String::new(), String::new())
        );
    }

    #[test]
    fn keyboard_flag() {
        assert!(parse_keyboard_shown(
            "  mVisibleBound=false mInputShown=true\n"
        ));
        assert!(!parse_keyboard_shown("  mInputShown=false\n"));
        assert!(!parse_keyboard_shown(""));
    }

    #[test]
    fn wm_size_and_density() {
        assert_eq!(
            parse_wm("Physical size: 1080x2400\n"),
            Some((1080, 2400, 0))
        );
        assert_eq!(
            parse_wm("Physical size: 1080x2400\nOverride size: 720x1600\nPhysical density: 420\n"),
            Some((720, 1600, 420))
        );
        assert_eq!(parse_wm("error"), None);
        assert_eq!(parse_wm("Physical size: ax2"), None);
    }

    #[test]
    fn packages() {
        let out =
            "package:com.b\npackage:com.a\r\npackage:/data/app/x/base.apk=com.c\nnoise\npackage:\n";
        assert_eq!(parse_packages(out), vec!["com.a", "com.b", "com.c"]);
    }
}
