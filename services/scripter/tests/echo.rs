//! A model that copies its prompt back, over several scripter steps, as a table of cases: what
//! it copied never runs, at any step, and never becomes the model's own words in the history
//! it is shown; what it wrote itself runs, a repeat of its own step included. Each case checks
//! what a user would: the run's outcome and answer, the requests its scripts made (a webhook
//! on loopback counts them), what each step printed or why it ran nothing, and what the model
//! reads about each step next.
use droidmesh_llm::testkit::MockResponse;
use serde_json::json;

use crate::common::*;

/// What the model reads after a step whose code was copied.
const TOLD_COPIED: &str = "Error: nothing ran: the code in the reply was copied from this prompt (1 block): write one ```js block of your own, or the final answer without any code block";
/// The first line of the task, which brings an example of the request to make.
const TASK_LINE: &str =
    "POST the note 'Buy milk' to the notes webhook, with a request like this one:";
const THOUGHT: &str = "I post the note to the webhook.";

struct Case {
    name: &'static str,
    /// The model's replies, one a step; the last one is repeated for any later step.
    replies: Vec<String>,
    success: bool,
    /// The answer, or the failure reason after "3 steps in a row failed; the last: ".
    answer: &'static str,
    steps: u32,
    /// The requests the webhook received (method and path), in order.
    requests: &'static [&'static str],
    /// What each step with code printed, or "nothing ran" (the final answer's step has none).
    printed: &'static [&'static str],
    /// Steps that ran nothing because they copied: shown so at the steps after them.
    ran_nothing: &'static [u32],
    /// (step, what the next prompts show with it).
    told: &'static [(u32, &'static str)],
    /// A line a copy brought, and the steps it was in: never shown with those steps as the
    /// model's words.
    copied: Option<(&'static str, &'static [u32])>,
}

