//! The `TypeText` action: focus, clear, type with what the device has ([`crate::typing`]:
//! a keyboard app for any text, else `input text` for printable ASCII), then read the field
//! back and say what it holds. A sensitive text never appears in an answer or an error.
use serde_json::json;

use crate::actions::{Outcome, Target, input, resolve};
use crate::error::{DeviceError, Result};
use crate::input::{
    KEYCODE_DEL, KEYCODE_ENTER, KEYCODE_MOVE_END, Stroke, escape_input_text, strokes,
};
use crate::registry::Slot;
use crate::state::{read_ui, read_ui_unmasked};
use crate::typing::{Keyboard, type_with_ime};

/// Most characters one `TypeText` call types.
pub const MAX_TEXT_CHARS: usize = 16_384;

/// Longest argument given to one `input text` call.
const TEXT_CHUNK: usize = 200;

/// Most characters of the field's text an answer repeats in `action_taken`
/// (`data.field_text` has all of it).
const SHOWN_FIELD_CHARS: usize = 200;

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

/// Types `text` with the device's best keyboard (`data.keyboard` names it); a line break is an
/// ENTER key event either way. Afterwards the field is read back: `data.field_text` is what it
/// holds and `data.field_matches` whether that ends with the text (holds exactly it, with
/// `clear`). When `sensitive`, nothing returned (answer or error) contains the text or any part
/// of it, the field is not read back, every later read masks it, and the answer names the
/// field it went into (`data.field`).
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
    let keyboard = slot.keyboard.get(&slot.adb).await.map_err(hide)?;
    // Refuse what the device cannot type before touching it further.
    let strokes = match keyboard {
        Keyboard::InputText => {
            if let Some(e) = no_keyboard_app(slot, text) {
                return Err(hide(e));
            }
            strokes(text, TEXT_CHUNK).map_err(hide)?
        }
        _ => Vec::new(),
    };
    let mut data = if sensitive {
        json!({ "chars": count, "clear": clear, "sensitive": true })
    } else {
        json!({ "text": text, "clear": clear })
    };
    data["keyboard"] = json!(keyboard.name());
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
    if keyboard == Keyboard::InputText {
        if clear {
            let len = clear_field(slot).await?;
            data["cleared_chars"] = json!(len);
            taken.push_str(&format!("cleared {len} characters and "));
        }
        type_strokes(slot, strokes).await.map_err(hide)?;
    } else {
        if clear {
            taken.push_str("cleared the field and ");
        }
        let selection = type_with_ime(&slot.adb, &slot.keyboard, keyboard, text, clear)
            .await
            .map_err(hide)?;
        data["keyboard_restored"] = json!(selection.restored);
        if let Some(p) = &selection.previous {
            data["previous_keyboard"] = json!(p);
        }
        if let Some(d) = selection.detail {
            data["keyboard_note"] = json!(d);
        }
    }
    let with = match keyboard {
        Keyboard::InputText => String::new(),
        k => format!(" with {}", k.describe()),
    };
    if sensitive {
        return Ok(Outcome {
            action_taken: format!("{taken}typed {count} characters of sensitive text{with}"),
            data,
            confidence: 0.9,
        });
    }
    let (holds, confidence) = read_back(slot, text, clear, &mut data).await;
    Ok(Outcome {
        action_taken: format!("{taken}typed {text:?}{with}; {holds}"),
        data,
        confidence,
    })
}

/// Empties the focused field with key events (`input text` has no other way): the number of
/// characters it held.
async fn clear_field(slot: &Slot) -> Result<usize> {
    let ui = read_ui(slot).await?;
    let len = ui.focused().map_or(0, |e| e.text.chars().count());
    if len > 0 {
        let mut keys = format!("keyevent {KEYCODE_MOVE_END}");
        for _ in 0..len {
            keys.push_str(&format!(" {KEYCODE_DEL}"));
        }
        input(slot, &keys).await?;
    }
    Ok(len)
}

