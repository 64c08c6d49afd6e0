//! Reading the device for a prompt, shared by CodeAct and `ExecuteSubgoal`: one `GetState`
//! (with a screenshot when asked) turned into the elements and phone state prompts show.
use droidmesh_agent::prompts::{PhoneState, UiElement};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{GetStateRequest, Screenshot, UiState};
use droidmesh_runtime::TracedChannel;
use tonic::Status;

/// The device as one prompt sees it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The screen's elements, as the prompt lists them and CodeAct's `ui_state` holds them.
    pub elements: Vec<UiElement>,
    /// The foreground app, keyboard and focus.
    pub phone: PhoneState,
    /// The screenshot, when one was asked for and the device gave one.
    pub screenshot: Option<Screenshot>,
}

/// Reads the device's state; `screenshot` asks for a PNG no larger than `max_side`.
pub async fn observe(
    device: &mut DeviceServiceClient<TracedChannel>,
    serial: &str,
    screenshot: bool,
    max_side: u32,
) -> Result<Observed, Status> {
    let state = device
        .get_state(GetStateRequest {
            serial: serial.to_owned(),
            include_screenshot: screenshot,
            screenshot_max_side: max_side,
        })
        .await?
        .into_inner();
    let (elements, phone) = prompt_state(&state);
    Ok(Observed {
        elements,
        phone,
        screenshot: state.screenshot,
    })
}

/// The device state as the prompt and the sandbox's `ui_state` show it (every element).
pub fn prompt_state(state: &UiState) -> (Vec<UiElement>, PhoneState) {
    droidmesh_agent::prompts::screen(state, usize::MAX)
}
