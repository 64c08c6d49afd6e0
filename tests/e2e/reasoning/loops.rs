//! Loop recovery in reasoning mode across processes: the manager keeps planning the same tap
//! on a row that opens nothing; after three the manager's next prompt asks it to plan again,
//! and when the same loop comes back the task ends naming it, long before its step limit.
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, GetStateRequest, LeaseRef, ReleaseLeaseRequest, StartAppRequest,
    start_app_request,
};

use super::*;

/// Opens Settings on `serial` through the mesh's device service; returns the index of the
/// element that reads `text`.
async fn settings_element(mesh: &Mesh, serial: &str, text: &str) -> u32 {
    let endpoint = format!("http://127.0.0.1:{}", mesh.port("device"));
    let mut device = DeviceServiceClient::connect(endpoint).await.unwrap();
    let granted = device
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.into(),
            holder: "test-setup".into(),
            ttl_ms: 5_000,
        })
        .await
        .unwrap()
        .into_inner();
    let lease = LeaseRef {
        serial: serial.into(),
        lease_id: granted.lease_id,
    };
    device
        .start_app(StartAppRequest {
            lease: Some(lease.clone()),
            app: Some(start_app_request::App::Package(
                "com.android.settings".into(),
            )),
            activity: String::new(),
        })
        .await
        .unwrap();
    let state = device
        .get_state(GetStateRequest {
            serial: serial.into(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    device
        .release_lease(ReleaseLeaseRequest { lease: Some(lease) })
        .await
        .unwrap();
    state
        .elements
        .iter()
        .find(|e| e.text == text)
        .unwrap_or_else(|| panic!("no element reads {text:?}"))
        .index
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tap_repeated_on_an_unchanged_screen_makes_the_manager_plan_again_then_ends_the_task() {
    if !require_adb("cross-process tests") {
        return;
    }
    let mesh = start_with(Vec::new(), Extra::default()).await;
    let serial = mesh.serials[0].clone();
    let storage = settings_element(&mesh, &serial, "Storage").await;
    // The manager plans the same tap, the executor taps: six rounds, then the double gives up
    // (a task that goes on past six ends with the double's answer instead of the loop).
    for _ in 0..6 {
        mesh.llm.push(plan_reply("1. Tap the Storage row"));
        mesh.llm
            .push(act(&format!(r#"{{"action": "tap", "index": {storage}}}"#)));
    }
    mesh.llm
        .set_fallback(done(false, "the model double has nothing more to say"));
    let req = TaskRequest {
        max_steps: Some(20),
        ..reasoning("Open the storage settings", &serial)
    };
    let events = run(&mesh, req).await;

    let p = prompts(&mesh.llm);
    let managers = of(&p, "manager");
    assert_eq!(
        managers.len(),
        6,
        "{:?}",
        p.iter().map(|(a, _)| *a).collect::<Vec<_>>()
    );
    let asked = format!(
        "Loop: the last 3 subgoals did the same action (tap on element {storage}) and the screen did not change. The plan is not working: plan again"
    );
    for (i, m) in managers.iter().take(3).enumerate() {
        assert!(
            !m.contains("Loop:"),
            "manager prompt {} already asks:\n{m}",
            i + 1
        );
    }
    assert!(managers[3].contains(&asked), "{}", managers[3]);
    let summary =
        format!("the same tap on element {storage} repeated 3 times on an unchanged screen");
    assert!(
        managers[3].contains(&format!("(loop: {summary})")),
        "the history does not mark the loop:\n{}",
        managers[3]
    );
    // The user read it as a message; the task ended on the loop at step 6, not at 20.
    let messages: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Message(m)) => Some(m.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        messages,
        [format!(
            "loop: {summary}; the manager is asked to plan again"
        )]
    );
    let c = completed(&events);
    assert!(!c.success);
    assert_eq!(c.steps, 6);
    assert_eq!(
        c.error,
        format!("stopped: {summary}, again after the manager was told")
    );
    assert!(lease_holder(&mesh, &serial).await.is_none());
}
