//! The device side of an edit: channels to the device services this text manipulator is
//! configured with (its default and `text_manipulator.device_endpoints`; a request naming
//! another is refused), cached per endpoint and bounded (the agents' shared
//! `droidmesh_runtime::device::DeviceClients`); finding the focused text field,
//! typing the new text and reading it back.
use std::time::Duration;

use droidmesh_proto::v1::{
    ActionResult, GetStateRequest, LeaseRef, TypeTextRequest, UiElement, UiState,
};
pub use droidmesh_runtime::device::DeviceClient;
use droidmesh_runtime::device::{DeviceClients, DialError};

use crate::config::DEVICE_ENDPOINTS;
use crate::error::TextManipulatorError;

/// Device service endpoints kept connected at once; the least recently used is dropped first.
pub const CHANNEL_CACHE: usize = 16;

/// Channels to device services, one per endpoint, reused across calls (the agents' shared
/// [`DeviceClients`]).
pub struct Devices(DeviceClients);

impl Devices {
    /// Channels to `default` and the `more` a request may name (an entry that is not an
    /// endpoint is refused, named).
    pub fn new(default: &str, more: &[String], timeout: Duration) -> Result<Self, String> {
        DeviceClients::new(default, more, DEVICE_ENDPOINTS, timeout, CHANNEL_CACHE).map(Self)
    }

    /// The endpoint a binding names (the default when it names none), as configured, and a
    /// client for it; an endpoint this text manipulator is not configured with is refused.
    pub fn client(&self, endpoint: &str) -> Result<(String, DeviceClient), TextManipulatorError> {
        // Channels connect lazily: this makes no network call.
        let link = self
            .0
            .link(endpoint)
            .map_err(|e| TextManipulatorError::BadEndpoint {
                endpoint: match &e {
                    DialError::Channel { endpoint, .. } => endpoint.clone(),
                    _ => endpoint.trim().to_owned(),
                },
                reason: e.to_string(),
            })?;
        Ok((link.endpoint().to_owned(), link.client()))
    }

    /// How many endpoints have a channel now.
    pub fn cached(&self) -> usize {
        self.0.cached()
    }
}

/// Reads the device's screen (no screenshot).
pub async fn read_state(
    client: &mut DeviceClient,
    endpoint: &str,
    serial: &str,
) -> Result<UiState, TextManipulatorError> {
    let request = GetStateRequest {
        serial: serial.to_owned(),
        include_screenshot: false,
        screenshot_max_side: 0,
        masks: Vec::new(),
    };
    client
        .get_state(request)
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| match s.code() {
            tonic::Code::NotFound => TextManipulatorError::UnknownDevice {
                serial: serial.to_owned(),
                endpoint: endpoint.to_owned(),
                message: s.message().to_owned(),
            },
            code => TextManipulatorError::DeviceUnreadable {
                serial: serial.to_owned(),
                endpoint: endpoint.to_owned(),
                message: format!("{code:?}: {}", s.message()),
            },
        })
}

/// The focused text field: the element the phone names as focused when it is editable,
/// otherwise the first focused editable element.
pub fn focused_field(state: &UiState) -> Option<&UiElement> {
    let named = state
        .phone
        .as_ref()
        .and_then(|p| p.focused_index)
        .and_then(|i| state.elements.iter().find(|e| e.index == i))
        .filter(|e| e.editable);
    named.or_else(|| state.elements.iter().find(|e| e.focused && e.editable))
}

/// Clears the field at `index` and types `text` into it, under `lease`. An RPC error and a
/// failed `ActionResult` are both an error message.
pub async fn type_into(
    client: &mut DeviceClient,
    lease: &LeaseRef,
    index: u32,
    text: &str,
) -> Result<ActionResult, String> {
    let request = TypeTextRequest {
        lease: Some(lease.clone()),
        text: text.to_owned(),
        index: Some(index),
        clear: true,
        sensitive: false,
    };
    match client.type_text(request).await {
        Ok(r) => {
            let r = r.into_inner();
            if r.success {
                Ok(r)
            } else {
                Err(r
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("the device reported: {}", r.action_taken)))
            }
        }
        Err(s) => Err(format!("{:?}: {}", s.code(), s.message())),
    }
}

