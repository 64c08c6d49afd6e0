//! The companion accessibility service ("Portal", `com.mobilerun.portal`) as a source of UI
//! state. A phone that has it answers the accessibility tree through its content provider
//! (`content query --uri content://com.mobilerun.portal/state_full`) in tens of milliseconds,
//! where `uiautomator dump` waits for the UI to idle and writes a file (about a second on a
//! phone). Whether a device has it is asked once (`/ping`); its answer is turned into the
//! uiautomator dump format here, so one parser reads both and everything downstream (indices,
//! masking, settling) is the same. A device whose companion stops answering falls back to
//! uiautomator for that observation.
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::OnceCell;

/// The companion's content-provider authority.
pub const AUTHORITY: &str = "com.mobilerun.portal";

/// The query that reads the whole state.
pub fn state_query() -> String {
    format!("content query --uri content://{AUTHORITY}/state_full")
}

/// Where the UI tree of an observation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UiSource {
    #[default]
    Uiautomator,
    Portal,
}

impl UiSource {
    pub fn name(self) -> &'static str {
        match self {
            UiSource::Uiautomator => "uiautomator",
            UiSource::Portal => "portal",
        }
    }
}

/// `device.ui_source`: which source to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UiSourcePref {
    /// The companion when the device has it, else uiautomator.
    #[default]
    Auto,
    Uiautomator,
    Portal,
}

/// Per device: the preference and, once asked, what the device offers.
#[derive(Debug, Default)]
pub struct SourceCell {
    pub pref: UiSourcePref,
    found: OnceCell<UiSource>,
}

impl SourceCell {
    pub fn new(pref: UiSourcePref) -> Self {
        Self {
            pref,
            found: OnceCell::new(),
        }
    }

    /// Whether the source is settled: chosen by configuration, or asked already.
    pub fn known(&self) -> bool {
        self.pref != UiSourcePref::Auto || self.found.get().is_some()
    }

    /// The source to read this device with, asking the device once (`auto`).
    pub async fn get(&self, adb: &crate::adb::AdbDevice) -> UiSource {
        match self.pref {
            UiSourcePref::Uiautomator => UiSource::Uiautomator,
            UiSourcePref::Portal => UiSource::Portal,
            UiSourcePref::Auto => {
                *self
                    .found
                    .get_or_init(|| async {
                        let ping = format!("content query --uri content://{AUTHORITY}/ping");
                        match adb.shell(&ping).await {
                            Ok(out) if parse(&out).is_ok() => UiSource::Portal,
                            _ => UiSource::Uiautomator,
                        }
                    })
                    .await
            }
        }
    }
}

/// The `result` of a `Row: 0 result=<envelope>` answer, or why there is none.
pub fn parse(output: &str) -> Result<Value, String> {
    let line = output
        .lines()
        .find(|l| l.contains("result="))
        .ok_or_else(|| {
            format!(
                "the companion did not answer a row: '{}'",
                droidmesh_proto::text::shorten(output, 200)
            )
        })?;
    let json = &line[line.find("result=").unwrap_or(0) + "result=".len()..];
    let envelope: Value = serde_json::from_str(json)
        .map_err(|e| format!("the companion's answer is not JSON: {e}"))?;
    if let Some(error) = envelope.get("error") {
        return Err(format!("the companion refused: {error}"));
    }
    if envelope.get("status").and_then(Value::as_str) != Some("success") {
        return Err("the companion's answer has no success status".into());
    }
    // `result` (older builds: `data`), itself JSON text for some endpoints.
    let result = envelope
        .get("result")
        .or_else(|| envelope.get("data"))
        .cloned()
        .ok_or("the companion's answer has no result")?;
    Ok(match result {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        v => v,
    })
}

/// Most nodes taken from a companion tree (a dump of a phone's screen has hundreds).
const MAX_NODES: usize = 20_000;

