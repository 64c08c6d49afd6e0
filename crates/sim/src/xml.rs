//! `uiautomator dump` output: the view tree as Android prints it (one `<hierarchy>`, nested
//! `<node>` elements with the same attributes in the same order).
use std::fmt::Write;

use crate::view::View;

/// Escapes text for an XML attribute value.
fn escape(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
}

/// The XML document for `view`.
pub fn dump(view: &View) -> String {
    let mut out = String::with_capacity(512 + view.nodes.len() * 400);
    out.push_str(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">",
    );
    // Open nodes; each entry is a node index. Nodes are in pre-order, so a node's parent is
    // on the stack when it is reached.
    let mut open: Vec<usize> = Vec::new();
    // Position of each node among its siblings.
    let mut sibling_count: Vec<usize> = vec![0; view.nodes.len() + 1];
    let mut root_count = 0usize;
    for (i, n) in view.nodes.iter().enumerate() {
        while let Some(&top) = open.last() {
            if Some(top) == n.parent {
                break;
            }
            open.pop();
            out.push_str("</node>");
        }
        let position = match n.parent {
            Some(p) => {
                let slot = sibling_count.get_mut(p).map(|c| {
                    *c += 1;
                    *c - 1
                });
                slot.unwrap_or(0)
            }
            None => {
                root_count += 1;
                root_count - 1
            }
        };
        let _ = write!(out, "<node index=\"{position}\" text=\"");
        escape(&mut out, &n.text);
        out.push_str("\" resource-id=\"");
        escape(&mut out, &n.resource_id);
        let _ = write!(out, "\" class=\"{}\" package=\"", n.class);
        escape(&mut out, &view.package);
        out.push_str("\" content-desc=\"");
        escape(&mut out, &n.content_desc);
        let b = n.bounds;
        let _ = write!(
            out,
            "\" checkable=\"{}\" checked=\"{}\" clickable=\"{}\" enabled=\"true\" focusable=\"{}\" focused=\"{}\" scrollable=\"{}\" long-clickable=\"{}\" password=\"{}\" selected=\"false\" bounds=\"[{},{}][{},{}]\">",
            n.checkable,
            n.checked,
            n.clickable,
            n.focusable,
            n.focused,
            n.scrollable,
            n.long_clickable,
            n.password,
            b.left,
            b.top,
            b.right,
            b.bottom
        );
        open.push(i);
    }
    for _ in open {
        out.push_str("</node>");
    }
    out.push_str("</hierarchy>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{Node, Rect};

    #[test]
    fn nesting_indices_and_escaping_follow_android() {
        let view = View {
            package: "p".into(),
            nodes: vec![
                Node {
                    class: "a.Root",
                    bounds: Rect::new(0, 0, 10, 10),
                    ..Node::default()
                },
                Node {
                    parent: Some(0),
                    class: "a.A",
                    text: "x<&\"'>".into(),
                    ..Node::default()
                },
                Node {
                    parent: Some(1),
                    class: "a.B",
                    ..Node::default()
                },
                Node {
                    parent: Some(0),
                    class: "a.C",
                    clickable: true,
                    ..Node::default()
                },
            ],
            ..View::default()
        };
        let xml = dump(&view);
        assert!(xml.starts_with("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"><node index=\"0\""));
        assert!(xml.contains("text=\"x&lt;&amp;&quot;&apos;&gt;\""));
        assert_eq!(xml.matches("<node ").count(), 4);
        assert_eq!(xml.matches("</node>").count(), 4);
        // C is the second child of the root, after A (whose child B is closed first).
        assert!(
            xml.contains(
                "</node></node><node index=\"1\" text=\"\" resource-id=\"\" class=\"a.C\""
            )
        );
        assert!(xml.ends_with("</node></node></hierarchy>"));
    }
}