/// How the field's text after typing compares with what was typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The field holds exactly the text.
    Holds,
    /// The text was empty and the field shows something (likely its hint): not provable.
    Unverified(String),
    /// The field holds something else.
    Differs(String),
}

/// Compares the text of the field typed into (the focused field, else the element at `index`)
/// with `expected`.
pub fn check_field(state: &UiState, index: u32, expected: &str) -> Check {
    let field = focused_field(state).or_else(|| state.elements.iter().find(|e| e.index == index));
    let actual = field.map(|e| e.text.clone()).unwrap_or_default();
    if actual == expected {
        Check::Holds
    } else if expected.is_empty() {
        Check::Unverified(actual)
    } else {
        Check::Differs(actual)
    }
}

/// Says where two texts part, briefly: lengths, the first differing character and a few
/// characters of each from there.
pub fn describe_difference(actual: &str, expected: &str) -> String {
    let at = actual
        .chars()
        .zip(expected.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let excerpt = |s: &str| s.chars().skip(at).take(24).collect::<String>();
    format!(
        "after typing, the field holds {} characters where {} were expected; from character {at} it reads {:?} instead of {:?}",
        actual.chars().count(),
        expected.chars().count(),
        excerpt(actual),
        excerpt(expected),
    )
}

#[cfg(test)]
mod tests {
    use droidmesh_proto::v1::PhoneState;

    use super::*;

    fn element(index: u32, text: &str, editable: bool, focused: bool) -> UiElement {
        UiElement {
            index,
            text: text.into(),
            editable,
            focused,
            ..UiElement::default()
        }
    }

    #[test]
    fn the_focused_field_must_be_editable() {
        let mut state = UiState {
            elements: vec![
                element(0, "Save", false, true),
                element(1, "note", true, false),
            ],
            phone: Some(PhoneState {
                focused_index: Some(0),
                ..PhoneState::default()
            }),
            ..UiState::default()
        };
        assert!(
            focused_field(&state).is_none(),
            "a focused button is no field"
        );
        state.elements[1].focused = true;
        assert_eq!(focused_field(&state).map(|e| e.index), Some(1));
        state.phone = Some(PhoneState {
            focused_index: Some(1),
            ..PhoneState::default()
        });
        state.elements[1].focused = false;
        assert_eq!(focused_field(&state).map(|e| e.index), Some(1));
    }

    #[test]
    fn a_difference_is_described_from_where_it_starts() {
        assert_eq!(
            describe_difference("- milk\n- egg", "- milk\n- eggs"),
            "after typing, the field holds 12 characters where 13 were expected; from character 12 it reads \"\" instead of \"s\""
        );
        let state = UiState {
            elements: vec![element(3, "Write a note", true, true)],
            ..UiState::default()
        };
        assert_eq!(
            check_field(&state, 3, ""),
            Check::Unverified("Write a note".into())
        );
        assert_eq!(check_field(&state, 3, "Write a note"), Check::Holds);
        assert_eq!(
            check_field(&state, 3, "x"),
            Check::Differs("Write a note".into())
        );
    }

    #[tokio::test]
    async fn channels_are_reused_per_endpoint_and_bounded() {
        let more: Vec<String> = (2..40).map(|p| format!("http://127.0.0.1:{p}")).collect();
        let devices = Devices::new("http://127.0.0.1:1", &more, Duration::from_secs(1)).unwrap();
        let (first, _) = devices.client("").unwrap();
        assert_eq!(first, "http://127.0.0.1:1");
        devices.client(" HTTP://127.0.0.1:1/ ").unwrap();
        assert_eq!(devices.cached(), 1);
        for endpoint in &more {
            devices.client(endpoint).unwrap();
        }
        assert_eq!(devices.cached(), CHANNEL_CACHE);
        for refused in ["not a url", "http://127.0.0.1:40"] {
            assert!(matches!(
                devices.client(refused),
                Err(TextManipulatorError::BadEndpoint { .. })
            ));
        }
        let bad = Devices::new("http://127.0.0.1:1", &["ftp://x:1".into()], Duration::ZERO);
        assert!(bad.is_err());
    }
}