/// The `state_full` answer as a uiautomator dump.
pub fn to_dump(output: &str) -> Result<String, String> {
    let state = parse(output)?;
    let root = state
        .get("a11y_tree")
        .filter(|t| t.is_object())
        .ok_or("the companion's state has no a11y_tree")?;
    let mut out = String::from(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">",
    );
    // Depth-first without recursion: (node, index among siblings) to open, or None to close.
    let mut stack: Vec<Option<(&Value, usize)>> = vec![Some((root, 0))];
    let mut nodes = 0usize;
    while let Some(item) = stack.pop() {
        let Some((node, index)) = item else {
            out.push_str("</node>");
            continue;
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(format!(
                "the companion's tree has more than {MAX_NODES} nodes"
            ));
        }
        node_open(&mut out, node, index);
        stack.push(None);
        if let Some(children) = node.get("children").and_then(Value::as_array) {
            for (i, child) in children.iter().enumerate().rev() {
                if child.is_object() {
                    stack.push(Some((child, i)));
                }
            }
        }
    }
    out.push_str("</hierarchy>");
    Ok(out)
}

fn node_open(out: &mut String, n: &Value, index: usize) {
    let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or("");
    let b = |k: &str| n.get(k).and_then(Value::as_bool).unwrap_or(false);
    let bounds = n.get("boundsInScreen");
    let at = |k: &str| {
        bounds
            .and_then(|r| r.get(k))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    out.push_str(&format!("<node index=\"{index}\" text=\""));
    escape(out, s("text"));
    out.push_str("\" resource-id=\"");
    escape(out, s("resourceId"));
    out.push_str("\" class=\"");
    escape(out, s("className"));
    out.push_str("\" package=\"");
    escape(out, s("packageName"));
    out.push_str("\" content-desc=\"");
    escape(out, s("contentDescription"));
    out.push_str(&format!(
        "\" checkable=\"{}\" checked=\"{}\" clickable=\"{}\" enabled=\"{}\" focusable=\"{}\" focused=\"{}\" scrollable=\"{}\" long-clickable=\"{}\" password=\"{}\" selected=\"{}\" bounds=\"[{},{}][{},{}]\">",
        b("isCheckable"),
        b("isChecked"),
        b("isClickable"),
        n.get("isEnabled").and_then(Value::as_bool).unwrap_or(true),
        b("isFocusable"),
        b("isFocused"),
        b("isScrollable"),
        b("isLongClickable"),
        b("isPassword"),
        b("isSelected"),
        at("left"),
        at("top"),
        at("right"),
        at("bottom"),
    ));
}

fn escape(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn a_state_full_answer_becomes_a_dump_the_parser_reads() {
        let out = r#"Row: 0 result={"status":"success","result":{"a11y_tree":{"className":"android.widget.FrameLayout","packageName":"com.android.settings","boundsInScreen":{"left":0,"top":0,"right":1080,"bottom":2400},"children":[{"className":"android.widget.TextView","text":"Services & \"prefs\"","packageName":"com.android.settings","isClickable":true,"boundsInScreen":{"left":221,"top":409,"right":600,"bottom":460},"children":[]}]},"phone_state":{},"device_context":{}}}"#;
        let dump = to_dump(out).unwrap();
        let ui = crate::ui_dump::parse_ui_dump(&dump).unwrap();
        let el = ui
            .elements
            .iter()
            .find(|e| e.text == "Services & \"prefs\"")
            .expect("the text node");
        let b = el.bounds.unwrap();
        assert_eq!((b.left, b.top, b.right, b.bottom), (221, 409, 600, 460));
        assert!(el.clickable);
        assert_eq!(el.package, "com.android.settings");
    }

    #[test]
    fn errors_missing_rows_and_legacy_answers_are_told_apart() {
        assert!(parse("Error while accessing provider:com.mobilerun.portal").is_err());
        let refused = parse(
            r#"Row: 0 result={"status":"error","error":"Accessibility service not available"}"#,
        )
        .unwrap_err();
        assert!(refused.contains("Accessibility service"), "{refused}");
        let legacy = parse(r#"Row: 0 result={"status":"success","data":"{\"a\":1}"}"#).unwrap();
        assert_eq!(legacy["a"], 1);
        assert_eq!(
            parse(r#"Row: 0 result={"status":"success","result":"pong"}"#).unwrap(),
            "pong"
        );
    }

    proptest::proptest! {
        #[test]
        fn hostile_answers_never_panic(s in ".{0,300}") {
            let _ = to_dump(&s);
            let _ = to_dump(&format!("Row: 0 result={s}"));
        }
    }
}
