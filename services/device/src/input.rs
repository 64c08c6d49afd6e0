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
            // `input` reads "%s" as a space: `strokes` ends a piece after a '%' before an 's'.
            '%' => out.push('%'),
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

/// One step of typing a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke<'a> {
    /// Characters for one `input text` call (printable ASCII, never empty).
    Text(&'a str),
    /// A line break, typed as an ENTER key event: a new line in a multi-line field (in a
    /// single-line field, ENTER performs the field's action, as on the phone).
    Enter,
}

/// Checks that `text` can be typed and splits it into [`Stroke`]s: every `\n` becomes
/// [`Stroke::Enter`], and each line is cut into pieces of at most `max` bytes (at least 1).
/// A piece also ends after a `%` that is followed by `s`, so that `input text` never reads
/// the pair as its `%s` escape for a space and the text arrives as written.
///
/// Printable ASCII, spaces and `\n` can be typed; anything else (a tab, `\r`, a non-ASCII
/// character) is refused with the character and its position in `text`.
pub fn strokes(text: &str, max: usize) -> Result<Vec<Stroke<'_>>> {
    for (pos, c) in text.chars().enumerate() {
        match c {
            ' ' | '\n' => {}
            c if c.is_ascii_graphic() => {}
            '\t' | '\r' => {
                return Err(DeviceError::InvalidArgument(format!(
                    "`input text` cannot type control characters; got {c:?} at position {pos}; line breaks are written as \\n"
                )));
            }
            c if c.is_control() => {
                return Err(DeviceError::InvalidArgument(format!(
                    "`input text` cannot type control characters; got {c:?} at position {pos}"
                )));
            }
            c => {
                return Err(DeviceError::InvalidArgument(format!(
                    "`input text` on Android accepts ASCII only; got '{c}' at position {pos}"
                )));
            }
        }
    }
    // Only ASCII is left, so every byte offset is a character boundary.
    let max = max.max(1);
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push(Stroke::Enter);
        }
        let mut rest = line;
        while !rest.is_empty() {
            let mut cut = rest.len().min(max);
            if let Some(p) = rest[..cut].find("%s") {
                cut = p + 1;
            }
            out.push(Stroke::Text(&rest[..cut]));
            rest = &rest[cut..];
        }
    }
    Ok(out)
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

/// KEYCODE_ENTER, KEYCODE_DEL, KEYCODE_MOVE_END.
pub const KEYCODE_ENTER: u32 = 66;
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
    fn strokes_cut_lines_into_pieces_and_breaks_into_enter() {
        use Stroke::{Enter, Text};
        assert_eq!(
            strokes("abcdefg", 3).unwrap(),
            vec![Text("abc"), Text("def"), Text("g")]
        );
        assert!(strokes("", 3).unwrap().is_empty());
        assert_eq!(
            strokes("- milk\n- eggs", 200).unwrap(),
            vec![Text("- milk"), Enter, Text("- eggs")]
        );
        // Empty lines, and breaks at either end, are key events only.
        assert_eq!(
            strokes("\na\n\nb\n", 200).unwrap(),
            vec![Enter, Text("a"), Enter, Enter, Text("b"), Enter]
        );
        // Quotes and shell characters stay in the pieces; escaping happens per piece.
        assert_eq!(
            strokes("\"it's\" $HOME", 200).unwrap(),
            vec![Text("\"it's\" $HOME")]
        );
    }

    #[test]
    fn a_percent_before_s_ends_its_piece() {
        use Stroke::Text;
        assert_eq!(
            strokes("100%sure, 5%%s", 200).unwrap(),
            vec![Text("100%"), Text("sure, 5%%"), Text("s")]
        );
        assert_eq!(strokes("50% off", 200).unwrap(), vec![Text("50% off")]);
    }

    #[test]
    fn strokes_refuse_what_cannot_be_typed_with_its_position() {
        let err = strokes("ab\n\u{2022} c", 200).unwrap_err().to_string();
        assert_eq!(
            err,
            "`input text` on Android accepts ASCII only; got '\u{2022}' at position 3"
        );
        let err = strokes("a\r\nb", 200).unwrap_err().to_string();
        assert!(err.contains("'\\r' at position 1"), "{err}");
        let err = strokes("a\u{7}", 200).unwrap_err().to_string();
        assert!(err.contains("position 1"), "{err}");
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
