//! Example-based tests of the Manager parser, one per model habit.

use super::*;
use crate::parse::plan::SubgoalKind;

fn texts(out: &ManagerOutput) -> Vec<(usize, &str)> {
    out.plan
        .iter()
        .map(|s| (s.index, s.text.as_str()))
        .collect()
}

#[test]
fn a_well_formed_reply() {
    let reply = "<thought>\nSettings is open; Wi-Fi is next.\n</thought>\n\n<add_memory>\nSettings opened at step 1.\n</add_memory>\n\n<plan>\n1. Tap \"Wi-Fi\"\n2. Turn Wi-Fi on if it is off\n3. DONE\n</plan>\n";
    let out = parse_manager(reply).unwrap();
    assert_eq!(out.thought, "Settings is open; Wi-Fi is next.");
    assert_eq!(out.memory, ["Settings opened at step 1."]);
    assert_eq!(
        texts(&out),
        [(1, "Tap \"Wi-Fi\""), (2, "Turn Wi-Fi on if it is off")]
    );
    assert_eq!(
        out.plan_text,
        "1. Tap \"Wi-Fi\"\n2. Turn Wi-Fi on if it is off\n3. DONE"
    );
    assert!(out.accomplished.is_none());
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.next_subgoal().unwrap().kind, SubgoalKind::Action);
}

#[test]
fn completion_with_every_spelling_of_success() {
    for (attr, success) in [
        ("success=\"true\"", true),
        ("success='false'", false),
        ("success=True", true),
        ("SUCCESS=\"No\"", false),
        ("success = \"yes\"", true),
    ] {
        let reply = format!(
            "<thought>ok</thought><request_accomplished {attr}>\nThe answer is 42.\n</request_accomplished>"
        );
        let out = parse_manager(&reply).unwrap();
        let done = out.accomplished.unwrap();
        assert_eq!(
            (done.success, done.answer.as_str()),
            (success, "The answer is 42."),
            "{attr}"
        );
    }
}

#[test]
fn completion_without_success_is_taken_as_true_with_a_warning() {
    let out = parse_manager("<request_accomplished>Sent.</request_accomplished>").unwrap();
    assert!(out.accomplished.unwrap().success);
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("no success attribute"))
    );
}

#[test]
fn an_unknown_success_value_is_an_error_for_the_model() {
    let err = parse_manager("<request_accomplished success=\"maybe\">?</request_accomplished>")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "expected success=\"true\" or success=\"false\" on <request_accomplished>, found success=\"maybe\""
    );
}

#[test]
fn missing_tags_are_an_error_for_the_model() {
    let err = parse_manager("I think we should open Settings.").unwrap_err();
    assert!(err.to_string().ends_with("found no tags at all"), "{err}");
    let err = parse_manager("<thought>hmm</thought>").unwrap_err();
    assert!(err.to_string().ends_with("found only <thought>"), "{err}");
    let err =
        parse_manager("<thought>hmm</thought><direct_response> </direct_response>").unwrap_err();
    assert!(
        err.to_string()
            .ends_with("found only <thought>, an empty <direct_response>"),
        "{err}"
    );
    let err = parse_manager("<plan>\n1. DONE\n</plan>").unwrap_err();
    assert!(
        err.to_string().ends_with("found a <plan> without subgoals"),
        "{err}"
    );
}

#[test]
fn stray_prose_fences_and_case_are_ignored() {
    let reply = "Sure! Here is my answer:\n```xml\n<THOUGHT>Look first.</THOUGHT>\n<Plan>\n- Swipe up\n</Plan>\n```\nHope that helps.";
    let out = parse_manager(reply).unwrap();
    assert_eq!(out.thought, "Look first.");
    assert_eq!(texts(&out), [(1, "Swipe up")]);
}

#[test]
fn unclosed_tags_end_at_the_next_tag_or_the_end() {
    let out = parse_manager("<thought>Open the app\n<plan>\n1. Open Notes\n2. Tap New").unwrap();
    assert_eq!(out.thought, "Open the app");
    assert_eq!(texts(&out), [(1, "Open Notes"), (2, "Tap New")]);
    assert!(
        out.warnings
            .contains(&"<thought> was not closed".to_owned())
    );
    assert!(out.warnings.contains(&"<plan> was not closed".to_owned()));
}

