//! Example-based tests of code extraction, one per model habit.

use super::*;

fn blocks(text: &str) -> Vec<String> {
    extract_code(text).blocks
}

#[test]
fn tagged_blocks_of_every_javascript_spelling() {
    for tag in [
        "js",
        "javascript",
        "JavaScript",
        "JS",
        "ts",
        "typescript",
        "",
    ] {
        let text = format!("I will tap Wi-Fi.\n```{tag}\ntap(3)\n```\n");
        let out = extract_code(&text);
        assert_eq!(out.blocks, ["tap(3)"], "tag {tag:?}");
        assert_eq!(out.prose, "I will tap Wi-Fi.");
        assert!(!out.is_final_answer());
    }
}

#[test]
fn several_blocks_are_joined_in_order() {
    let text =
        "First:\n```js\nopen_app(\"Settings\")\n```\nThen:\n```javascript\ntap(3)\n```\nDone.";
    let out = extract_code(text);
    assert_eq!(out.blocks, ["open_app(\"Settings\")", "tap(3)"]);
    assert_eq!(out.code().unwrap(), "open_app(\"Settings\")\ntap(3)");
    assert_eq!(out.prose, "First:\nThen:\nDone.");
}

#[test]
fn no_code_is_a_final_answer() {
    let out = extract_code("  The battery is at 54%.\n");
    assert!(out.is_final_answer());
    assert_eq!(out.code(), None);
    assert_eq!(out.prose, "The battery is at 54%.");
}

#[test]
fn an_unclosed_fence_runs_to_the_end() {
    let out = extract_code("Scrolling.\n```js\nswipe(500, 1500, 500, 500)\nwait(500)");
    assert_eq!(out.blocks, ["swipe(500, 1500, 500, 500)\nwait(500)"]);
    assert_eq!(out.prose, "Scrolling.");
}

#[test]
fn indented_fences_lose_their_indentation() {
    let text = "1. Tap it:\n   ```js\n   if (ui_state.length > 0) {\n     tap(1)\n   }\n   ```\n";
    assert_eq!(blocks(text), ["if (ui_state.length > 0) {\n  tap(1)\n}"]);
}

#[test]
fn other_languages_stay_in_the_prose() {
    let text = "The answer:\n```json\n{\"temp\": 22}\n```\n```python\nclick(3)\n```";
    let out = extract_code(text);
    assert!(out.blocks.is_empty());
    assert_eq!(out.ignored_languages, ["json", "python"]);
    assert!(out.prose.contains("{\"temp\": 22}"));
    assert!(out.prose.contains("```python"));
}

#[test]
fn a_fence_glued_to_the_last_line_closes_the_block() {
    let out = extract_code("```js\ntap(1)\ncomplete(true, \"done\")```\nBye");
    assert_eq!(out.blocks, ["tap(1)\ncomplete(true, \"done\")"]);
    assert_eq!(out.prose, "Bye");
}

#[test]
fn one_line_blocks() {
    assert_eq!(blocks("Do it:\n```tap(3)``` now"), ["tap(3)"]);
    assert!(blocks("Mid-line ```tap(3)``` is prose").is_empty());
    assert_eq!(blocks("```js back()```"), ["back()"]);
    assert!(blocks("```json {\"a\": 1}```").is_empty());
}

#[test]
fn longer_fences_and_tildes() {
    assert_eq!(
        blocks("````js\nconst s = \"```\";\n````"),
        ["const s = \"```\";"]
    );
    assert_eq!(blocks("~~~javascript\nhome()\n~~~"), ["home()"]);
}

#[test]
fn a_new_tagged_fence_closes_a_forgotten_one() {
    assert_eq!(
        blocks("```js\ntap(1)\n```js\ntap(2)\n```"),
        ["tap(1)", "tap(2)"]
    );
}

#[test]
fn blank_blocks_are_dropped() {
    let out = extract_code("Nothing to run:\n```js\n\n```\n");
    assert!(out.is_final_answer());
}

#[test]
fn carriage_returns_are_tolerated() {
    assert_eq!(blocks("Tap:\r\n```js\r\ntap(2)\r\n```\r\n"), ["tap(2)"]);
}

#[test]
fn code_elements_count_only_at_line_start_and_without_fences() {
    let out = extract_code("Next step:\n<code>\ntap(4)\n</code>\n");
    assert_eq!(out.blocks, ["tap(4)"]);
    assert_eq!(out.prose, "Next step:");
    let out = extract_code("<code lang=\"js\">back()");
    assert_eq!(out.blocks, ["back()"]);
    let out = extract_code("The answer uses <code>ui_state</code> as shown.");
    assert!(out.is_final_answer());
    let out = extract_code("<code>x()</code>\n```js\ny()\n```");
    assert_eq!(out.blocks, ["y()"]);
}

#[test]
fn final_messages_carry_their_status() {
    let ok = final_message("Fetched: the temperature is 22 C.");
    assert!(ok.success);
    assert_eq!(ok.message, "Fetched: the temperature is 22 C.");
    let ok = final_message("SUCCESS: posted, status 200");
    assert_eq!(
        (ok.success, ok.message.as_str()),
        (true, "posted, status 200")
    );
    for text in [
        "FAILED: timeout",
        "**Failed:** timeout",
        "error: timeout",
        "Failure: timeout",
    ] {
        let failed = final_message(text);
        assert_eq!(
            (failed.success, failed.message.as_str()),
            (false, "timeout"),
            "{text}"
        );
    }
    assert!(final_message("Errors were fixed; all good.").success);
}
