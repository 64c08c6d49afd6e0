//! A model that copies its prompt back, over several attempts: what it copied never runs and
//! never becomes the model's own turn or "your program" in the retry it is shown.
use crate::rig::*;

/// The system prompt's first example, copied with its heading.
const EXAMPLE_ECHO: &str = "Edit: put \"Hi Sam,\" on its own line at the beginning.\n```js\ninput_text(\"Hi Sam,\\n\" + ORIGINAL)\n```";

/// The messages of the model's `i`-th request, as (role, text).
fn messages(rig: &Rig, i: usize) -> Vec<(String, String)> {
    let body = rig.llm.requests()[i].json();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap().to_owned(), text)
        })
        .collect()
}

/// A program of the model's own fails; its next reply copies the prompt's example. The retry
/// after the copy shows the model its own program and error, not the copy as its turn.
#[tokio::test(flavor = "multi_thread")]
async fn a_copied_reply_never_becomes_the_model_s_turn_or_its_program() {
    let broken = "input_text(ORIGINAL.toUpperCase() +)";
    let rig = rig(vec![
        program(broken),
        reply(EXAMPLE_ECHO),
        program("input_text(ORIGINAL.toUpperCase())"),
    ])
    .await;
    let mut request = rig.request("Shout it", false);
    request.original = Some("hello".into());
    let response = rig.manipulate(request).await;
    assert!(result(&response).success, "{response:?}");
    assert_eq!(response.text_to_type, "HELLO");
    assert_eq!(response.attempts, 3);
    let third = messages(&rig, 2);
    let roles: Vec<&str> = third.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{third:?}");
    assert_eq!(third[1].1, format!("```js\n{broken}\n```"));
    let retry = &third[2].1;
    assert!(
        retry.contains(&format!("## Your program\n```js\n{broken}\n```")),
        "{retry}"
    );
    assert!(
        retry.contains("nothing ran: the code in your last reply was copied from this prompt")
            && retry.contains("SyntaxError"),
        "{retry}"
    );
}
