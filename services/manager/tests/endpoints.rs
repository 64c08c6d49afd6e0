//! The device service endpoints a manager reads from: its own and those in
//! `manager.device_endpoints`, however a request spells them; a request naming another is
//! refused before any connection is made (a loopback listener there sees none).
use std::time::Duration;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_manager::ManagerConfig;
use tokio::net::TcpListener;
use tonic::Code;

use crate::plan::{Rig, rig, rig_with};

/// How long a listener at a refused address is watched for a late connection. The manager
/// never dials it, so the outcome does not depend on this.
const WATCH: Duration = Duration::from_millis(700);

/// A plan naming `endpoint` for the rig's device.
async fn plan_at(rig: &Rig, endpoint: &str) -> Result<(), tonic::Status> {
    let mut r = rig.request("Turn Wi-Fi on");
    r.device.as_mut().unwrap().endpoint = endpoint.into();
    rig.plan(r).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_endpoint_outside_the_allow_list_is_refused_unreached() {
    let rig = rig(&[]).await;
    let outside = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = outside.local_addr().unwrap();
    let endpoint = format!("http://{at}");
    let answer = tokio::select! {
        _ = outside.accept() => panic!("the manager connected to {at}, outside its allow-list"),
        answer = plan_at(&rig, &endpoint) => answer,
    };
    let late = tokio::time::timeout(WATCH, outside.accept()).await;
    assert!(
        late.is_err(),
        "the manager connected to {at}, outside its allow-list"
    );
    let status = answer.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains(&format!("'{endpoint}'"))
            && status.message().contains("manager.device_endpoints"),
        "the refusal names neither the endpoint nor the setting: {}",
        status.message()
    );
    assert_eq!(
        rig.llm.request_count(),
        0,
        "a refused plan reached the model"
    );
}

/// The manager's own device service spelled otherwise, and a second one listed in
/// `manager.device_endpoints`, are both read.
#[tokio::test(flavor = "multi_thread")]
async fn the_configured_device_services_are_read_however_spelled() {
    let second = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second_ep = format!("http://{}", second.local_addr().unwrap());
    let cfg = ManagerConfig {
        device_endpoints: vec![second_ep.clone()],
        ..ManagerConfig::default()
    };
    let done = "<thought>Done.</thought>\n<request_accomplished success=\"true\">Done.</request_accomplished>";
    let rig = rig_with(&[done, done], cfg).await;
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
    let own = format!("{}/", rig.device_ep.replacen("http://", "HTTP://", 1));
    for (i, endpoint) in [own, second_ep.to_uppercase()].iter().enumerate() {
        plan_at(&rig, endpoint)
            .await
            .unwrap_or_else(|s| panic!("a plan through {endpoint}: {s:?}"));
        let prompt = rig.prompt(i);
        assert!(prompt.contains("- app: com.android.launcher3"), "{prompt}");
    }
}
