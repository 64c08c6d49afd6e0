//! Parser for `uiautomator dump` XML: flattens the accessibility tree into indexed elements.
//!
//! Which nodes get an index: only *meaningful* ones, i.e. nodes that show text or a
//! content description, or that the user can act on (clickable, long-clickable, checkable,
//! scrollable, editable) or that hold focus. Plain layout containers are skipped: a typical
//! screen has 3-5 times more containers than meaningful nodes, and every element costs prompt
//! tokens. `depth` and `parent_index` refer to the nearest *kept* ancestor, so the tree shape
//! among kept elements is preserved. Indices are in document order and valid for one snapshot.
use droidmesh_proto::v1::{Bounds, UiElement};
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};

use crate::error::{DeviceError, Result};

/// One parsed dump: the kept elements and where focus is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedUi {
    pub elements: Vec<UiElement>,
    /// Index (into `elements`) of the focused element, if any.
    pub focused_index: Option<u32>,
    /// Number of `<node>` elements in the dump, kept or not.
    pub total_nodes: usize,
}

impl ParsedUi {
    /// The focused element, if any.
    pub fn focused(&self) -> Option<&UiElement> {
        self.focused_index
            .and_then(|i| self.elements.get(i as usize))
    }
}

/// Parses the output of `uiautomator dump /dev/tty` (or the dump file's contents).
///
/// Leading noise before `<?xml`/`<hierarchy` and the "UI hierchary dumped to: ..." trailer are
/// ignored. Malformed or truncated XML gives [`DeviceError::UiDump`]; this never panics.
pub fn parse_ui_dump(raw: &str) -> Result<ParsedUi> {
    let start = raw
        .find("<?xml")
        .or_else(|| raw.find("<hierarchy"))
        .ok_or_else(|| {
            bad(format!(
                "no <hierarchy> element in {} bytes of output{}",
                raw.len(),
                snippet(raw)
            ))
        })?;
    let body = &raw[start..];
    // Cut the trailer ("UI hierchary dumped to: ...") off; without a closing tag the parser
    // below reports the truncation.
    let body = match body.rfind("</hierarchy>") {
        Some(end) => &body[..end + "</hierarchy>".len()],
        None => body,
    };

    let mut reader = quick_xml::Reader::from_str(body);
    reader.config_mut().check_end_names = true;
    let mut out = ParsedUi::default();
    // For each open <node>: the index of the element it produced, if it was kept.
    let mut stack: Vec<Option<u32>> = Vec::with_capacity(32);
    let mut in_hierarchy = false;
    let mut hierarchy_done = false;
    loop {
        let event = reader.read_event().map_err(|e| {
            bad(format!(
                "malformed xml at byte {}: {e}",
                reader.buffer_position()
            ))
        })?;
        match event {
            Event::Start(e) if e.name().as_ref() == "hierarchy" => {
                if in_hierarchy || hierarchy_done {
                    return Err(bad("more than one <hierarchy> element".to_owned()));
                }
                in_hierarchy = true;
            }
            Event::Empty(e) if e.name().as_ref() == "hierarchy" => {
                if in_hierarchy || hierarchy_done {
                    return Err(bad("more than one <hierarchy> element".to_owned()));
                }
                hierarchy_done = true;
            }
            Event::End(e) if e.name().as_ref() == "hierarchy" => {
                if !stack.is_empty() {
                    return Err(bad("</hierarchy> closes while nodes are open".to_owned()));
                }
                in_hierarchy = false;
                hierarchy_done = true;
            }
            Event::Start(e) if e.name().as_ref() == "node" => {
                let kept = push_node(&e, &stack, &mut out, in_hierarchy)?;
                stack.push(kept);
            }
            Event::Empty(e) if e.name().as_ref() == "node" => {
                push_node(&e, &stack, &mut out, in_hierarchy)?;
            }
            Event::End(e) if e.name().as_ref() == "node" => {
                stack
                    .pop()
                    .ok_or_else(|| bad("</node> without a matching <node>".to_owned()))?;
            }
            Event::Start(e) | Event::Empty(e) => {
                // Its name is not quoted: errors are not masked, so they quote no part of a dump.
                return Err(bad(format!(
                    "an unexpected element ({} bytes of name); a dump holds only <hierarchy> and <node>",
                    e.name().as_ref().len()
                )));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !hierarchy_done || !stack.is_empty() {
        return Err(bad(
            "the dump ends inside an open element: output truncated".to_owned(),
        ));
    }
    Ok(out)
}

fn push_node(
    e: &BytesStart<'_>,
    stack: &[Option<u32>],
    out: &mut ParsedUi,
    in_hierarchy: bool,
) -> Result<Option<u32>> {
    if !in_hierarchy {
        return Err(bad("<node> outside <hierarchy>".to_owned()));
    }
    out.total_nodes += 1;
    let mut el = UiElement {
        enabled: true,
        ..UiElement::default()
    };
    let mut bounds = None;
    let mut password = false;
    // Duplicate-attribute checks are off (they are quadratic in the attribute count; a
    // repeated attribute simply overrides), and only the values kept are decoded: flags are
    // compared undecoded.
    for attr in e.attributes().with_checks(false) {
        let attr = attr.map_err(|err| bad(format!("malformed attribute: {err}")))?;
        let flag = || attr.value.as_ref() == "true";
        let text = || {
            attr.normalized_value(XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .map_err(|err| bad(format!("bad attribute value: {err}")))
        };
        match attr.key.as_ref() {
            "text" => el.text = text()?,
            "resource-id" => el.resource_id = text()?,
            "class" => el.class_name = text()?,
            "package" => el.package = text()?,
            "content-desc" => el.content_desc = text()?,
            "checkable" => el.checkable = flag(),
            "checked" => el.checked = flag(),
            "clickable" => el.clickable = flag(),
            "enabled" => el.enabled = flag(),
            "focusable" => el.focusable = flag(),
            "focused" => el.focused = flag(),
            "scrollable" => el.scrollable = flag(),
            "long-clickable" => el.long_clickable = flag(),
            "password" => password = flag(),
            "selected" => el.selected = flag(),
            "editable" => el.editable = flag(),
            "bounds" => {
                let value = text()?;
                bounds = Some(parse_bounds(&value).ok_or_else(|| {
                    bad(format!("bounds must look like [l,t][r,b], got '{value}'"))
                })?);
            }
            _ => {}
        }
    }
    el.password = password;
    el.editable = el.editable || password || is_editable_class(&el.class_name);
    el.bounds = bounds;
    let meaningful = !el.text.is_empty()
        || !el.content_desc.is_empty()
        || el.clickable
        || el.long_clickable
        || el.checkable
        || el.scrollable
        || el.editable
        || el.focused;
    if !meaningful {
        return Ok(None);
    }
    let index = u32::try_from(out.elements.len())
        .map_err(|_| bad("more elements than fit in u32".to_owned()))?;
    let ancestors = stack.iter().flatten();
    el.depth = u32::try_from(ancestors.clone().count()).unwrap_or(u32::MAX);
    el.parent_index = ancestors.last().copied();
    el.index = index;
    if el.focused && out.focused_index.is_none() {
        out.focused_index = Some(index);
    }
    out.elements.push(el);
    Ok(Some(index))
}

/// Text-input classes: EditText and its framework subclasses, plus common library ones.
fn is_editable_class(class: &str) -> bool {
    let simple = class.rsplit(['.', '$']).next().unwrap_or(class);
    matches!(
        simple,
        "EditText"
            | "AutoCompleteTextView"
            | "MultiAutoCompleteTextView"
            | "ExtractEditText"
            | "SearchAutoComplete"
            | "TextInputEditText"
            | "AppCompatEditText"
            | "AppCompatAutoCompleteTextView"
    )
}

/// Parses "[l,t][r,b]".
pub fn parse_bounds(s: &str) -> Option<Bounds> {
    let s = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (a, b) = s.split_once("][")?;
    let (l, t) = a.split_once(',')?;
    let (r, bt) = b.split_once(',')?;
    Some(Bounds {
        left: l.trim().parse().ok()?,
        top: t.trim().parse().ok()?,
        right: r.trim().parse().ok()?,
        bottom: bt.trim().parse().ok()?,
    })
}

/// Centre of an element's bounds, the point a tap by index uses.
pub fn centre(b: &Bounds) -> (i32, i32) {
    (
        b.left + (b.right.saturating_sub(b.left)) / 2,
        b.top + (b.bottom.saturating_sub(b.top)) / 2,
    )
}

fn bad(detail: String) -> DeviceError {
    DeviceError::UiDump { detail }
}

/// The start of output that holds no hierarchy, for the operator: the words of a tool that
/// failed ("ERROR: could not get idle state."). Markup is never quoted: an app's text (a typed
/// secret among it) only ever shows inside markup, and errors are not masked.
fn snippet(raw: &str) -> String {
    let t = raw.trim();
    if t.is_empty() {
        return String::new();
    }
    if t.contains('<') {
        return " (it holds markup, not quoted)".to_owned();
    }
    let cut: String = t.chars().take(80).collect();
    format!(" (starts with '{cut}')")
}

#[cfg(test)]
#[path = "ui_dump_tests.rs"]
mod tests;
