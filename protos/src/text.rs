//! Text shortened for messages, prompts and logs: one rule for every service.
//!
//! The rule: count characters (not bytes), cut on a character boundary, keep the first `max`
//! characters, and mark a cut only when there was one. [`shorten`] marks it with `…` (so a cut
//! text is `max + 1` characters); [`shorten_noting`] says how many characters were left out, for
//! a model that should know the text goes on. A text of at most `max` characters comes back
//! unchanged.

/// `text` cut to its first `max` characters, `…` marking a cut.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// `text` cut to its first `max` characters, followed by ` […N more characters cut]` when cut.
pub fn shorten_noting(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => {
            let left_out = text[at..].chars().count();
            format!("{} […{left_out} more characters cut]", &text[..at])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_that_fits_comes_back_unchanged() {
        assert_eq!(shorten("héllo", 5), "héllo");
        assert_eq!(shorten_noting("héllo", 5), "héllo");
        assert_eq!(shorten("", 0), "");
    }

    #[test]
    fn a_cut_counts_characters_and_is_marked() {
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("héllo wörld", 0), "…");
        assert_eq!(
            shorten_noting("héllo wörld", 5),
            "héllo […6 more characters cut]"
        );
        // Multi-byte characters are never split: the kept part is whole characters.
        let cut = shorten(&"€".repeat(10), 3);
        assert_eq!(cut, "€€€…");
        assert_eq!(cut.chars().count(), 4);
    }
}
