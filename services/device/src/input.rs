//! Building `input` shell commands: text escaping and key codes.
use droidmesh_proto::v1::Key;

use crate::error::{DeviceError, Result};

/// Escapes `text` for `input text`, which runs through the device shell: spaces become `%s`
/// (what `input` turns back into spaces) and the whole argument is single-quoted.
///
/// `input text` injects key events for ASCII characters only, so anything else is refused with
/// the offending character and its position.
pub fn escape_input_text(text: &str) -> Result<String> {
    let mut out = String::with_capacity(text.len() + 8);
    out.push('\'');
    for (pos, c) in text.chars().enumerate() {
        match c {
            ' ' => out.push_str("%s"),
            '\'' => out.push_str("'\\''"),
            '%' => {
                // `input` reads "%s" as a space; keep a literal "%s" by splitting it from "s".
                out.push('%');
            }
            c if c.is_ascii_graphic() => out.push(c),
            '\t' | '\n' | '\r' => {
                return Err(DeviceError::InvalidArgument(format!(
                    "`input text` cannot type control characters; got {:?} at position {pos}; use press_key for ENTER or TAB",
                    c
                )));
            }
            c => {
                return Err(DeviceError::InvalidArgument(format!(
                    "`input text` on Android accepts ASCII only; got '{c}' at position {pos}"
                )));
            }
        }
    }
    out.push('\'');
    Ok(out)
}

/// Splits text into chunks that `input text` handles well (long arguments are slow and some
/// devices drop characters past a few hundred).
pub fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut v = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        // Never split a "%s"-to-be between chunks: it is a literal '%' followed by 's'.
        v.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    v
}

/// Android keycode of a key.
pub fn keycode(key: Key) -> Option<u32> {
    Some(match key {
        Key::Unspecified => return None,
        Key::Back => 4,
        Key::Home => 3,
        Key::Enter => 66,
        Key::Del => 67,
        Key::Tab => 61,
        Key::AppSwitch => 187,
        Key::Menu => 82,
        Key::Search => 84,
        Key::VolumeUp => 24,
        Key::VolumeDown => 25,
        Key::Power => 26,
        Key::DpadUp => 19,
        Key::DpadDown => 20,
        Key::DpadLeft => 21,
        Key::DpadRight => 22,
        Key::Escape => 111,
    })
}

/// KEYCODE_DEL, KEYCODE_MOVE_END.
pub const KEYCODE_DEL: u32 = 67;
pub const KEYCODE_MOVE_END: u32 = 123;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_and_quotes_are_escaped() {
        assert_eq!(escape_input_text("hello world").unwrap(), "'hello%sworld'");
        assert_eq!(escape_input_text("it's").unwrap(), "'it'\\''s'");
        assert_eq!(
            escape_input_text("a;b&&c|d$(e)`f`").unwrap(),
            "'a;b&&c|d$(e)`f`'"
        );
        assert_eq!(escape_input_text("").unwrap(), "''");
    }

    #[test]
    fn non_ascii_is_refused_with_position() {
        let err = escape_input_text("café").unwrap_err().to_string();
        assert_eq!(
            err,
            "`input text` on Android accepts ASCII only; got 'é' at position 3"
        );
        assert!(
            escape_input_text("a\nb")
                .unwrap_err()
                .to_string()
                .contains("position 1")
        );
    }

    #[test]
    fn chunks_cover_the_text() {
        assert_eq!(chunks("abcdefg", 3), vec!["abc", "def", "g"]);
        assert!(chunks("", 3).is_empty());
    }

    #[test]
    fn every_named_key_has_a_code() {
        for k in 1..=16 {
            let key = Key::try_from(k).unwrap();
            assert!(keycode(key).is_some(), "{key:?}");
        }
        assert_eq!(keycode(Key::Unspecified), None);
    }
}
