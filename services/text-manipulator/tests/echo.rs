//! A model that copies its prompt back, over several attempts, as a table of cases: what it
//! copied never runs and never becomes the model's own turn or "your program" in the retry it
//! is shown; what it wrote itself runs, a repeat of its own program included. Each case checks
//! what a user would: whether the edit happened and what the phone's field holds, the program
//! that ran, and what the model reads at each retry.
use crate::rig::*;

/// The system prompt's examples, as written there.
const HI_SAM: &str = "input_text(\"Hi Sam,\\n\" + ORIGINAL)";
const BULLETS: &str = "const items = ORIGINAL.split(\",\").map(s => s.trim()).filter(s => s.length > 0)\ninput_text(items.map(s => \"- \" + s).join(\"\\n\"))";
const HI_SAM_HEADING: &str = "Edit: put \"Hi Sam,\" on its own line at the beginning.";
const BULLETS_HEADING: &str = "Edit: turn the comma-separated items into a bulleted list.";
/// Programs of the model's own.
const BROKEN: &str = "input_text(ORIGINAL.toUpperCase() +)";
const SHOUT: &str = "input_text(ORIGINAL.toUpperCase())";
/// What the model reads after a reply whose code was copied.
const TOLD_COPIED: &str = "nothing ran: the code in your last reply was copied from this prompt";

fn block(code: &str) -> String {
    format!("```js\n{code}\n```")
}

struct Case {
    name: &'static str,
    subgoal: &'static str,
    /// The model's replies, one an attempt; the last one is repeated for any later attempt.
    replies: Vec<String>,
    max_retries: u32,
    success: bool,
    /// What the phone's field holds afterwards (it held "milk, eggs").
    field: &'static str,
    attempts: u32,
    code_ran: String,
    /// How the failure reason ends, for a failed edit.
    error: &'static str,
    /// (attempt, the model's own turn shown before the retry; `None`: the retry is one user
    /// message, there being nothing of the model's own to show).
    turns: Vec<(u32, Option<String>)>,
    /// (attempt, what the retry's last message says).
    told: &'static [(u32, &'static str)],
    /// A line a copy brought: never in a turn shown as the model's.
    copied_line: &'static str,
}

/// The messages of the model's `i`-th request, as (role, text).
fn messages(rig: &Rig, i: usize) -> Vec<(String, String)> {
    let body = rig.llm.requests()[i].json();
    let all = body["messages"].as_array().unwrap();
    all.iter()
        .map(|m| {
            let text = match &m["content"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap().to_owned(), text)
        })
        .collect()
}