/// Types checked strokes with `input text` and ENTER key events.
async fn type_strokes(slot: &Slot, strokes: Vec<Stroke<'_>>) -> Result<()> {
    let mut strokes = strokes.into_iter().peekable();
    while let Some(stroke) = strokes.next() {
        let command = match stroke {
            Stroke::Text(part) => format!("text {}", escape_input_text(part)?),
            Stroke::Enter => {
                // Consecutive line breaks go in one command.
                let mut keys = format!("keyevent {KEYCODE_ENTER}");
                while strokes.next_if_eq(&Stroke::Enter).is_some() {
                    keys.push_str(&format!(" {KEYCODE_ENTER}"));
                }
                keys
            }
        };
        input(slot, &command).await?;
    }
    Ok(())
}

/// Reads the focused field after typing into `data` (`field_text`, `field_matches`) and says
/// in words what it holds; a lower confidence when it does not hold the text.
async fn read_back(
    slot: &Slot,
    text: &str,
    clear: bool,
    data: &mut serde_json::Value,
) -> (String, f64) {
    let ui = match read_ui(slot).await {
        Ok(ui) => ui,
        Err(e) => return (format!("the field could not be read back: {e}"), 0.6),
    };
    let Some(field) = ui.focused() else {
        data["field_matches"] = json!(false);
        return ("no field has focus now".into(), 0.3);
    };
    let now = &field.text;
    data["field_text"] = json!(droidmesh_proto::text::shorten(now, MAX_TEXT_CHARS * 2));
    if text.is_empty() {
        // An empty field shows its hint: what it holds cannot be told apart.
        return (
            format!(
                "the field now shows {:?}",
                droidmesh_proto::text::shorten(now, SHOWN_FIELD_CHARS)
            ),
            0.9,
        );
    }
    let matches = if clear {
        now == text
    } else {
        now.ends_with(text)
    };
    data["field_matches"] = json!(matches);
    if matches && now == text {
        ("the field now holds exactly that".into(), 0.95)
    } else if matches {
        (
            format!(
                "the field now holds {:?}",
                droidmesh_proto::text::shorten(now, SHOWN_FIELD_CHARS)
            ),
            0.95,
        )
    } else {
        (
            format!(
                "but the field now holds {:?}",
                droidmesh_proto::text::shorten(now, SHOWN_FIELD_CHARS)
            ),
            0.3,
        )
    }
}

/// The refusal of the first character of `text` that `input text` cannot type and a keyboard
/// app can (a letter beyond ASCII, a tab), naming what to install; none when `input text`
/// carries all of it (control characters are refused by [`strokes`], whatever the keyboard).
fn no_keyboard_app(slot: &Slot, text: &str) -> Option<DeviceError> {
    let (pos, c) = text
        .chars()
        .enumerate()
        .find(|(_, c)| *c == '\t' || (!c.is_ascii() && !c.is_control()))?;
    let detail = if c == '\t' {
        format!("`input text` on Android cannot type a tab; got '\\t' at position {pos}")
    } else {
        format!("`input text` on Android accepts ASCII only; got '{c}' at position {pos}")
    };
    Some(DeviceError::NoKeyboardApp {
        serial: slot.adb.serial().to_owned(),
        detail,
    })
}

/// An error about typing sensitive text, with every trace of the text (the command, the
/// offending character) taken out; what kind of failure it was is kept.
fn redact(e: DeviceError) -> DeviceError {
    const WHAT: &str = "typing sensitive text";
    match e {
        DeviceError::InvalidArgument(_) => DeviceError::InvalidArgument(format!(
            "{WHAT} is refused: without a keyboard app (com.mobilerun.portal or com.android.adbkeyboard) the device types printable ASCII and line breaks only (the text is not shown)"
        )),
        DeviceError::NoKeyboardApp { serial, .. } => DeviceError::NoKeyboardApp {
            serial,
            detail: format!(
                "{WHAT} is refused: the device types printable ASCII and line breaks only (the text is not shown)"
            ),
        },
        DeviceError::Timeout {
            serial, timeout_ms, ..
        } => DeviceError::Timeout {
            serial,
            command: "typing <sensitive>".into(),
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