#[test]
fn repeated_tags() {
    let reply = "<thought>one</thought><thought>two</thought><add_memory>a</add_memory><add_memory>b</add_memory><add_memory> </add_memory><plan>1. old</plan><plan>1. new</plan>";
    let out = parse_manager(reply).unwrap();
    assert_eq!(out.thought, "one\n\ntwo");
    assert_eq!(out.memory, ["a", "b"]);
    assert_eq!(texts(&out), [(1, "new")]);
    assert!(
        out.warnings
            .contains(&"2 <plan> tags given; the last one is used".to_owned())
    );
}

#[test]
fn numbering_styles_and_continuations() {
    let reply = "<plan>\n1) Open Settings\n   then wait for it\n2. Tap Network\n- Tap Wi-Fi\nStep 4: Turn it on\n</plan>";
    let out = parse_manager(reply).unwrap();
    assert_eq!(
        texts(&out),
        [
            (1, "Open Settings then wait for it"),
            (2, "Tap Network"),
            (3, "Tap Wi-Fi"),
            (4, "Turn it on")
        ]
    );
    let out = parse_manager("<plan>\nOpen Settings\nTap Wi-Fi\n</plan>").unwrap();
    assert_eq!(texts(&out), [(1, "Open Settings"), (2, "Tap Wi-Fi")]);
}

#[test]
fn script_blocks_are_one_subgoal_each() {
    let reply = "<plan>\n1. Open YouTube\n2. <script>\nSend the title to https://webhook.site/abc as JSON {\"title\": \"x\"}\n</script>\n3. Go home\n<script>Fetch the weather\n</plan>";
    let out = parse_manager(reply).unwrap();
    let kinds: Vec<&SubgoalKind> = out.plan.iter().map(|s| &s.kind).collect();
    assert_eq!(
        kinds,
        [
            &SubgoalKind::Action,
            &SubgoalKind::Script(
                "Send the title to https://webhook.site/abc as JSON {\"title\": \"x\"}".into()
            ),
            &SubgoalKind::Action,
            &SubgoalKind::Script("Fetch the weather".into()),
        ]
    );
    assert_eq!(out.plan[2].index, 3);
    assert!(out.warnings.contains(&"<script> was not closed".to_owned()));
}

#[test]
fn a_script_first_routes_to_the_scripter() {
    let out =
        parse_manager("<plan><script>Download the release notes</script>\n1. DONE</plan>").unwrap();
    assert_eq!(
        out.next_subgoal().unwrap().kind,
        SubgoalKind::Script("Download the release notes".into())
    );
}

#[test]
fn text_tasks() {
    let reply = "<plan>\n1. Tap the message field\nTEXT_TASK: Add \"Hello\" at the beginning\n2. - TEXT_TASK: Replace brown with red\n3. Send\n</plan>";
    let out = parse_manager(reply).unwrap();
    assert_eq!(
        out.plan.iter().map(|s| s.kind.clone()).collect::<Vec<_>>(),
        [
            SubgoalKind::Action,
            SubgoalKind::TextTask("Add \"Hello\" at the beginning".into()),
            SubgoalKind::TextTask("Replace brown with red".into()),
            SubgoalKind::Action,
        ]
    );
    assert_eq!(
        out.plan[1].text,
        "TEXT_TASK: Add \"Hello\" at the beginning"
    );
    assert_eq!(out.plan[2].text, "TEXT_TASK: Replace brown with red");
}

#[test]
fn plan_and_completion_together_keep_both() {
    let out = parse_manager(
        "<plan>1. Go home</plan><request_accomplished success=\"true\">Done</request_accomplished>",
    )
    .unwrap();
    assert_eq!(out.plan.len(), 1);
    assert!(out.accomplished.is_some());
}

#[test]
fn self_closing_completion_has_an_empty_answer() {
    let out = parse_manager("<request_accomplished success=\"false\"/>").unwrap();
    assert_eq!(
        out.accomplished,
        Some(Accomplished {
            success: false,
            answer: String::new()
        })
    );
}

