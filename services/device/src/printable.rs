//! Text from callers that the service keeps or repeats back: what is safe to print in a
//! terminal and a log. Lease holders are refused unless they are short printable text (they are
//! identities compared as given, so they are never altered); any message a refusal carries is
//! escaped and cut to a bound before it leaves, since it may repeat what a caller sent.
use std::borrow::Cow;

use crate::error::{DeviceError, Result};

/// Longest lease holder, in bytes of UTF-8.
pub const MAX_HOLDER_BYTES: usize = 256;

/// Longest message a refusal carries, in bytes; longer ones are cut.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Control (Cc), format (Cf), line separator (Zl) and paragraph separator (Zp) characters of
/// Unicode 16.0, as ranges: C0 and C1 controls, DEL, soft hyphen, Arabic and Syriac format
/// marks, zero-width spaces and joiners, LRM/RLM, the bidi embeddings, overrides (U+202A–U+202E)
/// and isolates (U+2066–U+2069), invisible operators, BOM, interlinear annotation, tags.
const UNPRINTABLE: &[(u32, u32)] = &[
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Whether `c` would act on a terminal or a log instead of showing (a control, format or
/// separator character).
pub fn is_unprintable(c: char) -> bool {
    let c = u32::from(c);
    UNPRINTABLE
        .binary_search_by(|(lo, hi)| {
            if *hi < c {
                std::cmp::Ordering::Less
            } else if *lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Refuses a lease holder that is empty, longer than [`MAX_HOLDER_BYTES`] or not printable
/// text. Task ids and people's names (any script) pass.
pub fn check_holder(holder: &str) -> Result<()> {
    if holder.trim().is_empty() {
        return Err(DeviceError::InvalidArgument(
            "holder must name who takes the lease (a task id or a user), got an empty string"
                .into(),
        ));
    }
    if holder.len() > MAX_HOLDER_BYTES {
        return Err(DeviceError::InvalidArgument(format!(
            "holder must be at most {MAX_HOLDER_BYTES} bytes of UTF-8, got {} bytes; \
             name the lease's taker by a task id or a user name",
            holder.len()
        )));
    }
    if let Some((at, c)) = holder.char_indices().find(|(_, c)| is_unprintable(*c)) {
        return Err(DeviceError::InvalidArgument(format!(
            "holder must be printable text, without control or format characters (such as \
             bidi overrides and isolates, U+202A-U+202E and U+2066-U+2069), found U+{:04X} at \
             byte {at}; name the lease's taker by a task id or a user name",
            u32::from(c)
        )));
    }
    Ok(())
}

/// `text` with every unprintable character written as `\u{…}` and cut to at most `max` bytes
/// (on a character boundary, ending in `…`).
pub fn printable(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max && !text.chars().any(is_unprintable) {
        return Cow::Borrowed(text);
    }
    let limit = max.saturating_sub('…'.len_utf8());
    let mut out = String::with_capacity(max.min(text.len() + 16));
    for c in text.chars() {
        let before = out.len();
        if is_unprintable(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
        if out.len() > limit {
            out.truncate(before);
            out.push('…');
            break;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_holds_the_bidi_controls() {
        assert!(UNPRINTABLE.windows(2).all(|w| w[0].1 < w[1].0));
        for c in ('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}') {
            assert!(is_unprintable(c), "{c:?}");
        }
        for c in [
            '\0', '\n', '\u{1b}', '\u{7f}', '\u{85}', '\u{200b}', '\u{2028}', '\u{feff}',
        ] {
            assert!(is_unprintable(c), "{c:?}");
        }
        for c in ['a', ' ', 'é', '用', '\u{a0}', '😀', '\u{e000}'] {
            assert!(!is_unprintable(c), "{c:?}");
        }
        // Rust's own control test agrees on Cc.
        for c in (0u32..0x3000).filter_map(char::from_u32) {
            if c.is_control() {
                assert!(is_unprintable(c), "{c:?}");
            }
        }
    }

    #[test]
    fn holders_are_checked_and_text_is_made_printable() {
        assert!(check_holder("task-0123456789abcdef0123456789abcdef").is_ok());
        assert!(check_holder(&"é".repeat(128)).is_ok());
        assert!(check_holder(&("é".repeat(128) + "a")).is_err());
        assert!(check_holder(" ").is_err());
        let e = check_holder("a\u{202e}b").unwrap_err().to_string();
        assert!(e.contains("U+202E at byte 1"), "{e}");
        assert_eq!(printable("plain", 10), "plain");
        assert_eq!(printable("a\u{1b}[2Jb", 64), "a\\u{1b}[2Jb");
        let cut = printable(&"é".repeat(100), 11).into_owned();
        assert_eq!(cut, "éééé…");
        assert!(cut.len() <= 11);
        let cut = printable(&"\u{202e}".repeat(100), 20).into_owned();
        assert!(
            cut.len() <= 20 && cut.ends_with('…') && !cut.contains('\u{202e}'),
            "{cut}"
        );
    }
}
