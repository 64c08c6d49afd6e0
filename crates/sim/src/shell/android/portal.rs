//! The companion accessibility service a phone may have installed ("Portal", package
//! `com.mobilerun.portal`), answering `content query --uri content://com.mobilerun.portal/PATH`
//! as it does: one row, `Row: 0 result=<JSON envelope>`, the envelope
//! `{"status":"success","result":…}`. It reads the screen from the accessibility tree, so it
//! answers at once where `uiautomator dump` waits for the UI to idle and writes a file.
use serde_json::{Value, json};

use crate::device::Device;
use crate::view::{HEIGHT, View, WIDTH};

/// The companion's package, which is also its content provider's authority.
pub const PACKAGE: &str = "com.mobilerun.portal";
/// The version it reports.
pub const VERSION: &str = "0.7.2";

/// The answer to a query of `path` (after `content://com.mobilerun.portal/`).
pub(super) fn query(dev: &Device, path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let envelope = match path {
        "ping" => json!({"status": "success", "result": "pong"}),
        "version" => json!({"status": "success", "result": VERSION}),
        "state_full" => json!({"status": "success", "result": state_full(dev)}),
        "packages" => json!({"status": "success", "result": packages(dev)}),
        "phone_state" => {
            json!({"status": "success", "result": phone_state(dev, &dev.view()).to_string()})
        }
        _ => json!({"status": "error", "error": format!("Unknown endpoint: {path}")}),
    };
    format!("Row: 0 result={envelope}\n")
}

/// `packages`: the apps the launcher shows, as the companion lists them.
fn packages(dev: &Device) -> Value {
    let apps: Vec<Value> = dev
        .apps
        .apps
        .iter()
        .filter(|a| a.launcher)
        .map(|a| {
            let user = a.package.starts_with("com.droidmesh.");
            let (code, name) = if user { (1, "1.0") } else { (34, "14") };
            json!({
                "packageName": a.package,
                "label": a.label,
                "versionName": name,
                "versionCode": code,
                "isSystemApp": !user,
            })
        })
        .collect();
    Value::Array(apps)
}

/// `state_full`: the accessibility tree (one root node), the phone's state and the display.
pub fn state_full(dev: &Device) -> Value {
    let view = dev.view();
    json!({
        "a11y_tree": tree(&view),
        "phone_state": phone_state(dev, &view),
        "device_context": {
            "screen_bounds": {"width": WIDTH, "height": HEIGHT},
            "display_metrics": {"widthPixels": WIDTH, "heightPixels": HEIGHT, "densityDpi": crate::view::DENSITY},
        },
    })
}

fn phone_state(dev: &Device, view: &View) -> Value {
    let top = dev.top();
    let app = dev.apps.apps.get(top.app);
    let (package, activity) = dev.focus_component();
    let focused = view.nodes.iter().find(|n| n.focused);
    json!({
        "currentApp": app.map_or("", |a| a.label.as_str()),
        "packageName": package,
        "activityName": activity,
        "keyboardVisible": view.keyboard,
        "isEditable": focused.is_some_and(|n| n.class.ends_with("EditText")),
        "focusedElement": focused.map_or_else(
            || json!({"resourceId": ""}),
            |n| json!({"text": n.text, "className": n.class, "resourceId": n.resource_id}),
        ),
    })
}

/// The view's nodes as nested accessibility nodes (the view lists them in pre-order, each
/// with its parent's index).
fn tree(view: &View) -> Value {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); view.nodes.len()];
    let mut roots = Vec::new();
    for (i, n) in view.nodes.iter().enumerate() {
        match n.parent.and_then(|p| children.get_mut(p)) {
            Some(list) => list.push(i),
            None => roots.push(i),
        }
    }
    let node = |i: usize, kids: Vec<Value>| {
        let n = &view.nodes[i];
        let b = n.bounds;
        json!({
            "resourceId": n.resource_id,
            "className": n.class,
            "packageName": view.package,
            "text": n.text,
            "contentDescription": n.content_desc,
            "boundsInScreen": {"left": b.left, "top": b.top, "right": b.right, "bottom": b.bottom},
            "isClickable": n.clickable,
            "isLongClickable": n.long_clickable,
            "isFocusable": n.focusable,
            "isFocused": n.focused,
            "isCheckable": n.checkable,
            "isChecked": n.checked,
            "isEnabled": true,
            "isSelected": false,
            "isScrollable": n.scrollable,
            "isPassword": n.password,
            "isEditable": n.class.ends_with("EditText"),
            "isVisibleToUser": !b.is_empty(),
            "childCount": kids.len(),
            "children": kids,
        })
    };
    // Children before parents: walk the pre-order list backwards (a child's index is always
    // greater than its parent's), so no recursion depth depends on the tree.
    let mut built: Vec<Option<Value>> = vec![None; view.nodes.len()];
    for i in (0..view.nodes.len()).rev() {
        let kids = children[i]
            .iter()
            .map(|&c| built[c].take().unwrap_or(Value::Null))
            .collect();
        built[i] = Some(node(i, kids));
    }
    let mut top: Vec<Value> = roots
        .iter()
        .map(|&r| built[r].take().unwrap_or(Value::Null))
        .collect();
    match top.len() {
        0 => Value::Null,
        1 => top.pop().unwrap_or(Value::Null),
        // Several roots: under one window node, as the active window's root holds them.
        _ => json!({
            "className": "android.widget.FrameLayout",
            "packageName": view.package,
            "boundsInScreen": {"left": 0, "top": 0, "right": WIDTH, "bottom": HEIGHT},
            "children": top,
        }),
    }
}