async fn check(case: &Case) {
    let name = case.name;
    let rig = rig(case.replies.iter().map(|r| reply(r)).collect()).await;
    if let Some(last) = case.replies.last() {
        rig.llm.set_fallback(reply(last));
    }
    rig.open(NOTES).await;
    rig.type_into("note_input", "milk, eggs", false).await;
    let mut request = rig.request(case.subgoal, true);
    request.max_retries = case.max_retries;
    let response = rig.manipulate(request).await;
    let result = result(&response);
    assert_eq!(result.success, case.success, "{name}: {result:?}");
    if !case.success {
        let error = result.error.as_deref().unwrap_or_default();
        assert!(error.ends_with(case.error), "{name}: {error}");
    }
    assert_eq!(rig.element("note_input").await.text, case.field, "{name}");
    assert_eq!(response.attempts, case.attempts, "{name}");
    assert_eq!(response.code_ran, case.code_ran, "{name}");
    assert_eq!(rig.llm.request_count(), case.attempts as usize, "{name}");
    for (attempt, turn) in &case.turns {
        let sent = messages(&rig, *attempt as usize - 1);
        let roles: Vec<&str> = sent.iter().map(|(r, _)| r.as_str()).collect();
        match turn {
            Some(said) => {
                assert_eq!(roles, ["user", "assistant", "user"], "{name}: {attempt}");
                assert_eq!(&sent[1].1, said, "{name}: attempt {attempt}");
            }
            None => assert_eq!(roles, ["user"], "{name}: attempt {attempt}"),
        }
    }
    for (attempt, text) in case.told {
        let last = rig.last_message(*attempt as usize - 1);
        assert!(last.contains(text), "{name}: attempt {attempt}:\n{last}");
    }
    for i in 0..case.attempts as usize {
        for (role, text) in messages(&rig, i) {
            if role == "assistant" {
                assert!(!text.contains(case.copied_line), "{name}: {text}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn echoes_over_several_attempts_run_nothing_copied_and_everything_of_the_model_s_own() {
    let hi_sam_echo = format!("{HI_SAM_HEADING}\n{}", block(HI_SAM));
    let bullets_echo = format!("{BULLETS_HEADING}\n{}", block(BULLETS));
    let broken_echo = format!("## Your program\n{}", block(BROKEN));
    let own_broken = format!("I upper-case the text.\n{}", block(BROKEN));
    let cases = [
        Case {
            name: "an example with its heading, every attempt",
            subgoal: "Shout it",
            replies: vec![hi_sam_echo.clone()],
            max_retries: 2,
            success: false,
            field: "milk, eggs",
            attempts: 3,
            code_ran: String::new(),
            error: "no usable program after 3 attempt(s); the last failed: nothing ran: the code in your last reply was copied from this prompt: write your own program in one ```js block",
            turns: vec![(2, None), (3, None)],
            told: &[
                (2, "Nothing ran, and the field was not changed."),
                (2, TOLD_COPIED),
                (3, TOLD_COPIED),
            ],
            copied_line: HI_SAM_HEADING,
        },
        // The text manipulator has no task-ending call: an example under a lead-in of the
        // model's own is the model's (the evidence rule), as for an edit the example fits.
        Case {
            name: "an example copied twice, then under a lead-in of the model's own",
            subgoal: "Make it a bulleted list",
            replies: vec![
                bullets_echo.clone(),
                bullets_echo.clone(),
                format!("The items are comma-separated.\n{}", block(BULLETS)),
            ],
            max_retries: 2,
            success: true,
            field: "- milk\n- eggs",
            attempts: 3,
            code_ran: BULLETS.into(),
            error: "",
            turns: vec![(2, None), (3, None)],
            told: &[(3, TOLD_COPIED)],
            copied_line: BULLETS_HEADING,
        },
        Case {
            name: "its own failed program echoed under ## Your program, twice",
            subgoal: "Shout it",
            replies: vec![
                own_broken.clone(),
                broken_echo.clone(),
                broken_echo,
                block(SHOUT),
            ],
            max_retries: 3,
            success: true,
            field: "MILK, EGGS",
            attempts: 4,
            code_ran: SHOUT.into(),
            error: "",
            turns: (2..=4).map(|a| (a, Some(own_broken.clone()))).collect(),
            told: &[
                (
                    2,
                    "## Your program\n```js\ninput_text(ORIGINAL.toUpperCase() +)\n```",
                ),
                (3, TOLD_COPIED),
                (
                    3,
                    "## Your program\n```js\ninput_text(ORIGINAL.toUpperCase() +)\n```",
                ),
                (3, "SyntaxError"),
                (4, TOLD_COPIED),
                (4, "SyntaxError"),
            ],
            copied_line: "## Your program",
        },
        // The negative control: the same words and program again are the model's own, and
        // run (and fail again) rather than being refused as a copy.
        Case {
            name: "the model repeats its own program in its own words",
            subgoal: "Shout it",
            replies: vec![own_broken.clone(), own_broken.clone(), block(SHOUT)],
            max_retries: 2,
            success: true,
            field: "MILK, EGGS",
            attempts: 3,
            code_ran: SHOUT.into(),
            error: "",
            turns: vec![(2, Some(own_broken.clone())), (3, Some(own_broken.clone()))],
            told: &[
                (2, "Your program for this edit failed"),
                (3, "Your program for this edit failed"),
                (3, "SyntaxError"),
            ],
            copied_line: "## Your program",
        },
        Case {
            name: "a copied example, then a program of the model's own, three times",
            subgoal: "Shout it",
            replies: vec![
                format!("{bullets_echo}\n{own_broken}"),
                format!(
                    "{bullets_echo}\nNow without calling it.\n{}",
                    block("ORIGINAL.toUpperCase()")
                ),
                format!("{bullets_echo}\n{}", block(SHOUT)),
            ],
            max_retries: 2,
            success: true,
            field: "MILK, EGGS",
            attempts: 3,
            code_ran: SHOUT.into(),
            error: "",
            turns: vec![
                (2, Some(own_broken.clone())),
                (
                    3,
                    Some(format!(
                        "Now without calling it.\n{}",
                        block("ORIGINAL.toUpperCase()")
                    )),
                ),
            ],
            told: &[(2, "SyntaxError"), (3, "never called input_text")],
            copied_line: BULLETS_HEADING,
        },
    ];
    for case in &cases {
        check(case).await;
    }
}
