//! The device's state (`droidmesh.v1.UiState`) as prompts show it: one conversion for every
//! agent that reads the screen, so the elements a model reads agree across agents.
use droidmesh_proto::v1 as pb;
use minijinja::Value;

use super::{PhoneState, Screen, UiElement};

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
pub fn screen(state: &pb::UiState, max_elements: usize) -> (Screen, PhoneState) {
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
/// every screen an agent is shown. A [`Screen`] is read in place; any other list (one a
/// template made) element by element through its fields.
pub(super) fn ui_lines(elements: &Value) -> Result<String, minijinja::Error> {
    let mut out = String::new();
    if let Some(screen) = elements.downcast_object_ref::<Screen>() {
        for el in screen.elements() {
            write_line(&mut out, el);
        }
    } else {
        for el in elements.try_iter()? {
            write_line(&mut out, &element_of(&el));
        }
    }
    if out.is_empty() {
        out.push_str("(no elements: the screen may be loading, locked or showing only an image)\n");
    }
    Ok(out)
}

/// An element given as a template value: its fields by name, a missing one at its default.
fn element_of(el: &Value) -> UiElement {
    let attr = |name: &str| el.get_attr(name).unwrap_or_default();
    let text = |name: &str| attr(name).as_str().unwrap_or_default().to_owned();
    let number = |name: &str| u32::try_from(attr(name)).unwrap_or_default();
    let flag = |name: &str| attr(name).is_true();
    let bounds = attr("bounds");
    let corner = |i: usize| {
        i32::try_from(bounds.get_item_by_index(i).unwrap_or_default()).unwrap_or_default()
    };
    UiElement {
        index: number("index"),
        depth: number("depth"),
        class_name: text("class_name"),
        text: text("text"),
        content_desc: text("content_desc"),
        resource_id: text("resource_id"),
        bounds: [corner(0), corner(1), corner(2), corner(3)],
        clickable: flag("clickable"),
        long_clickable: flag("long_clickable"),
        checkable: flag("checkable"),
        checked: flag("checked"),
        editable: flag("editable"),
        focused: flag("focused"),
        scrollable: flag("scrollable"),
        selected: flag("selected"),
        disabled: flag("disabled"),
        password: flag("password"),
    }
}

/// One element's line (see [`ui_lines`]).
fn write_line(out: &mut String, el: &UiElement) {
    use std::fmt::Write as _;
    for _ in 0..el.depth.min(64) {
        out.push_str("  ");
    }
    let _ = write!(
        out,
        "[{}] {}",
        el.index,
        el.class_name.rsplit('.').next().unwrap_or_default()
    );
    if !el.text.is_empty() {
        out.push(' ');
        out.push_str(&super::quote(&el.text));
    }
    if !el.content_desc.is_empty() {
        out.push_str(" desc=");
        out.push_str(&super::quote(&el.content_desc));
    }
    if !el.resource_id.is_empty() {
        out.push_str(" id=");
        out.push_str(el.resource_id.rsplit('/').next().unwrap_or_default());
    }
    let [left, top, right, bottom] = el.bounds;
    let _ = write!(out, " [{left},{top}][{right},{bottom}]");
    for (on, shown) in [
        (el.clickable, " clickable"),
        (el.long_clickable, " long-clickable"),
    ] {
        if on {
            out.push_str(shown);
        }
    }
    if el.checkable {
        out.push_str(if el.checked { " checked" } else { " unchecked" });
    }
    for (on, shown) in [
        (el.editable, " editable"),
        (el.password, " password"),
        (el.focused, " focused"),
        (el.scrollable, " scrollable"),
        (el.selected, " selected"),
        (el.disabled, " disabled"),
    ] {
        if on {
            out.push_str(shown);
        }
    }
    out.push('\n');
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

    /// The loop's lines and the filter's, for `elements` given to the template as a list of
    /// values (as a template might make one) and as a [`Screen`] (as the contexts give it).
    fn both(elements: &[UiElement]) -> [(String, String); 2] {
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
        let lines = |value: Value| {
            let ctx = minijinja::context! { elements => value.clone() };
            let by_loop = env.get_template("loop").unwrap().render(&ctx).unwrap();
            (by_loop, ui_lines(&value).unwrap())
        };
        let screen = Screen::from(elements.to_vec());
        let as_context = Value::from(minijinja::value::Serde(&screen));
        assert!(as_context.downcast_object_ref::<Screen>().is_some());
        [
            lines(Value::from(minijinja::value::Serde(elements))),
            lines(as_context),
        ]
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
            let [(by_loop, by_filter), (screen_loop, screen_filter)] = both(&screen);
            assert_eq!(by_filter, by_loop);
            assert_eq!(screen_loop, by_loop);
            assert_eq!(screen_filter, by_loop);
        }
    }
}
