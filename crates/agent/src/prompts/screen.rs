//! The device's state (`droidmesh.v1.UiState`) as prompts show it: one conversion for every
//! agent that reads the screen, so the elements a model reads agree across agents.
use droidmesh_proto::v1 as pb;

use super::{PhoneState, UiElement};

impl From<&pb::UiElement> for UiElement {
    fn from(e: &pb::UiElement) -> Self {
        let b = e.bounds.unwrap_or_default();
        UiElement {
            index: e.index,
            depth: e.depth,
            class_name: e.class_name.clone(),
            text: e.text.clone(),
            content_desc: e.content_desc.clone(),
            resource_id: e.resource_id.clone(),
            bounds: [b.left, b.top, b.right, b.bottom],
            clickable: e.clickable,
            long_clickable: e.long_clickable,
            checkable: e.checkable,
            checked: e.checked,
            editable: e.editable,
            focused: e.focused,
            scrollable: e.scrollable,
            selected: e.selected,
            disabled: !e.enabled,
            password: e.password,
        }
    }
}

impl From<&pb::PhoneState> for PhoneState {
    fn from(p: &pb::PhoneState) -> Self {
        PhoneState {
            package: p.package.clone(),
            activity: p.activity.clone(),
            keyboard_shown: p.keyboard_shown,
            focused_index: p.focused_index,
            focused_text: p.focused_text.clone(),
        }
    }
}

