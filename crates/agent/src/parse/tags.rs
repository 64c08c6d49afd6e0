//! A forgiving scanner for the XML-like tags in model replies (`<plan>`, `<script>`, ...).
//!
//! Tag names match ASCII case-insensitively, opening tags may carry attributes or close
//! themselves (`<x/>`), and a tag that is never closed ends where the next tag of the same
//! family opens, or at the end of the text. All opening tags are found in one pass, so a scan
//! stays linear in the length of the text. Searching runs on an ASCII-lower-cased copy, whose
//! byte offsets are those of the original.

use std::ops::Range;

/// One element found in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Element {
    /// Lower-case tag name.
    pub name: &'static str,
    /// Raw text between the tag name and `>` (attributes).
    pub attrs: Range<usize>,
    /// The content between the opening and the closing tag.
    pub body: Range<usize>,
    /// Whether a closing tag (or `/>`) was found.
    pub closed: bool,
    /// Where scanning continues: after the closing tag, or at the end of the body.
    pub end: usize,
}

/// An opening tag found in the text.
#[derive(Debug, Clone)]
struct Open {
    name: &'static str,
    /// Offset of `<`.
    start: usize,
    attrs: Range<usize>,
    /// Offset after `>`.
    end: usize,
    self_closing: bool,
}

/// The opening tags of a family of names in a text, found in one pass.
#[derive(Debug)]
pub(crate) struct Tags<'a> {
    lower: &'a str,
    opens: Vec<Open>,
}

impl<'a> Tags<'a> {
    /// Finds every opening tag `<name ...>` of `names` in `lower` (an ASCII-lower-cased text).
    pub(crate) fn new(lower: &'a str, names: &[&'static str]) -> Self {
        let bytes = lower.as_bytes();
        let mut opens = Vec::new();
        let mut search = 0;
        while let Some(found) = lower.get(search..).and_then(|rest| rest.find('<')) {
            let at = search + found;
            search = at + 1;
            let Some(&name) = names.iter().find(|n| lower[at + 1..].starts_with(**n)) else {
                continue;
            };
            let after_name = at + 1 + name.len();
            if !matches!(
                bytes.get(after_name),
                Some(b'>' | b'/' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                continue;
            }
            // The tag ends at the next '>'; a '<' before it means this was not a tag.
            let rest = &lower[after_name..];
            let Some(close) = rest.find(['>', '<']) else {
                break;
            };
            if bytes[after_name + close] == b'<' {
                continue;
            }
            let gt = after_name + close;
            let self_closing = gt > after_name && bytes[gt - 1] == b'/';
            let attrs_end = if self_closing { gt - 1 } else { gt };
            opens.push(Open {
                name,
                start: at,
                attrs: after_name..attrs_end,
                end: gt + 1,
                self_closing,
            });
            search = gt + 1;
        }
        Self { lower, opens }
    }

    /// The next element at or after `from`. An unclosed element ends at the next opening tag
    /// of the family, or at the end of the text; its closing tag is looked for only up to the
    /// next opening tag of the same name, which keeps a whole scan linear.
    pub(crate) fn next_element(&self, from: usize) -> Option<Element> {
        let i = self.opens.partition_point(|o| o.start < from);
        let open = self.opens.get(i)?;
        if open.self_closing {
            return Some(Element {
                name: open.name,
                attrs: open.attrs.clone(),
                body: open.end..open.end,
                closed: true,
                end: open.end,
            });
        }
        let same_again = self.opens[i + 1..]
            .iter()
            .find(|o| o.name == open.name)
            .map_or(self.lower.len(), |o| o.start);
        if let Some((close_start, close_end)) =
            find_close(self.lower, open.name, open.end, same_again)
        {
            return Some(Element {
                name: open.name,
                attrs: open.attrs.clone(),
                body: open.end..close_start,
                closed: true,
                end: close_end,
            });
        }
        let j = self.opens.partition_point(|o| o.start < open.end);
        let next_any = self.opens.get(j).map_or(self.lower.len(), |o| o.start);
        Some(Element {
            name: open.name,
            attrs: open.attrs.clone(),
            body: open.end..next_any,
            closed: false,
            end: next_any,
        })
    }
}

/// The closing tag `</name>` (spaces allowed before `>`) between `from` and `limit`:
/// (start, end).
fn find_close(lower: &str, name: &str, from: usize, limit: usize) -> Option<(usize, usize)> {
    let window = lower.get(from..limit)?;
    let mut search = 0;
    while let Some(found) = window.get(search..)?.find("</") {
        let at = search + found;
        search = at + 2;
        let rest = &window[at + 2..];
        if let Some(after) = rest.strip_prefix(name) {
            let spaces = after.len() - after.trim_start().len();
            if after[spaces..].starts_with('>') {
                return Some((from + at, from + at + 2 + name.len() + spaces + 1));
            }
        }
    }
    None
}

/// The value of attribute `name` in a tag's attribute text: quoted with `"` or `'`, or bare.
pub(crate) fn attribute<'a>(attrs: &'a str, name: &str) -> Option<&'a str> {
    let lower = attrs.to_ascii_lowercase();
    let mut search = 0;
    while let Some(found) = lower.get(search..)?.find(name) {
        let at = search + found;
        search = at + name.len();
        let before_ok = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        let rest = attrs[at + name.len()..].trim_start();
        let Some(rest) = rest.strip_prefix(['=', ':']).filter(|_| before_ok) else {
            continue;
        };
        let rest = rest.trim_start();
        return Some(match rest.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let inner = &rest[1..];
                inner.find(q).map_or(inner, |end| &inner[..end])
            }
            _ => {
                let end = rest.find(|c: char| c.is_whitespace() || c == '/' || c == '>');
                end.map_or(rest, |end| &rest[..end])
            }
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(text: &str, names: &[&'static str]) -> Option<(String, bool)> {
        let lower = text.to_ascii_lowercase();
        Tags::new(&lower, names)
            .next_element(0)
            .map(|e| (text[e.body].to_owned(), e.closed))
    }

    #[test]
    fn finds_closed_unclosed_and_self_closing_tags() {
        assert_eq!(
            element("a <Plan>x</PLAN > b", &["plan"]),
            Some(("x".into(), true))
        );
        assert_eq!(
            element("<plan>x\n<thought>y", &["plan", "thought"]),
            Some(("x\n".into(), false))
        );
        assert_eq!(
            element("<r success=\"true\"/>", &["r"]),
            Some((String::new(), true))
        );
        assert_eq!(element("<planet>x</planet>", &["plan"]), None);
        assert_eq!(element("a < plan", &["plan"]), None);
    }

    #[test]
    fn a_mention_inside_a_closed_tag_is_not_a_tag() {
        assert_eq!(
            element(
                "<thought>then <plan> it</thought><plan>1. a</plan>",
                &["thought", "plan"]
            ),
            Some(("then <plan> it".into(), true))
        );
    }

    #[test]
    fn a_closing_tag_after_a_repeat_belongs_to_the_repeat() {
        assert_eq!(
            element("<thought>a<thought>b</thought>", &["thought"]),
            Some(("a".into(), false))
        );
    }

    #[test]
    fn attributes_quoted_bare_or_missing() {
        assert_eq!(attribute(" success=\"true\"", "success"), Some("true"));
        assert_eq!(attribute(" Success = 'No' ", "success"), Some("No"));
        assert_eq!(attribute(" success=yes", "success"), Some("yes"));
        assert_eq!(attribute(" unsuccess=1 success=0", "success"), Some("0"));
        assert_eq!(attribute(" status=\"ok\"", "success"), None);
    }
}
