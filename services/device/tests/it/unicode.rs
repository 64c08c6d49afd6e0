//! Text in any language: typed through the companion keyboard, ADBKeyBoard or plain
//! `input text`, read back exactly, with the user's keyboard restored.
use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{ActionResult, Lease, TypeTextRequest};
use droidmesh_sim::{SimFleet, SimOptions};
use tonic::Code;

use super::common::*;
use super::sims::{config, shared};

const LATIN: &str = "com.android.inputmethod.latin/.LatinIME";
const COMPANION_IME: &str = "com.mobilerun.portal/.input.MobilerunKeyboardIME";
const ADB_IME: &str = "com.android.adbkeyboard/.AdbIME";

/// Every case of the table: a name and the text.
fn table() -> Vec<(&'static str, String)> {
    let mut ten_kb = String::new();
    while ten_kb.len() < 10 * 1024 {
        ten_kb.push_str("Ünïcödé 文字 ✓ 👍🏽 $(id) 'q' \"q\" %s\tend\n");
    }
    vec![
        (
            "latin with accents",
            "Crème brûlée à la façon d'Œdipe: ñandú, Ångström, Łódź, İstanbul, ß".into(),
        ),
        (
            "cyrillic",
            "Съешь же ещё этих мягких французских булок".into(),
        ),
        ("cjk", "中文输入测试，日本語の入力、한국어 입력".into()),
        ("arabic", "مرحبا بالعالم، كيف حالك؟".into()),
        (
            "emoji with zwj sequences and skin tones",
            "👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🧑🏿‍💻 👩🏻‍❤️‍💋‍👨🏾 🇯🇵".into(),
        ),
        ("newlines", "line one\nline two\n\nline four\n".into()),
        ("tabs", "a\tb\t\tc\t".into()),
        (
            "quotes",
            "\"double\" 'single' `back` ‘curly’ “curly” «guillemets»".into(),
        ),
        (
            "shell metacharacters",
            "\\ ; | & < > ( ) # $ * ? [ ] { } ' \" ` ~ ! $HOME $(id) `id` && || >> 2>&1 %".into(),
        ),
        ("a literal %s", "100%sure %s %%s %".into()),
        ("10 KB", ten_kb),
        ("empty", String::new()),
    ]
}

