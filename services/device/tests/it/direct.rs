//! Devices reached directly over ADB-over-TCP, without an adb server.
use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{
    ConnectDeviceRequest, TapRequest, Transport, TypeTextRequest, tap_request,
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
        command_timeout_ms: 3_000,
        allow_connect: true,
        ..direct_config(&addrs[0].to_string())
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
    let devices = devices(&mut client).await;
    assert_eq!(devices.len(), 2, "{devices:?}");
    assert!(
        devices
            .iter()
            .all(|d| d.transport == Transport::TcpDirect as i32)
    );
    // Model and product come from the device itself, in `adb devices -l` form, for the
    // configured device and the connected one alike.
    for d in &devices {
        assert_eq!(
            (d.model.as_str(), d.product.as_str()),
            ("DroidMesh_Sim", "droidmesh_sim"),
            "{d:?}"
        );
    }

    let serial = addrs[0].to_string();
    let lease = acquire(&mut client, &serial, "direct-test").await;
    start_app(&mut client, &lease, "com.android.settings").await;
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

#[tokio::test(flavor = "multi_thread")]
async fn multi_line_text_with_quotes_and_percent_signs_arrives_as_written() {
    let fleet = start_fleet(1).await;
    let serial = fleet.addrs()[0].to_string();
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 3_000,
        ..direct_config(&serial)
    })
    .await;
    let lease = acquire(&mut client, &serial, "multi-line-test").await;
    start_app(&mut client, &lease, "com.droidmesh.notes").await;
    let st = state(&mut client, &serial).await;
    let input = find(&st, |e| e.resource_id.ends_with("note_input")).unwrap();
    let index = input.index;
    let typed = |text: &str, clear: bool| TypeTextRequest {
        lease: lref(&lease),
        text: text.into(),
        index: Some(index),
        clear,
        sensitive: false,
    };
    client.type_text(typed("old text", false)).await.unwrap();
    let text = "- milk\n- \"eggs\", it's 100%sure & 5%%s\n\n- bread\n";
    let result = client
        .type_text(typed(text, true))
        .await
        .unwrap()
        .into_inner();
    assert!(result.success, "{result:?}");

    let st = state(&mut client, &serial).await;
    let field = find(&st, |e| e.index == index).unwrap();
    assert_eq!(field.text, text, "the field as the device reads it");
    let save = find(&st, |e| e.resource_id.ends_with("save")).unwrap();
    client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Index(save.index)),
        })
        .await
        .unwrap();
    let saved = fleet.devices()[0].shell("cat /sdcard/Notes/note.txt");
    assert_eq!(String::from_utf8_lossy(&saved.stdout), text);
    fleet.shutdown().await;
}