#[test]
fn hostile_replies_stay_linear() {
    let start = std::time::Instant::now();
    let mut reply = "<plan>1. a\n".repeat(20_000);
    reply.push_str(&"<thought>".repeat(20_000));
    reply.push_str(&"</plan ".repeat(20_000));
    let out = parse_manager(&reply).unwrap();
    assert_eq!(out.plan.len(), 1);
    assert!(
        out.warnings
            .contains(&"20000 <plan> tags given; the last one is used".to_owned())
    );
    let scripts = format!("<plan>{}</plan>", "<script>x".repeat(20_000));
    assert_eq!(parse_manager(&scripts).unwrap().plan.len(), 20_000);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_help_request_with_its_reason_as_an_attribute() {
    let reply = "<thought>A QR code fills the screen.</thought>\n<request_human_help reason=\"The app asks to scan a QR code\">\nScan the QR code on the phone's screen with the app on your computer, then reply \"done\".\n</request_human_help>";
    let out = parse_manager(reply).unwrap();
    assert_eq!(
        out.human_help,
        Some(HumanHelp {
            reason: "The app asks to scan a QR code".into(),
            instructions:
                "Scan the QR code on the phone's screen with the app on your computer, then reply \"done\"."
                    .into(),
        })
    );
    assert!(out.plan.is_empty() && out.accomplished.is_none());
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn a_help_request_without_the_attribute_takes_its_first_line_as_the_reason() {
    let out = parse_manager(
        "```xml\n<REQUEST_HUMAN_HELP>\nReason: a CAPTCHA blocks the login\nInstructions: solve it on the phone and reply when done\n```\n",
    )
    .unwrap();
    let help = out.human_help.unwrap();
    assert_eq!(help.reason, "a CAPTCHA blocks the login");
    assert_eq!(
        help.instructions,
        "solve it on the phone and reply when done"
    );
    assert!(
        out.warnings
            .contains(&"<request_human_help> was not closed".to_owned())
    );
    let out = parse_manager("<request_human_help>Which account should I use?</request_human_help>")
        .unwrap();
    assert_eq!(
        out.human_help,
        Some(HumanHelp {
            reason: "Which account should I use?".into(),
            instructions: String::new(),
        })
    );
    // With the attribute in any case and quoting, the whole body is the instructions.
    let out =
        parse_manager("<request_human_help Reason='fingerprint'>Touch the sensor.\nThen reply.</request_human_help>")
            .unwrap();
    let help = out.human_help.unwrap();
    assert_eq!(help.reason, "fingerprint");
    assert_eq!(help.instructions, "Touch the sensor.\nThen reply.");
}

#[test]
fn an_empty_help_request_is_not_a_decision() {
    for reply in [
        "<request_human_help></request_human_help>",
        "<request_human_help reason=\"\"/>",
        "<request_human_help reason=\" \">\n\n</request_human_help>",
    ] {
        let err = parse_manager(reply).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("found only an empty <request_human_help>"),
            "{reply}: {err}"
        );
    }
    let out = parse_manager("<request_human_help/><plan>1. Go back</plan>").unwrap();
    assert!(out.human_help.is_none());
    assert!(
        out.warnings
            .iter()
            .any(|w| w.starts_with("an empty <request_human_help> was ignored")),
        "{:?}",
        out.warnings
    );
}

#[test]
fn a_direct_response_is_a_decision() {
    let reply = "<thought>The user asks what I did before; the conversation says it.</thought>\n<direct_response>\nI turned Wi-Fi on and the network was \"Home\".\n</direct_response>";
    let out = parse_manager(reply).unwrap();
    assert_eq!(
        out.direct_response.as_deref(),
        Some("I turned Wi-Fi on and the network was \"Home\".")
    );
    assert!(out.plan.is_empty() && out.accomplished.is_none() && out.human_help.is_none());
    let out = parse_manager("Sure:\n```\n<Direct_Response>It was 22 degrees.\n```\n").unwrap();
    assert_eq!(out.direct_response.as_deref(), Some("It was 22 degrees."));
    let out = parse_manager(
        "<direct_response>first</direct_response><direct_response>second</direct_response>",
    )
    .unwrap();
    assert_eq!(out.direct_response.as_deref(), Some("second"));
    assert!(
        out.warnings
            .contains(&"2 <direct_response> tags given; the last one is used".to_owned())
    );
}

#[test]
fn the_new_tags_end_an_unclosed_plan() {
    let out = parse_manager("<plan>\n1. Open Settings\n<request_human_help reason=\"pin\">Unlock the phone</request_human_help>").unwrap();
    assert_eq!(texts(&out), [(1, "Open Settings")]);
    assert_eq!(out.human_help.unwrap().instructions, "Unlock the phone");
}

#[test]
fn an_unclosed_tag_in_a_fence_leaves_the_fence_out() {
    let out = parse_manager("```xml\n<thought>Notes first.</thought>\n<plan>\n1. Open Notes\n```")
        .unwrap();
    assert_eq!(texts(&out), [(1, "Open Notes")]);
    assert_eq!(out.plan_text, "1. Open Notes");
}