async fn fleet(portal: bool, adb_keyboard: bool) -> SimFleet {
    droidmesh_sim::start(SimOptions {
        base_port: 0,
        portal,
        adb_keyboard,
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

/// What the note field holds on the phone itself (the screen shows a hint while it is empty).
fn note(fleet: &SimFleet) -> String {
    let d = fleet.devices()[0].state.lock().unwrap();
    d.fields
        .get(&d.field_key("note_input"))
        .cloned()
        .unwrap_or_default()
}

fn sh(fleet: &SimFleet, cmd: &str) -> String {
    String::from_utf8_lossy(&fleet.devices()[0].shell(cmd).stdout)
        .trim()
        .to_owned()
}

/// The notes app open under a lease, and the index of its field.
async fn open_notes(client: &mut Client, serial: &str) -> (Lease, u32) {
    let lease = acquire(client, serial, "unicode-test").await;
    start_app(client, &lease, "com.droidmesh.notes").await;
    let st = state(client, serial).await;
    let index = find(&st, |e| e.resource_id.ends_with("note_input"))
        .unwrap()
        .index;
    (lease, index)
}

async fn type_text(
    client: &mut Client,
    lease: &Lease,
    index: u32,
    text: &str,
    sensitive: bool,
) -> Result<ActionResult, tonic::Status> {
    client
        .type_text(TypeTextRequest {
            lease: lref(lease),
            text: text.into(),
            index: Some(index),
            clear: true,
            sensitive,
        })
        .await
        .map(tonic::Response::into_inner)
}

fn data(r: &ActionResult) -> serde_json::Value {
    droidmesh_proto::struct_to_json(r.data.as_ref().unwrap())
}

/// Types every case of the table into the note field and checks the phone's field, what
/// GetState reads and what the answer says, and that the phone's own keyboard is selected
/// (and the app's disabled) after each.
async fn round_trip(fleet: &SimFleet, client: &mut Client, serial: &str, keyboard: &str) {
    let (lease, index) = open_notes(client, serial).await;
    for (name, text) in table() {
        let r = type_text(client, &lease, index, &text, false)
            .await
            .unwrap_or_else(|e| panic!("{keyboard} {name}: {e}"));
        assert!(r.success, "{keyboard} {name}: {r:?}");
        assert_eq!(note(fleet), text, "{keyboard} {name}: the phone's field");
        let d = data(&r);
        assert_eq!(d["keyboard"], keyboard, "{keyboard} {name}");
        assert_eq!(d["keyboard_restored"], true, "{keyboard} {name}");
        if !text.is_empty() {
            assert_eq!(
                d["field_text"],
                text.as_str(),
                "{keyboard} {name}: read back"
            );
            assert_eq!(d["field_matches"], true, "{keyboard} {name}");
            assert!(
                r.action_taken.ends_with("the field now holds exactly that"),
                "{keyboard} {name}: {}",
                r.action_taken
            );
            let st = state(client, serial).await;
            let field = find(&st, |e| e.index == index).unwrap();
            assert_eq!(field.text, text, "{keyboard} {name}: GetState");
        }
        assert_eq!(
            sh(fleet, "settings get secure default_input_method"),
            LATIN,
            "{keyboard} {name}: the user's keyboard is selected again"
        );
        assert_eq!(
            sh(fleet, "settings get secure enabled_input_methods"),
            LATIN,
            "{keyboard} {name}: the app's keyboard is not left enabled"
        );
    }
}

/// The table through the adb server and straight over TCP, on a phone with `portal` or
/// `adb_keyboard`.
async fn both_transports(portal: bool, adb_keyboard: bool, keyboard: &str) {
    let Some(shared) = shared() else { return };
    let through_server = fleet(portal, adb_keyboard).await;
    let serial = shared.adb.connect(through_server.addrs()[0]).unwrap();
    let mut client = serve(config(shared)).await;
    round_trip(&through_server, &mut client, &serial, keyboard).await;

    let direct = fleet(portal, adb_keyboard).await;
    let serial = direct.addrs()[0].to_string();
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 3_000,
        ..direct_config(&serial)
    })
    .await;
    round_trip(&direct, &mut client, &serial, keyboard).await;
    direct.shutdown().await;
    through_server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_script_round_trips_through_the_companion_keyboard_over_both_transports() {
    both_transports(true, false, "companion_keyboard").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_script_round_trips_through_adbkeyboard_over_both_transports() {
    both_transports(false, true, "adb_keyboard").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_phone_without_a_keyboard_app_refuses_other_text_naming_what_to_install() {
    let phone = fleet(false, false).await;
    let serial = phone.addrs()[0].to_string();
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 3_000,
        ..direct_config(&serial)
    })
    .await;
    let (lease, index) = open_notes(&mut client, &serial).await;
    let e = type_text(&mut client, &lease, index, "Привет", false)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().starts_with(
            "`input text` on Android accepts ASCII only; got 'П' at position 0; device"
        ) && e.message().contains("install the companion app (com.mobilerun.portal) or ADBKeyBoard (com.android.adbkeyboard)"),
        "{}",
        e.message()
    );
    assert_eq!(note(&phone), "", "nothing is typed");
    // ASCII, shell characters, a literal `%s` and line breaks still go through `input text`.
    let text = "it's \"100%sure\" $(id) `x` & ; | <a> *?\nnext line";
    let r = type_text(&mut client, &lease, index, text, false)
        .await
        .unwrap();
    assert_eq!(data(&r)["keyboard"], "input_text");
    assert_eq!(note(&phone), text);
    assert_eq!(data(&r)["field_text"], text);
    assert_eq!(data(&r)["field_matches"], true);
    // The phone itself refuses such text with its own error.
    let o = phone.devices()[0].shell("input text 'Привет'");
    assert_eq!(o.code, 255);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("java.lang.NullPointerException: Attempt to get length of null array"),
        "{o:?}"
    );
    assert_eq!(note(&phone), text, "the refused command typed nothing");
    phone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_own_choice_of_keyboard_is_selected_again() {
    // The user types with ADBKeyBoard; the companion's keyboard is used, then put away.
    let phone = fleet(true, true).await;
    sh(&phone, &format!("ime enable {ADB_IME}"));
    sh(&phone, &format!("ime set {ADB_IME}"));
    let serial = phone.addrs()[0].to_string();
    let mut client = serve(direct_config(&serial)).await;
    let (lease, index) = open_notes(&mut client, &serial).await;
    let r = type_text(&mut client, &lease, index, "한국어", false)
        .await
        .unwrap();
    let d = data(&r);
    assert_eq!(d["keyboard"], "companion_keyboard");
    assert_eq!(d["previous_keyboard"], ADB_IME);
    assert_eq!(note(&phone), "한국어");
    assert_eq!(
        sh(&phone, "settings get secure default_input_method"),
        ADB_IME
    );
    assert_eq!(
        sh(&phone, "settings get secure enabled_input_methods"),
        format!("{LATIN}:{ADB_IME}")
    );
    assert!(!sh(&phone, "ime list -s").contains(COMPANION_IME));
    // What the phone has was asked once: a second typing does not ask again.
    type_text(&mut client, &lease, index, "또", false)
        .await
        .unwrap();
    let (_, recent) = phone.devices()[0].streams_opened();
    let asked = recent
        .iter()
        .filter(|s| s.contains("ime list -a -s"))
        .count();
    assert_eq!(asked, 1, "{recent:#?}");
    phone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_typed_through_a_keyboard_app_is_masked_and_never_repeated() {
    const SECRET: &str = "пароль-🔑-42";
    for (portal, adb_keyboard) in [(true, false), (false, true)] {
        let phone = fleet(portal, adb_keyboard).await;
        let serial = phone.addrs()[0].to_string();
        let mut client = serve(direct_config(&serial)).await;
        let (lease, index) = open_notes(&mut client, &serial).await;
        let r = type_text(&mut client, &lease, index, SECRET, true)
            .await
            .unwrap();
        assert!(r.success, "{r:?}");
        assert_eq!(note(&phone), SECRET, "typed");
        let answer = format!("{r:?}");
        assert!(
            !answer.contains("пароль") && !answer.contains("42"),
            "{answer}"
        );
        let st = state(&mut client, &serial).await;
        let seen = format!("{:?}", st.elements);
        assert!(!seen.contains("пароль") && !seen.contains('🔑'), "{seen}");
        let field = find(&st, |e| e.index == index).unwrap();
        assert_ne!(field.text, SECRET);
        phone.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_keyboard_is_selected_again_when_typing_fails_part_way() {
    use std::sync::{Arc, Mutex};

    use super::fake_adbd::{Reply, start};
    // A phone with the companion whose keyboard hangs on the text.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let addr = start(Arc::new(move |cmd: &str| {
        log.lock().unwrap().push(cmd.to_owned());
        let out = if cmd == "ime list -a -s" {
            format!("{LATIN}\n{COMPANION_IME}\n")
        } else if cmd.starts_with("settings get secure default_input_method;") {
            format!(
                "{LATIN}\n{LATIN}\nInput method {COMPANION_IME}: now enabled for user #0\nInput method {COMPANION_IME} selected for user #0\n"
            )
        } else if cmd.starts_with("content insert") {
            return Reply::Stall;
        } else {
            String::new()
        };
        Reply::Output(out.into_bytes())
    }))
    .await;
    let serial = addr.to_string();
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 500,
        ..direct_config(&serial)
    })
    .await;
    let lease = acquire(&mut client, &serial, "unicode-test").await;
    let e = client
        .type_text(TypeTextRequest {
            lease: lref(&lease),
            text: "你好".into(),
            index: None,
            clear: false,
            sensitive: false,
        })
        .await
        .unwrap_err();
    assert!(
        e.message().contains("did not finish within 500 ms"),
        "{}",
        e.message()
    );
    let seen = seen.lock().unwrap().clone();
    let restore = format!("ime set '{LATIN}'; ime disable {COMPANION_IME}");
    assert!(
        seen.contains(&restore),
        "the user's keyboard is selected again after the hang: {seen:#?}"
    );
}
