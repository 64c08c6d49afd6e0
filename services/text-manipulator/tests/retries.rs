//! Failed programs go back to the model with their error, a bounded number of times.
use crate::rig::*;

const GOOD: &str = "input_text('Hi Sam,\\n' + ORIGINAL)";

#[tokio::test(flavor = "multi_thread")]
async fn a_syntax_error_and_its_code_reach_the_model_and_the_next_program_runs() {
    let broken = "input_text('Hi Sam,\\n' + )";
    let rig = rig(vec![program(broken), program(GOOD)]).await;
    let mut request = rig.request("Greet Sam on a line of its own", false);
    request.original = Some("On my way".into());
    let response = rig.manipulate(request).await;
    let result = result(&response);
    assert!(result.success, "{result:?}");
    assert_eq!(response.attempts, 2);
    assert_eq!(data(&response)["attempts"], serde_json::json!(2));
    assert_eq!(response.text_to_type, "Hi Sam,\nOn my way");
    assert_eq!(response.code_ran, GOOD);
    let totals = response.usage.unwrap().usage.unwrap();
    assert_eq!((totals.calls, totals.input_tokens), (2, 600));

    let retry = rig.last_message(1);
    assert!(retry.contains("SyntaxError"), "{retry}");
    assert!(retry.contains(&format!("```js\n{broken}\n```")), "{retry}");
    assert!(retry.contains("Greet Sam on a line of its own"), "{retry}");
}

#[tokio::test(flavor = "multi_thread")]
async fn when_retries_run_out_the_edit_fails_and_the_field_keeps_its_text() {
    let rig = rig(vec![]).await;
    rig.llm.set_fallback(program("input_text(ORIGINAL +)"));
    rig.open(NOTES).await;
    rig.type_into("note_input", "milk, eggs", false).await;
    let mut request = rig.request("Make it a bulleted list", true);
    request.max_retries = 2;
    let response = rig.manipulate(request).await;
    let result = result(&response);
    assert!(!result.success);
    let error = result.error.as_deref().unwrap();
    assert!(
        error.contains("after 3 attempt(s)") && error.contains("SyntaxError"),
        "{error}"
    );
    assert_eq!(response.attempts, 3);
    assert_eq!(rig.llm.request_count(), 3);
    assert_eq!(response.text_to_type, "");
    assert_eq!(response.code_ran, "input_text(ORIGINAL +)");
    assert_eq!(data(&response)["applied"], serde_json::json!(false));
    assert_eq!(rig.element("note_input").await.text, "milk, eggs");
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_max_retries_means_four() {
    let rig = rig(vec![]).await;
    rig.llm
        .set_fallback(reply("I would rather not write code."));
    let mut request = rig.request("Shout it", false);
    request.original = Some("hello".into());
    let response = rig.manipulate(request).await;
    assert!(!result(&response).success);
    assert_eq!(response.attempts, 5);
    assert!(rig.last_message(1).contains("no JavaScript found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_is_stopped_and_the_model_tries_again() {
    let rig = rig(vec![program("while (true) {}"), program(GOOD)]).await;
    let mut request = rig.request("Greet Sam", false);
    request.original = Some("On my way".into());
    let response = rig.manipulate(request).await;
    assert!(result(&response).success, "{response:?}");
    assert_eq!(response.attempts, 2);
    let retry = rig.last_message(1);
    assert!(retry.contains("300ms"), "{retry}");
    assert!(retry.contains("while (true) {}"), "{retry}");
}

#[tokio::test(flavor = "multi_thread")]
async fn console_and_fetch_do_not_exist_and_the_model_is_told() {
    let rig = rig(vec![
        program("console.log(ORIGINAL);\ninput_text(ORIGINAL)"),
        program("const r = await fetch('http://127.0.0.1:9/');\ninput_text(ORIGINAL)"),
        program("input_text(ORIGINAL.toUpperCase())"),
    ])
    .await;
    let mut request = rig.request("Shout it", false);
    request.original = Some("hello".into());
    let response = rig.manipulate(request).await;
    assert!(result(&response).success, "{response:?}");
    assert_eq!(response.text_to_type, "HELLO");
    assert_eq!(response.attempts, 3);
    assert!(rig.last_message(1).contains("console is not defined"));
    assert!(rig.last_message(2).contains("fetch is not defined"));
}

#[tokio::test(flavor = "multi_thread")]
async fn several_input_text_calls_are_refused_not_merged() {
    let rig = rig(vec![
        program("for (const line of ORIGINAL.split(',')) input_text('- ' + line.trim())"),
        program("input_text(ORIGINAL.split(',').map(s => '- ' + s.trim()).join('\\n'))"),
    ])
    .await;
    let mut request = rig.request("Bullets", false);
    request.original = Some("a, b".into());
    let response = rig.manipulate(request).await;
    assert_eq!(response.text_to_type, "- a\n- b");
    assert!(
        rig.last_message(1).contains("called input_text 2 times"),
        "{}",
        rig.last_message(1)
    );
}
