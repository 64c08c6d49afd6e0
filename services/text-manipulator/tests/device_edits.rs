//! Edits of the phone's focused field: the Notes case end to end, and what is refused.
use droidmesh_proto::v1::DeviceBinding;
use serde_json::json;

use crate::rig::*;

const BULLETS: &str = "const items = ORIGINAL.split(',').map(s => s.trim()).filter(s => s.length > 0);\ninput_text(items.map(s => '- ' + s).join('\\n'))";

#[tokio::test(flavor = "multi_thread")]
async fn a_note_becomes_a_bulleted_list_that_is_saved_as_typed() {
    let rig = rig(vec![reply(&format!(
        "Split on commas, one bullet per item.\n```js\n{BULLETS}\n```"
    ))])
    .await;
    rig.open(NOTES).await;
    rig.type_into("note_input", "milk, eggs, bread", false)
        .await;
    assert!(rig.element("note_input").await.focused);

    let response = rig
        .manipulate(rig.request("Turn the items into a bulleted list", true))
        .await;
    let expected = "- milk\n- eggs\n- bread";
    let result = result(&response);
    assert!(result.success, "{result:?}");
    assert_eq!(result.method_used, "text_manipulator");
    assert_eq!(
        result.action_taken,
        "rewrote the focused field (17 \u{2192} 21 characters)"
    );
    assert_eq!(result.confidence, 1.0);
    assert_eq!(
        data(&response),
        json!({ "text": expected, "attempts": 1, "applied": true })
    );
    assert!(result.duration_us > 0);
    assert_eq!(response.text_to_type, expected);
    assert_eq!(response.code_ran, BULLETS);
    assert_eq!(response.attempts, 1);
    let usage = response.usage.unwrap();
    assert_eq!(usage.agent, "text_manipulator");
    assert_eq!(usage.model, "scripted-model");
    let totals = usage.usage.unwrap();
    assert_eq!(
        (totals.calls, totals.input_tokens, totals.output_tokens),
        (1, 300, 30)
    );

    // The model saw the task and the field's text, read from the phone.
    let prompt = rig.last_message(0);
    assert!(
        prompt.contains("Turn the items into a bulleted list")
            && prompt.contains(
                "----- ORIGINAL begins -----\nmilk, eggs, bread\n----- ORIGINAL ends -----"
            ),
        "{prompt}"
    );

    // What the phone saves is the list, line breaks included.
    assert_eq!(rig.element("note_input").await.text, expected);
    rig.tap("save").await;
    assert_eq!(rig.read_file("/sdcard/Notes/note.txt"), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_given_original_needs_no_device_and_nothing_is_typed() {
    let rig = rig(vec![program(BULLETS)]).await;
    rig.open(NOTES).await;
    rig.type_into("note_input", "untouched", false).await;
    let mut request = rig.request("Turn the items into a bulleted list", false);
    request.original = Some("tea, rice".into());
    request.handoff_context = Some(droidmesh_proto::json_to_struct(
        &json!({"reason": "the list came from the scripter"}),
    ));
    // Nothing listens here: any device call would fail the request.
    request.device = Some(DeviceBinding {
        endpoint: "http://127.0.0.1:1".into(),
        lease: None,
    });
    let response = rig.manipulate(request).await;
    let result = result(&response);
    assert!(result.success, "{result:?}");
    assert_eq!(response.text_to_type, "- tea\n- rice");
    assert_eq!(data(&response)["applied"], json!(false));
    assert!(
        result.action_taken.contains("nothing was typed"),
        "{}",
        result.action_taken
    );
    assert!(rig.last_message(0).contains("tea, rice"));
    // Context handed over by another agent is shown too.
    assert!(
        rig.last_message(0)
            .contains("the list came from the scripter")
    );
    assert_eq!(rig.element("note_input").await.text, "untouched");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_focused_field_the_edit_fails_before_any_model_call() {
    let rig = rig(vec![program(BULLETS)]).await;
    // The launcher has no text field.
    let response = rig.manipulate(rig.request("Add a title", true)).await;
    let result = result(&response);
    assert!(!result.success);
    assert_eq!(
        result.error.as_deref(),
        Some("no text field is focused: focus the field first (tap it), then ask for the edit")
    );
    assert_eq!(response.attempts, 0);
    assert_eq!(response.text_to_type, "");
    assert_eq!(rig.llm.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_field_is_neither_read_nor_rewritten() {
    let rig = rig(vec![program("input_text(ORIGINAL + '!')")]).await;
    rig.open(LOGIN).await;
    rig.type_into("password", "hunter2", true).await;
    assert!(rig.element("password").await.focused);
    let response = rig
        .manipulate(rig.request("Add an exclamation mark", true))
        .await;
    let result = result(&response);
    assert!(!result.success);
    assert!(
        result.error.as_deref().unwrap().contains("password field"),
        "{result:?}"
    );
    assert_eq!(rig.llm.request_count(), 0, "nothing reached a model");
    assert!(!format!("{response:?}").contains("hunter2"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_text_the_phone_cannot_type_is_sent_back_and_fixed() {
    let rig = rig(vec![
        program("input_text(ORIGINAL.split(', ').map(s => '\\u0007' + s).join('\\n'))"),
        program(BULLETS),
    ])
    .await;
    let mut request = rig.request("Make it a bulleted list", false);
    request.original = Some("milk, eggs".into());
    let response = rig.manipulate(request).await;
    assert!(result(&response).success, "{response:?}");
    assert_eq!(response.attempts, 2);
    assert_eq!(response.text_to_type, "- milk\n- eggs");
    let retry = rig.last_message(1);
    assert!(
        retry.contains("cannot be typed: '\\u{7}' at position 0"),
        "{retry}"
    );
}

const ACCENTS: &str = "input_text(ORIGINAL.replace('Zoe', 'Zo\\u00eb').replace('Munchen', 'M\\u00fcnchen \\u6771\\u4eac'))";

#[tokio::test(flavor = "multi_thread")]
async fn letters_beyond_ascii_are_typed_where_the_phone_has_a_keyboard_app() {
    let rig = rig_with_keyboard(vec![program(ACCENTS)]).await;
    rig.open(NOTES).await;
    rig.type_into("note_input", "Zoe from Munchen", false).await;
    let response = rig
        .manipulate(rig.request("Spell the names properly", true))
        .await;
    let expected = "Zo\u{eb} from M\u{fc}nchen \u{6771}\u{4eac}";
    assert!(result(&response).success, "{response:?}");
    assert_eq!(response.text_to_type, expected);
    assert_eq!(response.attempts, 1);
    assert_eq!(rig.element("note_input").await.text, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_keyboard_app_such_letters_fail_naming_what_to_install() {
    let rig = rig(vec![program(ACCENTS)]).await;
    rig.open(NOTES).await;
    rig.type_into("note_input", "Zoe from Munchen", false).await;
    let response = rig
        .manipulate(rig.request("Spell the names properly", true))
        .await;
    let result = result(&response);
    assert!(!result.success, "{response:?}");
    let error = result.error.clone().unwrap_or_default();
    assert!(error.contains("com.android.adbkeyboard"), "{error}");
    assert_eq!(rig.element("note_input").await.text, "Zoe from Munchen");
}
