//! Typing text of any language. `input text` types only what the phone's virtual keyboard map
//! has (printable ASCII), so text goes through a keyboard app when the device has one: the
//! companion app's keyboard (`content insert --uri content://com.mobilerun.portal/keyboard/input`)
//! first, else ADBKeyBoard (`am broadcast -a ADB_INPUT_B64`), else plain `input text` for what
//! it can carry. A keyboard app is selected only for the typing: the user's keyboard is read
//! before and selected again after, also when typing fails. Which apps a device has is asked
//! once (`ime list -a -s`) and trusted for [`KEYBOARD_TTL`]; a keyboard that turns out to be
//! gone is forgotten at once.
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;

use crate::adb::AdbDevice;
use crate::error::{DeviceError, Result};

/// The companion app's keyboard.
pub const COMPANION_IME: &str = "com.mobilerun.portal/.input.MobilerunKeyboardIME";
/// ADBKeyBoard's keyboard.
pub const ADB_KEYBOARD_IME: &str = "com.android.adbkeyboard/.AdbIME";

/// How long what a device has is trusted before it is asked again (an app installed or
/// removed meanwhile is noticed at the next typing after that).
pub const KEYBOARD_TTL: Duration = Duration::from_secs(300);

/// Most UTF-8 bytes of text one keyboard command carries (its base64 is a third longer).
pub const CHUNK_BYTES: usize = 3_000;

/// Most bytes of one shell command made of several keyboard steps.
const SCRIPT_BYTES: usize = 8_000;

/// How a device types text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyboard {
    /// The companion app's keyboard.
    Companion,
    /// ADBKeyBoard.
    AdbKeyboard,
    /// Plain `input text`: printable ASCII only.
    InputText,
}

impl Keyboard {
    /// The name results give it (`data.keyboard`).
    pub fn name(self) -> &'static str {
        match self {
            Keyboard::Companion => "companion_keyboard",
            Keyboard::AdbKeyboard => "adb_keyboard",
            Keyboard::InputText => "input_text",
        }
    }

    /// The input method it selects, if any.
    pub fn ime(self) -> Option<&'static str> {
        match self {
            Keyboard::Companion => Some(COMPANION_IME),
            Keyboard::AdbKeyboard => Some(ADB_KEYBOARD_IME),
            Keyboard::InputText => None,
        }
    }

    /// In words, for what a result says.
    pub fn describe(self) -> &'static str {
        match self {
            Keyboard::Companion => "the companion app's keyboard",
            Keyboard::AdbKeyboard => "ADBKeyBoard",
            Keyboard::InputText => "`input text`",
        }
    }
}

/// The best keyboard among the input methods `ime list -a -s` printed.
pub fn parse_imes(out: &str) -> Keyboard {
    let has = |id: &str| out.lines().any(|l| l.trim() == id);
    if has(COMPANION_IME) {
        Keyboard::Companion
    } else if has(ADB_KEYBOARD_IME) {
        Keyboard::AdbKeyboard
    } else {
        Keyboard::InputText
    }
}

/// Per device: the keyboard found and when.
#[derive(Debug, Default)]
pub struct KeyboardCell {
    found: Mutex<Option<(Instant, Keyboard)>>,
}

impl KeyboardCell {
    /// The keyboard to type with, asking the device when nothing younger than
    /// [`KEYBOARD_TTL`] is known.
    pub async fn get(&self, adb: &AdbDevice) -> Result<Keyboard> {
        if let Some((at, k)) = *self.found.lock().unwrap_or_else(|p| p.into_inner())
            && at.elapsed() < KEYBOARD_TTL
        {
            return Ok(k);
        }
        let k = parse_imes(&adb.shell("ime list -a -s").await?);
        *self.found.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), k));
        Ok(k)
    }

    /// Forgets what was found: the next typing asks again.
    pub fn forget(&self) {
        *self.found.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// `s` as one word for the device's shell.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Whether `id` looks like an input method id (`package/.Class`), safe to hand back to `ime`.
fn is_ime_id(id: &str) -> bool {
    id.contains('/')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/$-".contains(c))
}

/// `text` cut into pieces of at most `max` bytes (at least one character each), on character
/// boundaries.
pub fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max.max(1));
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut == 0 {
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

/// The shell steps that type `text` with keyboard `kb` (not [`Keyboard::InputText`]): text
/// pieces go through the keyboard app, each line break is an ENTER key event (as with
/// `input text`, so a single-line field still performs its action), and `clear` first empties
/// the field.
pub fn ime_steps(kb: Keyboard, text: &str, clear: bool) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let insert = |s: &str, clear: bool| {
        format!(
            "content insert --uri content://com.mobilerun.portal/keyboard/input --bind base64_text:s:{} --bind clear:b:{clear}",
            b64(s)
        )
    };
    let mut steps = Vec::new();
    let mut clear_pending = clear;
    if clear && kb == Keyboard::AdbKeyboard {
        steps.push("am broadcast -a ADB_CLEAR_TEXT".to_owned());
        clear_pending = false;
    }
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            if clear_pending {
                steps.push(insert("", true));
                clear_pending = false;
            }
            steps.push(format!("input keyevent {}", crate::input::KEYCODE_ENTER));
        }
        for piece in chunks(line, CHUNK_BYTES) {
            steps.push(match kb {
                Keyboard::AdbKeyboard => {
                    format!("am broadcast -a ADB_INPUT_B64 --es msg {}", b64(piece))
                }
                _ => insert(piece, std::mem::take(&mut clear_pending)),
            });
        }
    }
    if clear_pending {
        steps.push(insert("", true));
    }
    steps
}

