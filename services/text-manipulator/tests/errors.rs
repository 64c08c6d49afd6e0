//! Requests that cannot be served are RPC errors with a code a caller can act on.
use droidmesh_llm::testkit::MockResponse;
use droidmesh_proto::v1::{DeviceBinding, LeaseRef};
use droidmesh_text_manipulator::TextManipulatorConfig;
use tonic::Code;

use crate::rig::*;

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_invalid_arguments() {
    let rig = rig(vec![]).await;
    let mut client = rig.client.clone();
    let err = client
        .manipulate(rig.request("  ", false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("subgoal is empty"),
        "{}",
        err.message()
    );

    let mut request = rig.request("Add a title", true);
    request.device = Some(DeviceBinding {
        endpoint: rig.device_ep.clone(),
        lease: Some(LeaseRef {
            serial: rig.serial.clone(),
            lease_id: String::new(),
        }),
    });
    let err = client.manipulate(request).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("apply needs device.lease"),
        "{}",
        err.message()
    );

    let mut request = rig.request("Add a title", false);
    request.max_retries = 11;
    let err = client.manipulate(request).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(rig.llm.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_key_is_a_failed_precondition_naming_the_model() {
    let rig = rig(vec![]).await;
    rig.llm
        .set_fallback(MockResponse::error(401, "invalid api key"));
    let mut request = rig.request("Add a title", false);
    request.original = Some("text".into());
    let err = rig.client.clone().manipulate(request).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("mock/scripted-model") && err.message().contains("invalid api key"),
        "{}",
        err.message()
    );
    assert_eq!(rig.llm.request_count(), 1, "a refused key is not retried");

    // An override naming a provider that is not configured is the caller's mistake, refused
    // before any call.
    let mut request = rig.request("Add a title", false);
    request.original = Some("text".into());
    request.llm = Some(droidmesh_proto::v1::LlmOverride {
        provider: "nowhere".into(),
        ..Default::default()
    });
    let err = rig.client.clone().manipulate(request).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("nowhere"), "{}", err.message());
    assert_eq!(rig.llm.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_that_cannot_be_read_is_unavailable_and_an_unknown_one_not_found() {
    // A device service that is not there, listed so the text manipulator may call it.
    let cfg = TextManipulatorConfig {
        sandbox_timeout_ms: 300,
        device_endpoints: vec!["http://127.0.0.1:1".into()],
        ..TextManipulatorConfig::default()
    };
    let rig = rig_with(vec![], cfg).await;
    let mut request = rig.request("Add a title", false);
    request.device = Some(DeviceBinding {
        endpoint: "http://127.0.0.1:1".into(),
        lease: Some(LeaseRef {
            serial: "phone-7".into(),
            lease_id: String::new(),
        }),
    });
    let err = rig.client.clone().manipulate(request).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(
        err.message().contains("phone-7") && err.message().contains("127.0.0.1:1"),
        "{}",
        err.message()
    );

    // An unknown serial on a live device service: the caller named a device that is not there.
    let mut request = rig.request("Add a title", false);
    request.device = Some(DeviceBinding {
        endpoint: String::new(),
        lease: Some(LeaseRef {
            serial: "no-such-phone".into(),
            lease_id: String::new(),
        }),
    });
    let err = rig.client.clone().manipulate(request).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("no-such-phone"), "{}", err.message());
    assert_eq!(rig.llm.request_count(), 0);
}
