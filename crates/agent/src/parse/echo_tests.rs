use super::*;

#[test]
fn copies_need_evidence_beyond_equal_code() {
    let echo = PromptEcho::new([
        "Example:\nStep 1 (the home screen):\n```js\nopen_app(\"Settings\")\n```\n",
    ]);
    // With the example's heading: copied.
    let copied = choose_code(
        "Step 1 (the home screen):\n```js\nopen_app(\"Settings\")\n```",
        &echo,
    );
    assert_eq!(copied.code, None);
    // Whitespace does not hide a copy.
    let spaced = choose_code(
        "Step 1  (the home screen):\n```js\n  open_app(\"Settings\")  \n```",
        &echo,
    );
    assert_eq!(spaced.code, None);
    // In the model's own words: its own.
    let own = choose_code(
        "I open Settings.\n```js\nopen_app(\"Settings\")\n```",
        &echo,
    );
    assert_eq!(own.code.as_deref(), Some("open_app(\"Settings\")"));
    // No code at all.
    let none = choose_code("Nothing to do.", &echo);
    assert_eq!((none.summary(), none.code), (None, None));
}

#[test]
fn a_long_part_of_the_prompt_counts_as_a_copy() {
    let prompt = "Step 3 (the switch is off):\n```js\nconst wifi = ui_state.find(e => e.text === \"Wi-Fi\")\nif (wifi) tap(wifi.index)\n```";
    let echo = PromptEcho::new([prompt]);
    let reply = "Step 3 (the switch is off):\n```js\nconst wifi = ui_state.find(e => e.text === \"Wi-Fi\")\n```";
    assert_eq!(choose_code(reply, &echo).code, None);
}

#[test]
fn the_model_may_repeat_its_own_earlier_words_and_code() {
    let shown = "## Earlier steps\n### Step 1\nScroll down to see more contacts.\n```js\nswipe(540, 1800, 540, 600)\n```\nOutput: (nothing printed)\n";
    let reply = "Scroll down to see more contacts.\n```js\nswipe(540, 1800, 540, 600)\n```";
    // Without knowing the words are the model's own, its heading looks copied.
    assert_eq!(choose_code(reply, &PromptEcho::new([shown])).code, None);
    let echo = PromptEcho::new([shown]).with_own_words([
        "Scroll down to see more contacts.",
        "swipe(540, 1800, 540, 600)",
    ]);
    assert_eq!(
        choose_code(reply, &echo).code.as_deref(),
        Some("swipe(540, 1800, 540, 600)")
    );
    // Copied with the prompt's own heading, it is still a copy.
    let copied = "### Step 1\n```js\nswipe(540, 1800, 540, 600)\n```";
    assert_eq!(choose_code(copied, &echo).code, None);
}

#[test]
fn a_shared_prompt_text_is_read_once_and_answers_like_a_new_one() {
    let system = "Example:\nStep 1 (the home screen):\n```js\nopen_app(\"Settings\")\n```\n";
    let a = EchoText::shared(system);
    assert!(Arc::ptr_eq(&a, &EchoText::shared(system)));
    let reply = "Step 1 (the home screen):\n```js\nopen_app(\"Settings\")\n```";
    let shared = PromptEcho::of([a, Arc::new(EchoText::new("## Goal\nopen settings"))]);
    let fresh = PromptEcho::new([system, "## Goal\nopen settings"]);
    assert_eq!(choose_code(reply, &shared), choose_code(reply, &fresh));
    assert_eq!(choose_code(reply, &shared).code, None);
}

#[test]
fn what_a_copy_brought_is_not_the_model_s_own_prose() {
    let echo = PromptEcho::new([
        "Example:\nStep 4 (the switch is checked):\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```\n",
    ]);
    // Only a copy: nothing of the model's own, not even the words before it.
    let copy = "Bluetooth must go off.\nStep 4 (the switch is checked):\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```";
    let choice = choose_code(copy, &echo);
    assert_eq!((choice.code, choice.own_prose.as_str()), (None, ""));
    assert!(choice.prose.contains("Step 4"), "the user still reads it");
    // A copy, then code of the model's own: its own words stay, the copied heading goes.
    let mixed = format!("{copy}\nNow the real step: the switch is element 3.\n```js\ntap(3)\n```");
    let choice = choose_code(&mixed, &echo);
    assert_eq!(choice.code.as_deref(), Some("tap(3)"));
    assert_eq!(
        choice.own_prose,
        "Now the real step: the switch is element 3."
    );
    // A reply of the model's own keeps its prose.
    let own = choose_code("The switch is element 3.\n```js\ntap(3)\n```", &echo);
    assert_eq!(own.own_prose, "The switch is element 3.");
}