/// Steps joined into as few shell commands as fit in [`SCRIPT_BYTES`] each.
pub fn scripts(steps: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for step in steps {
        match out.last_mut() {
            Some(last) if last.len() + 2 + step.len() <= SCRIPT_BYTES => {
                last.push_str("; ");
                last.push_str(step);
            }
            _ => out.push(step.clone()),
        }
    }
    out
}

/// The user's keyboard before typing: the selected input method and the enabled ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    pub selected: Option<String>,
    pub enabled: Vec<String>,
}

/// Reads the first two lines of `settings get secure default_input_method;
/// settings get secure enabled_input_methods`.
pub fn parse_previous(out: &str) -> Previous {
    let mut lines = out.lines().map(str::trim);
    let selected = lines.next().filter(|l| is_ime_id(l)).map(str::to_owned);
    let enabled = lines
        .next()
        .map(|l| {
            l.split(':')
                .filter(|s| is_ime_id(s))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Previous { selected, enabled }
}

/// What typing through a keyboard app did to the keyboard selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub previous: Option<String>,
    /// Whether the user's keyboard is selected again (true when there was nothing to restore).
    pub restored: bool,
    pub detail: Option<String>,
}

fn adb_error(adb: &AdbDevice, detail: String) -> DeviceError {
    DeviceError::Adb {
        target: format!("device {}", adb.serial()),
        detail,
    }
}

/// Output that says a keyboard step failed: an unknown input method, a missing provider, an
/// exception.
fn failed(out: &str) -> bool {
    let lower = out.to_ascii_lowercase();
    lower.contains("unknown input method")
        || lower.contains("exception")
        || lower.contains("error")
        || lower.contains("could not find provider")
}

/// Types `text` with keyboard app `kb`: reads the user's keyboard and selects `kb`'s in one
/// command, runs the steps, then selects the user's keyboard again (and disables `kb`'s if it
/// was not enabled before), whatever the typing did. A keyboard found missing is forgotten.
pub async fn type_with_ime(
    adb: &AdbDevice,
    cell: &KeyboardCell,
    kb: Keyboard,
    text: &str,
    clear: bool,
) -> Result<Selection> {
    let Some(ime) = kb.ime() else {
        return Err(DeviceError::InvalidArgument(
            "typing through a keyboard app needs one; `input text` has no input method".into(),
        ));
    };
    let out = adb
        .shell(&format!(
            "settings get secure default_input_method; settings get secure enabled_input_methods; ime enable {ime}; ime set {ime}"
        ))
        .await?;
    let previous = parse_previous(&out);
    if out.contains("Unknown input method") {
        cell.forget();
        // Nothing was selected: the user's keyboard is still theirs.
        return Err(adb_error(
            adb,
            format!(
                "{} ({ime}) is no longer installed on the device; type again to use what it has now",
                kb.describe()
            ),
        ));
    }
    let typed = run_steps(adb, cell, kb, text, clear).await;
    let selection = restore(adb, ime, &previous).await;
    typed.map(|()| selection)
}

async fn run_steps(
    adb: &AdbDevice,
    cell: &KeyboardCell,
    kb: Keyboard,
    text: &str,
    clear: bool,
) -> Result<()> {
    for script in scripts(&ime_steps(kb, text, clear)) {
        let out = adb.shell(&script).await?;
        if failed(&out) {
            cell.forget();
            return Err(adb_error(
                adb,
                format!(
                    "{} refused the text: {}",
                    kb.describe(),
                    droidmesh_proto::text::shorten(out.trim(), 300)
                ),
            ));
        }
    }
    Ok(())
}

/// Selects the user's keyboard again and disables `ime` if the user had not enabled it.
async fn restore(adb: &AdbDevice, ime: &str, previous: &Previous) -> Selection {
    let mut steps = Vec::new();
    if let Some(p) = previous.selected.as_deref().filter(|p| *p != ime) {
        steps.push(format!("ime set {}", sh_quote(p)));
    }
    if !previous.enabled.iter().any(|e| e == ime) {
        steps.push(format!("ime disable {ime}"));
    }
    if steps.is_empty() {
        return Selection {
            previous: previous.selected.clone(),
            restored: true,
            detail: None,
        };
    }
    let (restored, detail) = match adb.shell(&steps.join("; ")).await {
        Ok(out) if !failed(&out) => (true, None),
        Ok(out) => (
            false,
            Some(format!(
                "the keyboard could not be selected again: {}",
                droidmesh_proto::text::shorten(out.trim(), 200)
            )),
        ),
        Err(e) => (
            false,
            Some(format!("the keyboard could not be selected again: {e}")),
        ),
    };
    if let Some(d) = &detail {
        tracing::warn!(serial = adb.serial(), "{d}");
    }
    Selection {
        previous: previous.selected.clone(),
        restored,
        detail,
    }
}

#[cfg(test)]
#[path = "typing_tests.rs"]
mod tests;
