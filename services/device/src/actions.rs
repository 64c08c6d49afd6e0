//! Device actions: tap, long press, swipe, drag, type, keys, app start. Each returns what was
//! done in words and data; the service adds timing and wraps it in an `ActionResult`.
use droidmesh_proto::v1::{Point, UiElement};
use serde_json::{Value, json};

use crate::error::{DeviceError, Result};
use crate::labels;
use crate::registry::Slot;
use crate::state::{screen_size, snapshot_for_index};
pub use crate::type_text::{Typing, type_text};
use crate::ui_dump::centre;

/// What an action did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub action_taken: String,
    pub data: Value,
    pub confidence: f64,
}

/// Where to act: an element of the latest snapshot, or a point.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Index(u32),
    Point(i32, i32),
}

/// A resolved target: device coordinates, and the element when one was named.
pub(crate) struct Resolved {
    pub(crate) x: i32,
    pub(crate) y: i32,
    element: Option<UiElement>,
}

impl Resolved {
    pub(crate) fn describe(&self) -> String {
        match &self.element {
            Some(e) => format!(
                "element {} ({}) at ({}, {})",
                e.index,
                element_label(e),
                self.x,
                self.y
            ),
            None => format!("({}, {})", self.x, self.y),
        }
    }

    pub(crate) fn data(&self) -> Value {
        let mut d = json!({ "x": self.x, "y": self.y });
        if let Some(e) = &self.element {
            d["element"] = json!({
                "index": e.index,
                "class": e.class_name,
                "resource_id": e.resource_id,
                "text": e.text,
                "content_desc": e.content_desc,
            });
        }
        d
    }
}

fn element_label(e: &UiElement) -> String {
    let name = [&e.text, &e.content_desc, &e.resource_id]
        .into_iter()
        .find(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            e.class_name
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_owned()
        });
    let short: String = name.chars().take(40).collect();
    short
}

pub(crate) async fn resolve(slot: &Slot, target: Target) -> Result<Resolved> {
    match target {
        Target::Point(x, y) => {
            check_point(slot, x, y).await?;
            Ok(Resolved {
                x,
                y,
                element: None,
            })
        }
        Target::Index(i) => {
            let ui = snapshot_for_index(slot).await?;
            let e = ui.elements.get(i as usize).ok_or_else(|| {
                DeviceError::InvalidArgument(format!(
                    "index {i} out of range: the screen has {} elements",
                    ui.elements.len()
                ))
            })?;
            let b = e.bounds.ok_or_else(|| {
                DeviceError::InvalidArgument(format!(
                    "element {i} has no bounds and cannot be tapped"
                ))
            })?;
            let (x, y) = centre(&b);
            Ok(Resolved {
                x,
                y,
                element: Some(e.clone()),
            })
        }
    }
}

async fn check_point(slot: &Slot, x: i32, y: i32) -> Result<()> {
    let (w, h, _) = screen_size(slot).await?;
    let inside = |v: i32, max: u32| v >= 0 && i64::from(v) < i64::from(max);
    if inside(x, w) && inside(y, h) {
        Ok(())
    } else {
        Err(DeviceError::InvalidArgument(format!(
            "point ({x}, {y}) is off the screen, which is {w}x{h} pixels"
        )))
    }
}

fn point(p: Option<Point>, what: &str) -> Result<(i32, i32)> {
    p.map(|p| (p.x, p.y))
        .ok_or_else(|| DeviceError::InvalidArgument(format!("{what} point is required")))
}

/// Sends `input ...` and fails on the error text `input` prints to the merged output.
pub(crate) async fn input(slot: &Slot, args: &str) -> Result<()> {
    let command = format!("input {args}");
    let out = slot.adb.shell(&command).await?;
    let lower = out.to_ascii_lowercase();
    if lower.contains("exception") || lower.contains("error:") || lower.contains("usage:") {
        return Err(DeviceError::Adb {
            target: format!("device {}", slot.adb.serial()),
            detail: format!("`{command}` failed: {}", out.trim()),
        });
    }
    Ok(())
}

pub async fn tap(slot: &Slot, target: Target) -> Result<Outcome> {
    let r = resolve(slot, target).await?;
    input(slot, &format!("tap {} {}", r.x, r.y)).await?;
    Ok(Outcome {
        action_taken: format!("tapped {}", r.describe()),
        data: r.data(),
        confidence: 0.9,
    })
}

/// Longest press, swipe or drag: a gesture holds the phone's input for its whole duration.
pub const MAX_GESTURE_MS: u32 = 10_000;

pub use crate::type_text::MAX_TEXT_CHARS;

