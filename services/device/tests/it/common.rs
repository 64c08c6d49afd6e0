//! Shared helpers: a fresh device service + gRPC client per test, and state lookups.
#![allow(dead_code)]
use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, ActionResult, DeviceInfo, GetStateRequest, Lease, LeaseRef,
    ListDevicesRequest, Point, StartAppRequest, TapRequest, UiElement, UiState, start_app_request,
    tap_request,
};
use tonic::transport::Channel;

pub type Client = DeviceServiceClient<Channel>;

/// Starts a device service with `cfg` on 127.0.0.1:0 and returns a connected client.
pub async fn serve(cfg: DeviceConfig) -> Client {
    let svc = device_service(cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            )
            .await
            .unwrap();
    });
    DeviceServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// The devices the service lists.
pub async fn devices(client: &mut Client) -> Vec<DeviceInfo> {
    client
        .list_devices(ListDevicesRequest {})
        .await
        .unwrap()
        .into_inner()
        .devices
}

/// Leases `serial` for `holder`.
pub async fn acquire(client: &mut Client, serial: &str, holder: &str) -> Lease {
    client
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.into(),
            holder: holder.into(),
            ttl_ms: 0,
        })
        .await
        .unwrap()
        .into_inner()
}

pub fn lref(lease: &Lease) -> Option<LeaseRef> {
    Some(LeaseRef {
        serial: lease.serial.clone(),
        lease_id: lease.lease_id.clone(),
    })
}

pub async fn state(client: &mut Client, serial: &str) -> UiState {
    client
        .get_state(GetStateRequest {
            serial: serial.into(),
            include_screenshot: false,
            screenshot_max_side: 0,
            masks: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner()
}

pub fn find(state: &UiState, pred: impl Fn(&UiElement) -> bool) -> Option<&UiElement> {
    state.elements.iter().find(|e| pred(e))
}

pub fn texts(state: &UiState) -> Vec<String> {
    state
        .elements
        .iter()
        .filter(|e| !e.text.is_empty())
        .map(|e| e.text.clone())
        .collect()
}

/// A config reaching `serial` straight at its port (no adb server).
pub fn direct_config(serial: &str) -> DeviceConfig {
    DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![serial.to_owned()],
        ..DeviceConfig::default()
    }
}

/// Starts `package` (its launcher activity) under `lease`.
pub async fn start_app(client: &mut Client, lease: &Lease, package: &str) -> ActionResult {
    client
        .start_app(StartAppRequest {
            lease: lref(lease),
            app: Some(start_app_request::App::Package(package.into())),
            activity: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
}

/// Taps `point` under `lease`.
pub async fn tap_at(client: &mut Client, lease: &Lease, point: Point) -> ActionResult {
    client
        .tap(TapRequest {
            lease: lref(lease),
            target: Some(tap_request::Target::Point(point)),
        })
        .await
        .unwrap()
        .into_inner()
}
