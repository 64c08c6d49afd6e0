//! A step's cards as prompt text, within a bound of characters.
use crate::Card;

/// The cards as they go into a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    /// One section per card (`### package` then its text); empty when there are none.
    pub text: String,
    /// Characters of card text the cards had, and how many the prompt holds.
    pub total_chars: usize,
    pub kept_chars: usize,
}

impl Rendered {
    /// Whether the bound cut the cards.
    pub fn cut(&self) -> bool {
        self.kept_chars < self.total_chars
    }

    /// The line a prompt adds when the cards were cut.
    pub fn cap_note(&self) -> Option<String> {
        self.cut().then(|| {
            format!(
                "(app cards cut to {} of {} characters)",
                self.kept_chars, self.total_chars
            )
        })
    }
}

/// `cards` as prompt text, at most `max_chars` characters of card text in all: the first cards
/// whole where they fit, the one that does not fit cut at a line (or a character) with `…`, the
/// rest left out; the cut is reported by [`Rendered::cap_note`].
pub fn render(cards: &[Card], max_chars: usize) -> Rendered {
    let total_chars: usize = cards.iter().map(|c| c.text.chars().count()).sum();
    let mut left = max_chars;
    let mut sections = Vec::new();
    let mut kept_chars = 0;
    for card in cards {
        if left == 0 {
            break;
        }
        let n = card.text.chars().count();
        let body = if n <= left {
            card.text.clone()
        } else {
            cut(&card.text, left)
        };
        let kept = body.chars().count().min(n);
        kept_chars += kept;
        left = left.saturating_sub(kept);
        if !body.is_empty() {
            sections.push(format!("### {}\n{body}", card.package));
        }
    }
    Rendered {
        text: sections.join("\n\n"),
        total_chars,
        kept_chars,
    }
}

/// `text` cut to at most `max` characters (the last one `…`), at the end of a line when one
/// ends in the second half.
fn cut(text: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let head: String = text.chars().take(max.saturating_sub(1)).collect();
    let at_line = head
        .rfind('\n')
        .filter(|&i| head[..i].chars().count() >= max / 2)
        .map(|i| head[..i].to_owned());
    format!("{}…", at_line.unwrap_or(head).trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;

    fn card(package: &str, text: &str) -> Card {
        Card {
            package: package.into(),
            text: text.into(),
            source: Source::Builtin,
        }
    }

    #[test]
    fn cards_within_the_bound_are_whole_and_nothing_is_reported() {
        let r = render(&[card("a.b", "one"), card("c.d", "two")], 100);
        assert_eq!(r.text, "### a.b\none\n\n### c.d\ntwo");
        assert_eq!(r.cap_note(), None);
    }

    #[test]
    fn cards_beyond_the_bound_are_cut_at_a_line_and_the_cut_is_reported() {
        let long = "line one is here\nline two is here\nline three is here";
        let r = render(&[card("a.b", "first"), card("c.d", long)], 40);
        assert!(
            r.text
                .starts_with("### a.b\nfirst\n\n### c.d\nline one is here\nline two is here…"),
            "{}",
            r.text
        );
        assert!(r.kept_chars <= 40, "{r:?}");
        assert_eq!(
            r.cap_note().unwrap(),
            format!(
                "(app cards cut to {} of {} characters)",
                r.kept_chars,
                5 + long.chars().count()
            )
        );
        // A card that no longer fits is left out.
        let r = render(&[card("a.b", "0123456789"), card("c.d", "more")], 10);
        assert_eq!(r.text, "### a.b\n0123456789");
        assert!(r.cut());
    }

    #[test]
    fn cutting_counts_characters_not_bytes() {
        let r = render(&[card("a.b", &"日本語".repeat(10))], 7);
        assert_eq!(r.text, "### a.b\n日本語日本語…");
        assert_eq!(r.kept_chars, 7);
    }
}
