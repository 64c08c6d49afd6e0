//! What the keyboard apps answer from the shell ([`crate::keyboards`]): ADBKeyBoard's
//! broadcasts (`ADB_INPUT_B64`, `ADB_INPUT_TEXT`, `ADB_INPUT_CHARS`, `ADB_INPUT_CODE`,
//! `ADB_CLEAR_TEXT`), received only while it is the selected keyboard, and the companion's
//! `content insert --uri content://com.mobilerun.portal/keyboard/{input,clear,key}`, which
//! prints nothing, as `content insert` never does, whether or not the text arrived.
use super::intent::Intent;
use crate::device::Device;
use crate::keyboards::{ADB_KEYBOARD_IME, PORTAL_IME, decode_b64};

/// Delivers a broadcast to ADBKeyBoard's receiver, which exists only while its input method
/// is selected; every other broadcast reaches nobody.
pub(super) fn adb_keyboard_receive(dev: &mut Device, intent: &Intent) {
    if !dev.ime_selected(ADB_KEYBOARD_IME) {
        return;
    }
    match intent.action.as_deref() {
        Some("ADB_INPUT_TEXT") => {
            if let Some(msg) = intent.extra("msg") {
                let msg = msg.to_owned();
                dev.commit_text(&msg, false);
            }
        }
        Some("ADB_INPUT_B64") => {
            // The app decodes without checking and commits "NOT SUPPORTED" on bad UTF-8; bad
            // base64 throws in its receiver and nothing is typed.
            if let Some(msg) = intent.extra("msg").and_then(decode_b64) {
                dev.commit_text(&msg, false);
            }
        }
        Some("ADB_INPUT_CHARS") => {
            let chars: Option<String> = intent.extra("chars").and_then(|v| {
                v.split(',')
                    .map(|c| c.trim().parse::<u32>().ok().and_then(char::from_u32))
                    .collect()
            });
            if let Some(text) = chars {
                dev.commit_text(&text, false);
            }
        }
        Some("ADB_INPUT_CODE") => {
            if let Some(code) = intent.extra("code").and_then(|c| c.parse::<u32>().ok()) {
                dev.key(code);
            }
        }
        Some("ADB_CLEAR_TEXT") => {
            dev.commit_text("", true);
        }
        _ => {}
    }
}

/// The value of `--bind NAME:TYPE:VALUE` for `name`.
fn bind<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.windows(2)
        .filter(|w| w[0] == "--bind")
        .filter_map(|w| {
            let mut parts = w[1].splitn(3, ':');
            let (n, _, v) = (parts.next()?, parts.next()?, parts.next()?);
            (n == name).then_some(v)
        })
        .next_back()
}

/// `content insert` of the companion's `keyboard/ACTION`: the keyboard commits the text while
/// it is the selected input method; otherwise the accessibility service sets the focused
/// field (replacing it with `clear`, else adding at its end). Nothing is printed either way.
pub(super) fn portal_insert(dev: &mut Device, path: &str, args: &[String]) {
    let via_ime = dev.ime_selected(PORTAL_IME);
    if !via_ime && !dev.portal_a11y_on() {
        return;
    }
    match path {
        "keyboard/input" => {
            let clear = bind(args, "clear").is_none_or(|v| v != "false");
            let text = bind(args, "base64_text").unwrap_or("");
            if let Some(text) = decode_b64(text) {
                dev.commit_text(&text, clear);
            }
        }
        "keyboard/clear" => {
            dev.commit_text("", true);
        }
        "keyboard/key" => {
            if let Some(code) = bind(args, "key_code").and_then(|c| c.parse::<u32>().ok()) {
                dev.key(code);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::bind;

    #[test]
    fn binds_are_read_by_name_and_the_last_wins() {
        let args: Vec<String> = [
            "insert",
            "--uri",
            "content://x/keyboard/input",
            "--bind",
            "base64_text:s:aGk=",
            "--bind",
            "clear:b:false",
            "--bind",
            "clear:b:true",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(bind(&args, "base64_text"), Some("aGk="));
        assert_eq!(bind(&args, "clear"), Some("true"));
        assert_eq!(bind(&args, "nothing"), None);
    }
}