/// The first `max_elements` elements of the screen and the phone's state.
pub fn screen(state: &pb::UiState, max_elements: usize) -> (Vec<UiElement>, PhoneState) {
    let elements = state
        .elements
        .iter()
        .take(max_elements)
        .map(UiElement::from)
        .collect();
    let phone = state
        .phone
        .as_ref()
        .map(PhoneState::from)
        .unwrap_or_default();
    (elements, phone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_and_phone_keep_their_fields() {
        let state = pb::UiState {
            elements: (0..3)
                .map(|i| pb::UiElement {
                    index: i,
                    text: format!("item {i}"),
                    enabled: i != 1,
                    bounds: Some(pb::Bounds {
                        left: 1,
                        top: 2,
                        right: 3,
                        bottom: 4,
                    }),
                    ..pb::UiElement::default()
                })
                .collect(),
            phone: Some(pb::PhoneState {
                package: "com.android.settings".into(),
                focused_index: Some(2),
                ..pb::PhoneState::default()
            }),
            ..pb::UiState::default()
        };
        let (elements, phone) = screen(&state, 2);
        assert_eq!(elements.len(), 2);
        assert_eq!(elements[1].text, "item 1");
        assert!(elements[1].disabled && !elements[0].disabled);
        assert_eq!(elements[0].bounds, [1, 2, 3, 4]);
        assert_eq!(phone.package, "com.android.settings");
        assert_eq!(phone.focused_index, Some(2));
        let (_, none) = screen(&pb::UiState::default(), 10);
        assert_eq!(none, PhoneState::default());
    }
}

/// The `ui_lines` filter: the screen's elements (a list of [`UiElement`]s), one line each,
/// indented two spaces per level of depth,
/// `[index] Class "text" desc="..." id=... [left,top][right,bottom] flags`, each line ended by
/// a newline; a note when there are none. The class and the resource id are shown from their
/// last `.` and `/`. Written here rather than as a template loop: it runs for every element of
/// every screen an agent is shown.
pub(super) fn ui_lines(elements: &minijinja::Value) -> Result<String, minijinja::Error> {
    use std::fmt::Write as _;
    let mut out = String::new();
    for el in elements.try_iter()? {
        let attr = |name: &str| el.get_attr(name).unwrap_or_default();
        let text = |name: &str| attr(name).as_str().unwrap_or_default().to_owned();
        let number = |v: minijinja::Value| i64::try_from(v).unwrap_or_default();
        let depth = usize::try_from(number(attr("depth"))).unwrap_or_default();
        for _ in 0..depth.min(64) {
            out.push_str("  ");
        }
        let class = text("class_name");
        let _ = write!(
            out,
            "[{}] {}",
            number(attr("index")),
            class.rsplit('.').next().unwrap_or_default()
        );
        let said = text("text");
        if !said.is_empty() {
            out.push(' ');
            out.push_str(&super::quote(&said));
        }
        let desc = text("content_desc");
        if !desc.is_empty() {
            out.push_str(" desc=");
            out.push_str(&super::quote(&desc));
        }
        let id = text("resource_id");
        if !id.is_empty() {
            out.push_str(" id=");
            out.push_str(id.rsplit('/').next().unwrap_or_default());
        }
        let bounds = attr("bounds");
        let corner = |i: usize| number(bounds.get_item_by_index(i).unwrap_or_default());
        let _ = write!(
            out,
            " [{},{}][{},{}]",
            corner(0),
            corner(1),
            corner(2),
            corner(3)
        );
        let flag = |name: &str| attr(name).is_true();
        for (name, shown) in [
            ("clickable", " clickable"),
            ("long_clickable", " long-clickable"),
        ] {
            if flag(name) {
                out.push_str(shown);
            }
        }
        if flag("checkable") {
            out.push_str(if flag("checked") {
                " checked"
            } else {
                " unchecked"
            });
        }
        for (name, shown) in [
            ("editable", " editable"),
            ("password", " password"),
            ("focused", " focused"),
            ("scrollable", " scrollable"),
            ("selected", " selected"),
            ("disabled", " disabled"),
        ] {
            if flag(name) {
                out.push_str(shown);
            }
        }
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("(no elements: the screen may be loading, locked or showing only an image)\n");
    }
    Ok(out)
}

#[cfg(test)]
mod lines_tests {
    use super::*;

    /// The element lines as the template loop wrote them before `ui_lines`.
    const LOOP: &str = r#"{% macro flags(el) -%}
{{ " clickable" if el.clickable else "" }}{{ " long-clickable" if el.long_clickable else "" }}{{ (" checked" if el.checked else " unchecked") if el.checkable else "" }}{{ " editable" if el.editable else "" }}{{ " password" if el.password else "" }}{{ " focused" if el.focused else "" }}{{ " scrollable" if el.scrollable else "" }}{{ " selected" if el.selected else "" }}{{ " disabled" if el.disabled else "" }}
{%- endmacro %}
{% for el in elements %}
{{ "  " * el.depth }}[{{ el.index }}] {{ el.class_name|split(".")|last }}{{ " " ~ el.text|quote if el.text else "" }}{{ " desc=" ~ el.content_desc|quote if el.content_desc else "" }}{{ " id=" ~ el.resource_id|split("/")|last if el.resource_id else "" }} [{{ el.bounds[0] }},{{ el.bounds[1] }}][{{ el.bounds[2] }},{{ el.bounds[3] }}]{{ flags(el) }}
{% else %}
(no elements: the screen may be loading, locked or showing only an image)
{% endfor %}
"#;

    fn both(elements: &[UiElement]) -> (String, String) {
        let mut env = minijinja::Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .unwrap(),
        );
        env.add_filter("quote", super::super::quote);
        env.add_template("loop", LOOP).unwrap();
        let value = minijinja::Value::from(minijinja::value::Serde(elements));
        let ctx = minijinja::context! { elements => value.clone() };
        let by_loop = env.get_template("loop").unwrap().render(&ctx).unwrap();
        (by_loop, ui_lines(&value).unwrap())
    }

    #[test]
    fn ui_lines_writes_what_the_template_loop_wrote() {
        let every_flag = UiElement {
            index: 7,
            depth: 3,
            class_name: "android.widget.EditText".into(),
            text: "say \"hi\"\nthere".into(),
            content_desc: "a\\b".into(),
            resource_id: "com.example:id/field".into(),
            bounds: [-5, 0, 1080, 2400],
            clickable: true,
            long_clickable: true,
            checkable: true,
            checked: true,
            editable: true,
            focused: true,
            scrollable: true,
            selected: true,
            disabled: true,
            password: true,
        };
        let bare = UiElement {
            class_name: "View".into(),
            resource_id: "plain_id".into(),
            checkable: true,
            ..UiElement::default()
        };
        let nameless = UiElement::default();
        for screen in [vec![every_flag, bare, nameless], Vec::new()] {
            let (by_loop, by_filter) = both(&screen);
            assert_eq!(by_filter, by_loop);
        }
    }
}
