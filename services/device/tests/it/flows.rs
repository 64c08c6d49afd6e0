//! End-to-end flows on simulated devices through the adb server: Settings, Notes, Contacts.
use droidmesh_proto::v1::{
    Point, StartAppRequest, SwipeRequest, TapRequest, Transport, TypeTextRequest,
    start_app_request, tap_request,
};

use super::common::*;
use super::sims::*;

#[tokio::test(flavor = "multi_thread")]
async fn lists_both_attached_simulators() {
    let Some(shared) = shared() else { return };
    let mut client = serve(config(shared)).await;
    let devices = devices(&mut client).await;
    for serial in &shared.serials[..2] {
        let d = devices
            .iter()
            .find(|d| &d.serial == serial)
            .unwrap_or_else(|| panic!("{serial} missing in {devices:?}"));
        assert_eq!(d.state, "device");
        assert_eq!(d.transport, Transport::AdbServer as i32);
        assert!(d.lease.is_none());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_wifi_toggle_by_index_flips_the_setting() {
    let Some(shared) = shared() else { return };
    let serial = &shared.serials[DEV_SETTINGS];
    let mut client = serve(config(shared)).await;
    let lease = acquire(&mut client, serial, "settings-test").await;
    let started = client
        .start_app(StartAppRequest {
            lease: lref(&lease),
            app: Some(start_app_request::App::Label("Settings".into())),
            activity: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(started.success);
    assert!(
        started.action_taken.contains("com.android.settings"),
        "{}",
        started.action_taken
    );

    let st = state(&mut client, serial).await;
    assert_eq!(st.phone.as_ref().unwrap().package, "com.android.settings");
    assert!(st.screen.unwrap().width > 0);
    let wifi =
        find(&st, |e| e.text == "Wi-Fi").unwrap_or_else(|| panic!("no Wi-Fi in {:?}", texts(&st)));
    let before = shared
        .adb
        .shell(serial, "settings get global wifi_on")
        .unwrap();

    let result = client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Index(wifi.index)),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(result.success);
    assert_eq!(result.method_used, "adb");
    assert!(
        result.action_taken.contains("Wi-Fi"),
        "{}",
        result.action_taken
    );
    let data = droidmesh_proto::struct_to_json(result.data.as_ref().unwrap());
    assert_eq!(
        data["element"]["index"].as_f64(),
        Some(f64::from(wifi.index)),
        "{data}"
    );

    let after = shared
        .adb
        .shell(serial, "settings get global wifi_on")
        .unwrap();
    assert_ne!(before.trim(), after.trim(), "wifi_on did not flip");
    assert!(["0", "1"].contains(&after.trim()), "{after:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn notes_typed_text_is_saved_on_the_device() {
    let Some(shared) = shared() else { return };
    let serial = &shared.serials[DEV_NOTES];
    let mut client = serve(config(shared)).await;
    let lease = acquire(&mut client, serial, "notes-test").await;
    client
        .start_app(StartAppRequest {
            lease: lref(&lease),
            app: Some(start_app_request::App::Package(
                "com.droidmesh.notes".into(),
            )),
            activity: String::new(),
        })
        .await
        .unwrap();
    let st = state(&mut client, serial).await;
    let input = find(&st, |e| {
        e.resource_id == "com.droidmesh.notes:id/note_input"
    })
    .unwrap();
    assert!(input.editable, "{input:?}");
    let text = "buy milk & eggs; it's 2 o'clock";
    let typed = client
        .type_text(TypeTextRequest {
            lease: lref(&lease),
            text: text.into(),
            index: Some(input.index),
            clear: true,
            sensitive: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(typed.success, "{typed:?}");

    let st = state(&mut client, serial).await;
    let field = find(&st, |e| {
        e.resource_id == "com.droidmesh.notes:id/note_input"
    })
    .unwrap();
    assert_eq!(field.text, text);
    let save = find(&st, |e| e.resource_id == "com.droidmesh.notes:id/save").unwrap();
    client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Index(save.index)),
        })
        .await
        .unwrap();
    let saved = shared
        .adb
        .shell(serial, "cat /sdcard/Notes/note.txt")
        .unwrap();
    assert_eq!(saved.trim_end(), text);

    // Sensitive text is typed the same, and the answer names only its length, even when the
    // field held an earlier text that is cleared first.
    let held = state(&mut client, serial).await;
    let field = find(&held, |e| e.index == input.index).unwrap();
    assert_eq!(field.text, text, "the saved note is still in the field");
    let secret = "hunter2-Secret";
    let typed = client
        .type_text(TypeTextRequest {
            lease: lref(&lease),
            text: secret.into(),
            index: Some(input.index),
            clear: true,
            sensitive: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(typed.success, "{typed:?}");
    let answer = format!("{typed:?}");
    assert!(
        !answer.contains(secret) && !answer.contains("milk"),
        "{answer}"
    );
    assert!(typed.action_taken.contains("14 characters"), "{answer}");
    let st = state(&mut client, serial).await;
    let field = find(&st, |e| {
        e.resource_id == "com.droidmesh.notes:id/note_input"
    })
    .unwrap();
    // The field the secret went into is masked in every later read, as a password field is.
    assert_eq!(field.text, "\u{2022}".repeat(14));
    assert!(!format!("{st:?}").contains(secret));
}

#[tokio::test(flavor = "multi_thread")]
async fn swiping_the_contacts_list_scrolls_it() {
    let Some(shared) = shared() else { return };
    let serial = &shared.serials[DEV_CONTACTS];
    let mut client = serve(config(shared)).await;
    let lease = acquire(&mut client, serial, "contacts-test").await;
    client
        .start_app(StartAppRequest {
            lease: lref(&lease),
            app: Some(start_app_request::App::Label("contacts".into())),
            activity: String::new(),
        })
        .await
        .unwrap();
    let before = state(&mut client, serial).await;
    let screen = before.screen.unwrap();
    let (w, h) = (screen.width as i32, screen.height as i32);
    let swiped = client
        .swipe(SwipeRequest {
            lease: lref(&lease),
            start: Some(Point {
                x: w / 2,
                y: h * 3 / 4,
            }),
            end: Some(Point { x: w / 2, y: h / 4 }),
            duration_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        swiped.action_taken.contains("300 ms"),
        "{}",
        swiped.action_taken
    );
    let after = state(&mut client, serial).await;
    assert_eq!(
        after.phone.as_ref().unwrap().package,
        "com.android.contacts"
    );
    let (t0, t1) = (texts(&before), texts(&after));
    assert_ne!(t0, t1, "the visible contacts did not change");
    assert!(
        t1.iter().any(|t| !t0.contains(t)),
        "no new contact appeared: {t0:?} -> {t1:?}"
    );
}
