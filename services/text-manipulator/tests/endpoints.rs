//! The device service endpoints a text manipulator reads and types through: its own and those
//! in `text_manipulator.device_endpoints`, however a request spells them; a request naming
//! another is refused before any connection is made (a loopback listener there sees none).
use std::time::Duration;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{AcquireLeaseRequest, DeviceBinding, GetStateRequest, LeaseRef};
use droidmesh_text_manipulator::TextManipulatorConfig;
use tokio::net::TcpListener;
use tonic::Code;

use crate::rig::*;

/// How long a listener at a refused address is watched for a late connection. The text
/// manipulator never dials it, so the outcome does not depend on this.
const WATCH: Duration = Duration::from_millis(700);

#[tokio::test(flavor = "multi_thread")]
async fn a_device_endpoint_outside_the_allow_list_is_refused_unreached() {
    let rig = rig(vec![program("input_text(ORIGINAL + '!')")]).await;
    let outside = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = outside.local_addr().unwrap();
    let endpoint = format!("http://{at}");
    let mut request = rig.request("Add an exclamation mark", true);
    request.device.as_mut().unwrap().endpoint = endpoint.clone();
    let mut client = rig.client.clone();
    let answer = tokio::select! {
        _ = outside.accept() => panic!("the text manipulator connected to {at}, outside its allow-list"),
        answer = client.manipulate(request) => answer,
    };
    let late = tokio::time::timeout(WATCH, outside.accept()).await;
    assert!(
        late.is_err(),
        "the text manipulator connected to {at}, outside its allow-list"
    );
    let status = answer.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains(&format!("'{endpoint}'"))
            && status
                .message()
                .contains("text_manipulator.device_endpoints"),
        "the refusal names neither the endpoint nor the setting: {}",
        status.message()
    );
    assert_eq!(
        rig.llm.request_count(),
        0,
        "a refused edit reached the model"
    );
}

/// A second device service listed in `text_manipulator.device_endpoints`, named in another
/// spelling, is read and typed through.
#[tokio::test(flavor = "multi_thread")]
async fn a_device_service_on_the_allow_list_is_used() {
    let second = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second_ep = format!("http://{}", second.local_addr().unwrap());
    let cfg = TextManipulatorConfig {
        sandbox_timeout_ms: 300,
        device_endpoints: vec![second_ep.clone()],
        ..TextManipulatorConfig::default()
    };
    let rig = rig_with(vec![program("input_text(ORIGINAL + '!')")], cfg).await;
    let device = device_service(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![rig.serial.clone()],
        ..DeviceConfig::default()
    })
    .unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(device)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(second)),
    );
    rig.open(NOTES).await;
    rig.type_into("note_input", "milk", false).await;
    // The second device service keeps leases of its own.
    let mut through_second = DeviceServiceClient::connect(second_ep.clone())
        .await
        .unwrap();
    let lease = through_second
        .acquire_lease(AcquireLeaseRequest {
            serial: rig.serial.clone(),
            holder: "second".into(),
            ttl_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut request = rig.request("Add an exclamation mark", true);
    request.device = Some(DeviceBinding {
        endpoint: format!("{}/", second_ep.to_uppercase()),
        lease: Some(LeaseRef {
            serial: rig.serial.clone(),
            lease_id: lease.lease_id,
        }),
    });
    let response = rig.manipulate(request).await;
    assert!(result(&response).success, "{response:?}");
    // Read back through the second device service (the rig's own keeps its last look).
    let state = through_second
        .get_state(GetStateRequest {
            serial: rig.serial.clone(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let field = state
        .elements
        .iter()
        .find(|e| e.resource_id.ends_with("note_input"));
    assert_eq!(field.map(|e| e.text.as_str()), Some("milk!"), "{state:?}");
}
