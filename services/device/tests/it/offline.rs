//! Behaviour that needs no adb and no simulator: a configured direct device that is not
//! listening, unknown serials, and lease refusals over gRPC.
use std::time::{Duration, Instant};

use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{
    GetStateRequest, ListDevicesRequest, Point, TapRequest, Transport, tap_request,
};
use tonic::Code;

use super::common::*;

fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_device_that_does_not_answer_is_unavailable_fast() {
    let dead = closed_port();
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 2_000,
        ..direct_config(&dead)
    })
    .await;
    let devices = devices(&mut client).await;
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].serial, dead);
    assert_eq!(devices[0].transport, Transport::TcpDirect as i32);

    let lease = acquire(&mut client, &dead, "offline-test").await;
    assert_eq!(lease.serial, dead);
    let started = Instant::now();
    let err = client
        .get_state(GetStateRequest {
            serial: dead.clone(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains(&dead), "{}", err.message());
    let err = client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Point(Point { x: 1, y: 1 })),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let err = client
        .get_state(GetStateRequest {
            serial: "ghost".into(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("ghost"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_absent_adb_server_is_unavailable_and_named() {
    let mut client = serve(DeviceConfig {
        adb_server: closed_port(),
        command_timeout_ms: 2_000,
        ..DeviceConfig::default()
    })
    .await;
    let err = client
        .list_devices(ListDevicesRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.message().contains("adb server"), "{}", err.message());
}

#[test]
fn invalid_config_is_refused_before_serving() {
    let err = droidmesh_device::device_service(DeviceConfig {
        command_timeout_ms: 0,
        ..DeviceConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("command_timeout_ms"), "{err}");
}
