//! `droidmesh state` and `droidmesh devices`: what the device service sees, printed as the
//! agents see it.
use anyhow::Result;
use droidmesh_proto::v1::ListDevicesRequest;
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_runtime::ClientOptions;
use std::path::PathBuf;
use std::time::Duration;

use crate::output::say;

#[derive(Debug, clap::Args)]
pub struct StateArgs {
    serial: String,
    /// Device service endpoint; defaults to the config's `endpoints.device`, else its
    /// `[listen] device` port on this machine.
    #[arg(long)]
    endpoint: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Device service endpoint; defaults to the config's `endpoints.device`, else its
    /// `[listen] device` port on this machine.
    #[arg(long)]
    endpoint: Option<String>,
}

/// Prints a device's screen: indexed elements and phone state.
pub async fn state(config: Option<PathBuf>, args: StateArgs) -> Result<()> {
    let StateArgs { serial, endpoint } = args;
    let config = super::load(config)?;
    let endpoint = endpoint.unwrap_or(config.endpoints.device);
    let mut client = device_client(endpoint.clone())?;
    let state = client
        .get_state(droidmesh_proto::v1::GetStateRequest {
            serial: serial.clone(),
            include_screenshot: false,
            screenshot_max_side: 0,
            masks: Vec::new(),
        })
        .await
        .map_err(|s| call_failed(&endpoint, s, &format!("cannot read the state of {serial}")))?
        .into_inner();
    print_state(&state);
    Ok(())
}

/// Lists the devices the device service sees, with their leases.
pub async fn devices(config: Option<PathBuf>, args: DevicesArgs) -> Result<()> {
    let config = super::load(config)?;
    let endpoint = args.endpoint.unwrap_or(config.endpoints.device);
    let mut client = device_client(endpoint.clone())?;
    let devices = client
        .list_devices(ListDevicesRequest {})
        .await
        .map_err(|s| call_failed(&endpoint, s, &format!("cannot list devices at {endpoint}")))?
        .into_inner()
        .devices;
    if devices.is_empty() {
        say!("no devices");
    }
    for d in devices {
        let lease = d
            .lease
            .map(|l| format!("  leased by {}", l.holder))
            .unwrap_or_default();
        say!(
            "{:<24} {:<10} {:<16} {}{}",
            d.serial,
            d.state,
            d.model,
            d.product,
            lease
        );
    }
    Ok(())
}

/// A failed call as the user reads it: no device service where the command looked, in words,
/// or the service's answer after what the command was doing (`doing`).
fn call_failed(endpoint: &str, status: tonic::Status, doing: &str) -> anyhow::Error {
    crate::reach::transport_error(
        "device service",
        endpoint,
        &status,
        "start one with `droidmesh serve device` or `droidmesh up`, or check --endpoint and the \
         config's [listen] device and endpoints.device",
    )
    .unwrap_or_else(|| anyhow::anyhow!("{doing}: {}", status.message()))
}

fn device_client(
    endpoint: String,
) -> Result<DeviceServiceClient<droidmesh_runtime::TracedChannel>> {
    let opts = ClientOptions {
        request_timeout: Some(Duration::from_secs(15)),
        ..ClientOptions::default()
    };
    Ok(DeviceServiceClient::new(droidmesh_runtime::connect(
        &endpoint, &opts,
    )?))
}

fn print_state(state: &droidmesh_proto::v1::UiState) {
    if let Some(p) = &state.phone {
        say!(
            "{}  app {}  activity {}  keyboard {}",
            state.serial,
            p.package,
            p.activity,
            if p.keyboard_shown { "shown" } else { "hidden" }
        );
    }
    for e in &state.elements {
        let class = e.class_name.rsplit('.').next().unwrap_or(&e.class_name);
        let label = if e.text.is_empty() {
            &e.content_desc
        } else {
            &e.text
        };
        let b = e.bounds.unwrap_or_default();
        let mut flags = Vec::new();
        for (on, name) in [
            (e.clickable, "clickable"),
            (e.checkable && e.checked, "checked"),
            (e.editable, "editable"),
            (e.focused, "focused"),
            (e.scrollable, "scrollable"),
        ] {
            if on {
                flags.push(name);
            }
        }
        say!(
            "{:>3}  {:<14} {:<36} [{},{}][{},{}] {}",
            e.index,
            class,
            format!("{label:?}"),
            b.left,
            b.top,
            b.right,
            b.bottom,
            flags.join(" ")
        );
    }
}