#[test]
fn a_copied_heading_counts_even_when_the_model_s_own_thought_follows_it() {
    let shown = "## Earlier steps\n### Step 1\nScroll down to see more contacts.\n```js\nswipe(540, 1800, 540, 600)\n```\nOutput: (nothing printed)\n";
    let echo = PromptEcho::new([shown]).with_own_words([
        "Scroll down to see more contacts.",
        "swipe(540, 1800, 540, 600)",
    ]);
    // The history echoed: the heading, then the model's own earlier thought and code.
    let echoed =
        "### Step 1\nScroll down to see more contacts.\n```js\nswipe(540, 1800, 540, 600)\n```";
    let choice = choose_code(echoed, &echo);
    assert_eq!(choice.code, None, "{choice:?}");
    assert_eq!(choice.copied(), 1);
    // Any line before the block counts, with blank lines and more between.
    let spread = "### Step 1\n\nI keep going.\n\nScroll down to see more contacts.\n```js\nswipe(540, 1800, 540, 600)\n```";
    assert_eq!(choose_code(spread, &echo).code, None);
    // Only the lines since the reply's block before count: a heading before an earlier block
    // says nothing of a later one.
    let later = "### Step 1\n```js\nconsole.log(1)\n```\nScroll down to see more contacts.\n```js\nswipe(540, 1800, 540, 600)\n```";
    assert_eq!(
        choose_code(later, &echo).code.as_deref(),
        Some("swipe(540, 1800, 540, 600)")
    );
}

#[test]
fn a_prompt_line_shown_elsewhere_is_no_evidence() {
    let system = "Example:\nGoal: \"Turn Wi-Fi on.\"\n\nStep 1 (the home screen):\n```js\nopen_app(\"Settings\")\n```\n\nStep 2 (Settings; [4] is \"Network & internet\"):\n```js\ntap(4)\n```\n";
    let user = "## Goal\nTurn off Bluetooth\n\n## Screen\n[4] TextView \"Bluetooth\" [0,800][1080,980] clickable\n";
    let echo = PromptEcho::new([system, user]);
    // The model restates its goal, or quotes the screen, then writes an example's code for
    // its own reasons: it runs.
    let goal = "Turn off Bluetooth\nSettings first.\n```js\nopen_app(\"Settings\")\n```";
    assert_eq!(
        choose_code(goal, &echo).code.as_deref(),
        Some("open_app(\"Settings\")")
    );
    let screen = "[4] TextView \"Bluetooth\" [0,800][1080,980] clickable\nThat is the switch.\n```js\ntap(4)\n```";
    assert_eq!(choose_code(screen, &echo).code.as_deref(), Some("tap(4)"));
    // With a line the prompt shows before that code, it is a copy, wherever the line stands.
    let copied = "Step 2 (Settings; [4] is \"Network & internet\"):\nI tap it.\n```js\ntap(4)\n```";
    assert_eq!(choose_code(copied, &echo).code, None);
    let example_goal =
        "Goal: \"Turn Wi-Fi on.\"\nSettings first.\n```js\nopen_app(\"Settings\")\n```";
    assert_eq!(choose_code(example_goal, &echo).code, None);
}

#[test]
fn an_example_that_ends_the_task_never_runs_whatever_introduces_it() {
    let system = "Example:\nStep 1 (the home screen):\n```js\nopen_app(\"Settings\")\n```\n\nStep 4 (the switch is checked):\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```\n";
    let history = "### Step 1\n```js\nif (done) complete(true, \"Bluetooth is off.\")\n```\n";
    let echo = PromptEcho::new([system, history])
        .with_own_words(["if (done) complete(true, \"Bluetooth is off.\")"])
        .with_task_end("complete");
    let fresh = "Bluetooth is off, so I am done.\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```";
    let choice = choose_code(fresh, &echo);
    assert_eq!(choice.code, None, "{choice:?}");
    assert_eq!(choice.ignored[0].why, IgnoredWhy::ExampleEnd);
    assert_eq!(
        choice.ignored[0].first_line,
        "complete(true, \"Wi-Fi is on.\")"
    );
    assert_eq!((choice.copied(), choice.example_ends()), (1, 1));
    assert_eq!(
        choice.summary().unwrap(),
        "ignored 1 block copied from the prompt's example that would end the task with the example's answer"
    );
    // Without a task end named, the evidence rule alone applies: a fresh lead-in runs it.
    let plain = PromptEcho::new([system]);
    assert!(choose_code(fresh, &plain).code.is_some());
    // The example's other blocks keep the evidence rule.
    let open = "Settings first.\n```js\nopen_app(\"Settings\")\n```";
    assert!(choose_code(open, &echo).code.is_some());
    // The model's own ending, repeated, and an ending of its own wording run.
    let again = "Try again.\n```js\nif (done) complete(true, \"Bluetooth is off.\")\n```";
    assert!(choose_code(again, &echo).code.is_some());
    let own = "Done.\n```js\ncomplete(true, \"Bluetooth is off.\")\n```";
    assert!(choose_code(own, &echo).code.is_some());
}

#[test]
fn a_call_is_the_function_s_name_then_a_parenthesis() {
    assert!(calls("complete(true, 'x')", "complete"));
    assert!(calls("if (a) complete (false, 'x')", "complete"));
    assert!(calls("x;complete(true)", "complete"));
    assert!(!calls("incomplete(true)", "complete"));
    assert!(!calls("task.complete(true)", "complete"));
    assert!(!calls("const complete_x = 1", "complete"));
    assert!(!calls("console.log('complete')", "complete"));
}