/// What the prompt of a later step shows of step `step`.
fn section(prompt: &str, step: u32) -> &str {
    let head = format!("### Step {step}\n");
    let Some(at) = prompt.find(&head) else {
        panic!("no {head:?} in {prompt}");
    };
    let rest = &prompt[at + head.len()..];
    let end = ["\n### Step ", "\nThis is step "]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

async fn check(case: &Case, hook_code: impl Fn(&str) -> String) {
    let name = case.name;
    let hook = target(vec![]).await;
    hook.set_fallback(MockResponse::json(201, &json!({"stored": true})));
    let port = hook.addr().port();
    let post = hook_code(&format!("http://127.0.0.1:{port}/hooks/notes"));
    let mut cfg = config();
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let replies: Vec<String> = case
        .replies
        .iter()
        .map(|r| {
            r.replace("{POST}", &post)
                .replace("{PORT}", &port.to_string())
        })
        .collect();
    let rig = rig_with(cfg, replies.iter().map(|r| reply(r)).collect()).await;
    if let Some(last) = replies.last() {
        rig.llm.set_fallback(reply(last));
    }
    let task = format!("{TASK_LINE}\n```js\n{post}\n```");
    let events = run(&rig, request(&task)).await;
    let f = finished(&events);
    assert_eq!(f.success, case.success, "{name}: {f:?}");
    let answer = match case.success {
        true => case.answer.to_owned(),
        false => format!("3 steps in a row failed; the last: {}", case.answer),
    };
    assert_eq!(f.answer, answer, "{name}");
    assert_eq!(f.steps, case.steps, "{name}: {f:?}");
    let got: Vec<String> = hook
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(got, case.requests, "{name}");
    let printed: Vec<String> = observations(&events)
        .into_iter()
        .map(|(output, error)| match error {
            Some(e) if e.starts_with("nothing ran") => "nothing ran".to_owned(),
            Some(e) => format!("error: {e}"),
            None => output,
        })
        .collect();
    assert_eq!(printed, case.printed, "{name}");
    for shown_at in 2..=case.steps {
        let (_, prompt) = prompts(&rig, shown_at as usize - 1);
        for step in 1..shown_at {
            let seen = section(&prompt, step);
            let nothing = case.ran_nothing.contains(&step);
            assert_eq!(
                seen.contains(TOLD_COPIED) && !seen.contains("```js\n"),
                nothing,
                "{name}: step {step} as shown at step {shown_at}:\n{seen}"
            );
            for (_, text) in case.told.iter().filter(|(s, _)| *s == step) {
                assert!(seen.contains(text), "{name}: step {step}:\n{seen}");
            }
            if let Some((line, _)) = case.copied.filter(|(_, s)| s.contains(&step)) {
                assert!(!seen.contains(line), "{name}: step {step}:\n{seen}");
            }
        }
    }
}

/// The step's POST to the webhook at `url`.
fn post(url: &str) -> String {
    format!(
        "const res = await fetch('{url}', {{ method: 'POST', json: {{ text: 'Buy milk' }} }});\nconsole.log('posted', res.status)"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn echoes_over_several_steps_run_nothing_copied_and_everything_of_the_model_s_own() {
    let own_post = format!("{THOUGHT}\n```js\n{{POST}}\n```");
    let echoed_step_1 = format!("### Step 1\n{own_post}");
    let read_back = "Now I read the notes back.\n```js\nconst back = await fetch('http://127.0.0.1:{PORT}/hooks/notes');\nconsole.log('read', back.status)\n```";
    let task_example = format!("{TASK_LINE}\n```js\n{{POST}}\n```");
    let cases = [
        Case {
            name: "the task's example with its heading, every step",
            replies: vec![task_example.clone()],
            success: false,
            answer: "nothing ran: the code in the reply was copied from this prompt (1 block): write one ```js block of your own, or the final answer without any code block",
            steps: 3,
            requests: &[],
            printed: &["nothing ran", "nothing ran", "nothing ran"],
            ran_nothing: &[1, 2],
            told: &[],
            copied: Some((TASK_LINE, &[1, 2])),
        },
        // The scripter has no task-ending call: an example under a lead-in of the model's
        // own is the model's (the evidence rule), after two copies that ran nothing.
        Case {
            name: "the task's example copied twice, then under a lead-in of the model's own",
            replies: vec![
                task_example.clone(),
                task_example,
                format!("I send the request the task shows.\n```js\n{{POST}}\n```"),
                "The note was posted.".into(),
            ],
            success: true,
            answer: "The note was posted.",
            steps: 4,
            requests: &["POST /hooks/notes"],
            printed: &["nothing ran", "nothing ran", "posted 201"],
            ran_nothing: &[1, 2],
            told: &[],
            copied: Some((TASK_LINE, &[1, 2])),
        },
        // The reported case: step 3 posted again, since step 2's heading had become the
        // model's; with the model's own thought under the heading, step 2 posted already.
        Case {
            name: "the history echoed under its ### Step heading, twice",
            replies: vec![
                own_post.clone(),
                echoed_step_1.clone(),
                echoed_step_1.clone(),
                "The note was posted once.".into(),
            ],
            success: true,
            answer: "The note was posted once.",
            steps: 4,
            requests: &["POST /hooks/notes"],
            printed: &["posted 201", "nothing ran", "nothing ran"],
            ran_nothing: &[2, 3],
            told: &[(1, THOUGHT)],
            copied: Some((THOUGHT, &[2, 3])),
        },
        // The negative control: the same words and code again are the model's own.
        Case {
            name: "the model repeats its own step in its own words",
            replies: vec![
                own_post.clone(),
                own_post.clone(),
                own_post.clone(),
                "The note was posted three times.".into(),
            ],
            success: true,
            answer: "The note was posted three times.",
            steps: 4,
            requests: &["POST /hooks/notes"; 3],
            printed: &["posted 201"; 3],
            ran_nothing: &[],
            told: &[(2, THOUGHT), (3, THOUGHT), (3, "Output:\nposted 201")],
            copied: None,
        },
        Case {
            name: "a copied step, then a block of the model's own, twice",
            replies: vec![
                own_post,
                format!("{echoed_step_1}\n{read_back}"),
                format!("{echoed_step_1}\n{read_back}"),
                "The note was posted once and read back twice.".into(),
            ],
            success: true,
            answer: "The note was posted once and read back twice.",
            steps: 4,
            requests: &["POST /hooks/notes", "GET /hooks/notes", "GET /hooks/notes"],
            printed: &["posted 201", "read 201", "read 201"],
            ran_nothing: &[],
            told: &[
                (2, "Now I read the notes back."),
                (2, "Output:\nread 201"),
                (2, "Note: ignored 1 code block copied from the prompt"),
            ],
            copied: Some(("### Step 1", &[2, 3])),
        },
    ];
    for case in &cases {
        check(case, post).await;
    }
}