fn check_duration(duration_ms: u32) -> Result<()> {
    if duration_ms > MAX_GESTURE_MS {
        return Err(DeviceError::InvalidArgument(format!(
            "duration_ms must be at most {MAX_GESTURE_MS}, got {duration_ms}"
        )));
    }
    Ok(())
}

pub async fn long_press(slot: &Slot, target: Target, duration_ms: u32) -> Result<Outcome> {
    check_duration(duration_ms)?;
    let dur = if duration_ms == 0 { 1000 } else { duration_ms };
    let r = resolve(slot, target).await?;
    input(
        slot,
        &format!("swipe {x} {y} {x} {y} {dur}", x = r.x, y = r.y),
    )
    .await?;
    let mut data = r.data();
    data["duration_ms"] = json!(dur);
    Ok(Outcome {
        action_taken: format!("long-pressed {} for {dur} ms", r.describe()),
        data,
        confidence: 0.9,
    })
}

/// Swipe (default 300 ms) or drag (default 1500 ms: slow enough to pick items up).
pub async fn swipe(
    slot: &Slot,
    start: Option<Point>,
    end: Option<Point>,
    duration_ms: u32,
    drag: bool,
) -> Result<Outcome> {
    let (x1, y1) = point(start, "start")?;
    let (x2, y2) = point(end, "end")?;
    check_duration(duration_ms)?;
    check_point(slot, x1, y1).await?;
    check_point(slot, x2, y2).await?;
    let dur = match (duration_ms, drag) {
        (0, false) => 300,
        (0, true) => 1500,
        (d, _) => d,
    };
    input(slot, &format!("swipe {x1} {y1} {x2} {y2} {dur}")).await?;
    let verb = if drag { "dragged" } else { "swiped" };
    Ok(Outcome {
        action_taken: format!("{verb} from ({x1}, {y1}) to ({x2}, {y2}) in {dur} ms"),
        data: json!({ "start": {"x": x1, "y": y1}, "end": {"x": x2, "y": y2}, "duration_ms": dur }),
        confidence: 0.9,
    })
}

pub async fn press_key(slot: &Slot, keycode: u32, name: &str) -> Result<Outcome> {
    input(slot, &format!("keyevent {keycode}")).await?;
    Ok(Outcome {
        action_taken: format!("pressed {name} (keycode {keycode})"),
        data: json!({ "keycode": keycode, "key": name }),
        confidence: 0.95,
    })
}

/// Installed packages (`pm list packages`, `-s` for system only, `-3` for third party only).
pub async fn packages(slot: &Slot, filter: &str) -> Result<Vec<String>> {
    let cmd = if filter.is_empty() {
        "pm list packages".to_owned()
    } else {
        format!("pm list packages {filter}")
    };
    Ok(crate::device_output::parse_packages(
        &slot.adb.shell(&cmd).await?,
    ))
}

pub enum App<'a> {
    Package(&'a str),
    Label(&'a str),
}

pub async fn start_app(slot: &Slot, app: App<'_>, activity: &str) -> Result<Outcome> {
    let serial = slot.adb.serial();
    let installed = packages(slot, "").await?;
    let (package, label) = match app {
        App::Package(p) => {
            if p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
            {
                return Err(DeviceError::InvalidArgument(format!(
                    "package must be a Java package name such as com.android.settings, got '{p}'"
                )));
            }
            (p.to_owned(), None)
        }
        App::Label(l) => match labels::resolve(l, &installed) {
            Some(p) => (p, Some(l.to_owned())),
            None => {
                return Err(DeviceError::InvalidArgument(format!(
                    "no installed app on device {serial} has the label '{l}'; ListPackages shows what is installed"
                )));
            }
        },
    };
    if !installed.contains(&package) {
        return Err(DeviceError::InvalidArgument(format!(
            "package {package} is not installed on device {serial}"
        )));
    }
    let command = if activity.is_empty() {
        format!("monkey -p {package} -c android.intent.category.LAUNCHER 1")
    } else {
        if !activity
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".$_/".contains(c))
        {
            return Err(DeviceError::InvalidArgument(format!(
                "activity must look like .MainActivity or com.example.MainActivity, got '{activity}'"
            )));
        }
        format!("am start -n {package}/{activity}")
    };
    let out = slot.adb.shell(&command).await?;
    let lower = out.to_ascii_lowercase();
    if lower.contains("no activities found") || lower.contains("error") || lower.contains("aborted")
    {
        return Err(DeviceError::Adb {
            target: format!("device {serial}"),
            detail: format!("`{command}` failed: {}", out.trim()),
        });
    }
    let named = label.map(|l| format!(" (label '{l}')")).unwrap_or_default();
    Ok(Outcome {
        action_taken: format!("started {package}{named}"),
        data: json!({ "package": package, "activity": activity, "command": command }),
        confidence: 0.9,
    })
}
