//! App cards in CodeAct prompts, against the model double: a step with an app in front gets
//! its card (from the configured card directory), a step with none does not.
use droidmesh_executor::ExecutorConfig;

use crate::codeact::run;
use crate::rig::{Rig, reply, rig_with};

/// The user message of the model double's `i`th request.
fn user_prompt(rig: &Rig, i: usize) -> String {
    let body = rig.llm.requests()[i].json();
    body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_gets_the_card_of_the_app_in_front_and_only_then() {
    let cards = tempfile::tempdir().unwrap();
    let android = cards.path().join("android");
    std::fs::create_dir_all(&android).unwrap();
    std::fs::write(
        android.join("app_cards.json"),
        r#"{"com.android.settings": "settings.md"}"#,
    )
    .unwrap();
    std::fs::write(android.join("settings.md"), "Wi-Fi is the first switch.").unwrap();
    let rig = rig_with(
        vec![
            reply("Settings first.\n```js\nopen_app('Settings')\n```"),
            reply("Done.\n```js\ncomplete(true, 'opened')\n```"),
        ],
        ExecutorConfig {
            app_cards: droidmesh_app_cards::AppCardsConfig {
                dir: Some(cards.path().to_owned()),
                ..Default::default()
            },
            ..ExecutorConfig::default()
        },
    )
    .await;
    run(&rig, "Turn on Wi-Fi", 5).await;
    let first = user_prompt(&rig, 0);
    assert!(!first.contains("## About the apps"), "{first}");
    let second = user_prompt(&rig, 1);
    assert!(
        second.contains("## About the apps\n### com.android.settings\nWi-Fi is the first switch."),
        "{second}"
    );
}

#[test]
fn a_card_directory_that_is_not_there_is_named_in_the_refusal() {
    let err = ExecutorConfig {
        app_cards: droidmesh_app_cards::AppCardsConfig {
            dir: Some("/no/cards/here".into()),
            ..Default::default()
        },
        ..ExecutorConfig::default()
    }
    .validate()
    .unwrap_err();
    assert!(
        err.contains("executor.app_cards.dir: /no/cards/here is not a directory"),
        "{err}"
    );
}
