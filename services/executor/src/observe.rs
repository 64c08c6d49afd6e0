//! Reading the device for a prompt, shared by CodeAct and `ExecuteSubgoal`: one `GetState`
//! (with a screenshot when asked) turned into the elements and phone state prompts show.
use droidmesh_agent::prompts::{PhoneState, Screen};
use droidmesh_proto::v1::{GetStateRequest, Screenshot, SecretMask, UiState};

use droidmesh_runtime::device::DeviceLink;

/// The device as one prompt sees it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The screen's elements, as the prompt lists them and CodeAct's `ui_state` holds them.
    pub elements: Screen,
    /// The foreground app, keyboard and focus.
    pub phone: PhoneState,
    /// The screenshot, when one was asked for and the device gave one.
    pub screenshot: Option<Screenshot>,
    /// Why the screenshot asked for was withheld (a typed secret shows where masking cannot
    /// be sure), or empty.
    pub withheld: String,
}

/// Reads the device's state; `screenshot` asks for a PNG no larger than `max_side`; `masks`
/// are the task's secrets, masked in the answer. A failure is said in words for the model and
/// the user ([`DeviceLink::describe`]).
pub async fn observe(
    device: &DeviceLink,
    serial: &str,
    screenshot: bool,
    max_side: u32,
    masks: Vec<SecretMask>,
) -> Result<Observed, String> {
    let request = GetStateRequest {
        serial: serial.to_owned(),
        include_screenshot: screenshot,
        screenshot_max_side: max_side,
        masks,
    };
    let state = match device.client().get_state(request).await {
        Ok(r) => r.into_inner(),
        Err(s) => return Err(device.describe(&s).await),
    };
    let (elements, phone) = prompt_state(&state);
    Ok(Observed {
        elements,
        phone,
        screenshot: state.screenshot,
        withheld: state.screenshot_withheld,
    })
}

/// The device state as the prompt and the sandbox's `ui_state` show it (every element).
pub fn prompt_state(state: &UiState) -> (Screen, PhoneState) {
    droidmesh_agent::prompts::screen(state, usize::MAX)
}
