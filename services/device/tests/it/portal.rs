//! The companion accessibility service as the UI source: a phone that has it is read through
//! it (the state says so), one without it through uiautomator, and a phone whose companion
//! stops answering is still read.
use droidmesh_device::DeviceConfig;

use super::common::*;

async fn phone(portal: bool) -> droidmesh_sim::SimFleet {
    droidmesh_sim::start(droidmesh_sim::SimOptions {
        base_port: 0,
        portal,
        ..droidmesh_sim::SimOptions::default()
    })
    .await
    .unwrap()
}

async fn settings_state(portal: bool, pref: &str) -> (String, Vec<String>) {
    let fleet = phone(portal).await;
    let serial = fleet.devices()[0].addr.to_string();
    let mut client = serve(DeviceConfig {
        ui_source: toml::from_str::<DeviceConfig>(&format!("ui_source = '{pref}'"))
            .unwrap()
            .ui_source,
        ..direct_config(&serial)
    })
    .await;
    let lease = acquire(&mut client, &serial, "portal").await;
    start_app(&mut client, &lease, "com.android.settings").await;
    let s = state(&mut client, &serial).await;
    (s.ui_source.clone(), texts(&s))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_phone_with_the_companion_is_read_through_it_and_one_without_through_uiautomator() {
    let (source, texts) = settings_state(true, "auto").await;
    assert_eq!(source, "portal");
    assert!(texts.iter().any(|t| t == "Wi-Fi"), "{texts:?}");
    let (source, texts_ui) = settings_state(false, "auto").await;
    assert_eq!(source, "uiautomator");
    assert_eq!(texts, texts_ui, "both sources show the same screen");
    let (source, _) = settings_state(true, "uiautomator").await;
    assert_eq!(source, "uiautomator", "the configured source wins");
    // Told to use a companion the phone does not have: still read, with uiautomator.
    let (source, texts) = settings_state(false, "portal").await;
    assert_eq!(source, "uiautomator");
    assert!(texts.iter().any(|t| t == "Wi-Fi"), "{texts:?}");
}
