//! Devices reached directly over ADB-over-TCP, without an adb server.
use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{
    ConnectDeviceRequest, ListDevicesRequest, StartAppRequest, Transport, start_app_request,
};
use tonic::Code;

use super::common::*;
use super::sims::*;

#[tokio::test(flavor = "multi_thread")]
async fn direct_tcp_device_configured_and_connected() {
    let Some(_) = shared() else { return };
    let fleet = start_fleet(2).await;
    let addrs = fleet.addrs();
    let mut client = serve(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![addrs[0].to_string()],
        command_timeout_ms: 3_000,
        ..DeviceConfig::default()
    })
    .await;

    // The configured device is listed; the other is attached through ConnectDevice.
    let info = client
        .connect_device(ConnectDeviceRequest {
            address: addrs[1].to_string(),
            transport: Transport::TcpDirect as i32,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.serial, addrs[1].to_string());
    assert_eq!(info.transport, Transport::TcpDirect as i32);
    let devices = client
        .list_devices(ListDevicesRequest {})
        .await
        .unwrap()
        .into_inner()
        .devices;
    assert_eq!(devices.len(), 2, "{devices:?}");
    assert!(
        devices
            .iter()
            .all(|d| d.transport == Transport::TcpDirect as i32)
    );

    let serial = addrs[0].to_string();
    let lease = acquire(&mut client, &serial, "direct-test").await;
    client
        .start_app(StartAppRequest {
            lease: lref(&lease),
            app: Some(start_app_request::App::Package(
                "com.android.settings".into(),
            )),
            activity: String::new(),
        })
        .await
        .unwrap();
    let st = state(&mut client, &serial).await;
    assert_eq!(st.phone.as_ref().unwrap().package, "com.android.settings");
    assert!(
        find(&st, |e| e.text == "Wi-Fi").is_some(),
        "{:?}",
        texts(&st)
    );

    // A bad address fails cleanly.
    let err = client
        .connect_device(ConnectDeviceRequest {
            address: "not-an-address".into(),
            transport: Transport::TcpDirect as i32,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    fleet.shutdown().await;
}
