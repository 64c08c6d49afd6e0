//! Choosing the code a model wrote for this step against the real CodeAct prompts: a reply that
//! copies its prompt runs nothing of it, while a model that repeats an action of its own runs.
use droidmesh_agent::parse::{IgnoredWhy, PromptEcho, choose_code};
use droidmesh_agent::prompts::{CodeActSystem, CodeActUser, PromptSet};
use droidmesh_agent::tools::{js_signatures, select};

use super::fixtures;

/// The rendered system prompt and a step-3 message with two earlier steps.
fn prompt() -> (String, String) {
    let set = PromptSet::embedded().unwrap();
    let system = set
        .render(&CodeActSystem {
            tool_signatures: js_signatures(&select::<&str>(&[]).unwrap()),
            max_steps: 20,
            ..CodeActSystem::default()
        })
        .unwrap();
    let user = set
        .render(&CodeActUser {
            goal: "Turn Wi-Fi on".into(),
            step: 3,
            max_steps: 20,
            history: fixtures::history(),
            phone: fixtures::phone(),
            ui_state: fixtures::screen().into(),
            ..CodeActUser::default()
        })
        .unwrap();
    (system, user)
}

fn echo_of(system: &str, user: &str) -> PromptEcho {
    PromptEcho::new([system, user])
}

#[test]
fn a_reply_that_echoes_the_whole_prompt_runs_nothing() {
    let (system, user) = prompt();
    let echo = echo_of(&system, &user);
    let reply = format!("{system}\n\n{user}");
    let choice = choose_code(&reply, &echo);
    assert_eq!(choice.code, None, "{choice:?}");
    // Four example steps in the system prompt, two earlier steps in the message.
    assert_eq!(choice.copied(), 6, "{:?}", choice.ignored);
    assert_eq!(
        choice.summary().unwrap(),
        "ignored 6 code blocks copied from the prompt"
    );
    // The example that would end the task is among what was left out.
    assert!(
        choice
            .ignored
            .iter()
            .any(|b| b.first_line.starts_with("complete(true")),
        "{:?}",
        choice.ignored
    );
}

#[test]
fn an_echo_of_the_system_prompt_alone_or_of_one_earlier_step_runs_nothing() {
    let (system, user) = prompt();
    let echo = echo_of(&system, &user);
    assert_eq!(choose_code(&system, &echo).code, None);
    // One earlier step copied with its heading.
    let step = "### Step 2\n```js\ntap(9)\n```\nOutput: (nothing printed)\n";
    let choice = choose_code(step, &echo);
    assert_eq!(choice.code, None, "{choice:?}");
    assert_eq!(choice.copied(), 1);
}

#[test]
fn code_of_its_own_after_an_echo_runs_and_the_copies_are_named() {
    let (system, user) = prompt();
    let echo = echo_of(&system, &user);
    let reply =
        format!("{system}\n\nThe switch is element 5.\n```js\ntap(5)\nconsole.log('tapped')\n```");
    let choice = choose_code(&reply, &echo);
    assert_eq!(
        choice.code.as_deref(),
        Some("tap(5)\nconsole.log('tapped')")
    );
    assert_eq!(choice.copied(), 4);
    assert!(
        choice
            .ignored
            .iter()
            .all(|b| b.why == IgnoredWhy::CopiedFromPrompt)
    );
}

#[test]
fn a_model_may_repeat_an_example_or_an_earlier_action_of_its_own() {
    let (system, user) = prompt();
    let echo = echo_of(&system, &user);
    // The example's first step is the right first step of this goal too.
    let choice = choose_code(
        "Settings is closed.\n```js\nopen_app(\"Settings\")\n```",
        &echo,
    );
    assert_eq!(choice.code.as_deref(), Some("open_app(\"Settings\")"));
    assert!(choice.ignored.is_empty());
    // Retrying step 2's tap, introduced in its own words.
    let choice = choose_code("Try the tap again.\n```js\ntap(9)\n```", &echo);
    assert_eq!(choice.code.as_deref(), Some("tap(9)"));
    // A bare block is the model's own.
    assert_eq!(
        choose_code("```js\ntap(9)\n```", &echo).code.as_deref(),
        Some("tap(9)")
    );
}

#[test]
fn of_several_blocks_of_its_own_only_the_last_runs() {
    let echo = PromptEcho::new(["Reply with one ```js block."]);
    let reply = "First:\n```js\ntap(1)\n```\nThen:\n```js\ntap(2)\n```\n```json\n{\"a\": 1}\n```";
    let choice = choose_code(reply, &echo);
    assert_eq!(choice.code.as_deref(), Some("tap(2)"));
    assert_eq!(choice.ignored.len(), 2, "{:?}", choice.ignored);
    assert_eq!(choice.ignored[0].why, IgnoredWhy::NotLast);
    assert_eq!(choice.ignored[0].first_line, "tap(1)");
    assert_eq!(
        choice.ignored[1].why,
        IgnoredWhy::NotJavaScript("json".into())
    );
    assert_eq!(
        choice.summary().unwrap(),
        "ignored 1 earlier block (only the last block runs); 1 block not in JavaScript (json)"
    );
}
