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
