//! Device actions: tap, long press, swipe, drag, type, keys, app start. Each returns what was
//! done in words and data; the service adds timing and wraps it in an `ActionResult`.
use droidmesh_proto::v1::{Point, UiElement};
use serde_json::{Value, json};

use crate::error::{DeviceError, Result};
use crate::input::{
    KEYCODE_DEL, KEYCODE_ENTER, KEYCODE_MOVE_END, Stroke, escape_input_text, strokes,
};
use crate::labels;
use crate::registry::Slot;
use crate::state::{read_ui, read_ui_unmasked, screen_size, snapshot_for_index};
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
struct Resolved {
    x: i32,
    y: i32,
    element: Option<UiElement>,
}

impl Resolved {
    fn describe(&self) -> String {
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

    fn data(&self) -> Value {
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

async fn resolve(slot: &Slot, target: Target) -> Result<Resolved> {
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
async fn input(slot: &Slot, args: &str) -> Result<()> {
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

/// Most characters one `TypeText` call types (each 200 are one `input text` command).
pub const MAX_TEXT_CHARS: usize = 16_384;

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

/// Longest argument given to one `input text` call.
const TEXT_CHUNK: usize = 200;

/// What one `TypeText` asks.
#[derive(Debug, Clone, Copy)]
pub struct Typing<'a> {
    pub text: &'a str,
    /// Element to focus first.
    pub index: Option<u32>,
    pub clear: bool,
    pub sensitive: bool,
    /// The lease it is typed under (a secret's mask is kept with it).
    pub lease: Option<&'a str>,
}

/// Types `text`; a line break is an ENTER key event (see [`strokes`]). When `sensitive`,
/// nothing returned (answer or error) contains the text or any part of it, every later read
/// masks it, and the answer names the field it went into (`data.field`).
pub async fn type_text(slot: &Slot, t: Typing<'_>) -> Result<Outcome> {
    let Typing {
        text,
        index,
        clear,
        sensitive,
        lease,
    } = t;
    let hide = |e: DeviceError| if sensitive { redact(e) } else { e };
    let count = text.chars().count();
    if count > MAX_TEXT_CHARS {
        return Err(DeviceError::InvalidArgument(format!(
            "text is {count} characters; at most {MAX_TEXT_CHARS} are typed in one call"
        )));
    }
    // Refuse what `input text` cannot type before touching the device.
    let strokes = strokes(text, TEXT_CHUNK).map_err(hide)?;
    let chars = text.chars().count();
    let mut data = if sensitive {
        json!({ "chars": chars, "clear": clear, "sensitive": true })
    } else {
        json!({ "text": text, "clear": clear })
    };
    let mut taken = String::new();
    if let Some(i) = index {
        let r = resolve(slot, Target::Index(i)).await?;
        input(slot, &format!("tap {} {}", r.x, r.y)).await?;
        if sensitive {
            // The field may still show an earlier secret: name it by index only.
            taken = format!("focused element {i} and ");
            data["focused"] = json!({ "index": i, "x": r.x, "y": r.y });
        } else {
            taken = format!("focused {} and ", r.describe());
            data["focused"] = r.data();
        }
    }
    if sensitive {
        // The focused field is about to show the secret: from now on every dump masks it,
        // even if typing fails part way.
        let ui = read_ui_unmasked(slot).await?;
        let field = ui.focused();
        slot.secret_fields
            .remember(slot.adb.serial(), field, text, lease)?;
        if let Some(f) = field {
            data["field"] = crate::secret_fields::field_json(f);
        }
    }
    if clear {
        // The field's current text, read after focusing it.
        let ui = read_ui(slot).await?;
        let len = ui.focused().map_or(0, |e| e.text.chars().count());
        if len > 0 {
            let mut keys = format!("keyevent {KEYCODE_MOVE_END}");
            for _ in 0..len {
                keys.push_str(&format!(" {KEYCODE_DEL}"));
            }
            input(slot, &keys).await?;
        }
        data["cleared_chars"] = json!(len);
        taken.push_str(&format!("cleared {len} characters and "));
    }
    let mut strokes = strokes.into_iter().peekable();
    while let Some(stroke) = strokes.next() {
        let command = match stroke {
            Stroke::Text(part) => format!("text {}", escape_input_text(part).map_err(hide)?),
            Stroke::Enter => {
                // Consecutive line breaks go in one command.
                let mut keys = format!("keyevent {KEYCODE_ENTER}");
                while strokes.next_if_eq(&Stroke::Enter).is_some() {
                    keys.push_str(&format!(" {KEYCODE_ENTER}"));
                }
                keys
            }
        };
        input(slot, &command).await.map_err(hide)?;
    }
    Ok(Outcome {
        action_taken: if sensitive {
            format!("{taken}typed {chars} characters of sensitive text")
        } else {
            format!("{taken}typed {:?}", text)
        },
        data,
        confidence: 0.9,
    })
}

/// An error about typing sensitive text, with every trace of the text (the command, the
/// offending character) taken out; what kind of failure it was is kept.
fn redact(e: DeviceError) -> DeviceError {
    const WHAT: &str = "typing sensitive text";
    match e {
        DeviceError::InvalidArgument(_) => DeviceError::InvalidArgument(format!(
            "{WHAT} is refused: `input text` types printable ASCII and line breaks only (the text is not shown)"
        )),
        DeviceError::Timeout {
            serial, timeout_ms, ..
        } => DeviceError::Timeout {
            serial,
            command: "input text <sensitive>".into(),
            timeout_ms,
        },
        DeviceError::Unavailable { serial, .. } => DeviceError::Unavailable {
            serial,
            detail: format!("{WHAT} failed: the device did not answer"),
        },
        DeviceError::Adb { target, .. } | DeviceError::BadOutput { serial: target, .. } => {
            DeviceError::Adb {
                target,
                detail: format!("{WHAT} was refused by the device"),
            }
        }
        other @ (DeviceError::UnknownDevice { .. }
        | DeviceError::LeaseHeld { .. }
        | DeviceError::LeaseReplaced { .. }
        | DeviceError::NoLease { .. }
        | DeviceError::AllBusy { .. }
        | DeviceError::NoDevices
        | DeviceError::ScreenshotWithheld { .. }
        | DeviceError::TooManySecrets { .. }
        | DeviceError::Config(_)
        | DeviceError::ConnectOff
        | DeviceError::AttachFailed { .. }) => other,
        DeviceError::UiDump { .. } | DeviceError::Image(_) => {
            DeviceError::InvalidArgument(format!("{WHAT} failed"))
        }
    }
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
