//! Unit tests of the keyboard choice, the chunking and the shell steps of typing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

#[test]
fn the_companion_is_preferred_then_adbkeyboard_then_input_text() {
    let latin = "com.android.inputmethod.latin/.LatinIME\n";
    assert_eq!(parse_imes(latin), Keyboard::InputText);
    assert_eq!(
        parse_imes(&format!("{latin}{ADB_KEYBOARD_IME}\n")),
        Keyboard::AdbKeyboard
    );
    assert_eq!(
        parse_imes(&format!("{ADB_KEYBOARD_IME}\n{COMPANION_IME}\n{latin}")),
        Keyboard::Companion
    );
    assert_eq!(parse_imes("error: closed"), Keyboard::InputText);
}

#[test]
fn chunks_cut_on_characters_and_keep_everything() {
    let text = "aé你👍🏽".repeat(50);
    for max in [1, 2, 3, 5, 64] {
        let parts = chunks(&text, max);
        assert_eq!(parts.concat(), text, "max {max}");
        assert!(
            parts.iter().all(|p| p.len() <= max.max(4) && !p.is_empty()),
            "max {max}"
        );
    }
    assert!(chunks("", 10).is_empty());
}

#[test]
fn steps_send_lines_through_the_keyboard_and_breaks_as_enter() {
    let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let companion = ime_steps(Keyboard::Companion, "жа\n\n你", true);
    assert_eq!(
        companion,
        vec![
            format!(
                "content insert --uri content://com.mobilerun.portal/keyboard/input --bind base64_text:s:{} --bind clear:b:true",
                b("жа")
            ),
            "input keyevent 66".to_owned(),
            "input keyevent 66".to_owned(),
            format!(
                "content insert --uri content://com.mobilerun.portal/keyboard/input --bind base64_text:s:{} --bind clear:b:false",
                b("你")
            ),
        ]
    );
    // A text starting with a break, or empty, still clears first.
    let first = ime_steps(Keyboard::Companion, "\nx", true);
    assert!(
        first[0].ends_with("base64_text:s: --bind clear:b:true"),
        "{first:?}"
    );
    assert_eq!(ime_steps(Keyboard::Companion, "", true).len(), 1);
    assert!(ime_steps(Keyboard::Companion, "", false).is_empty());
    let adb = ime_steps(Keyboard::AdbKeyboard, "a b", true);
    assert_eq!(
        adb,
        vec![
            "am broadcast -a ADB_CLEAR_TEXT".to_owned(),
            format!("am broadcast -a ADB_INPUT_B64 --es msg {}", b("a b")),
        ]
    );
    // Long text is cut, and the pieces go in few commands of bounded size.
    let long = "é".repeat(10_000);
    let steps = ime_steps(Keyboard::AdbKeyboard, &long, false);
    assert_eq!(steps.len(), 7);
    let joined = scripts(&steps);
    assert!(joined.len() < steps.len());
    assert!(joined.iter().all(|s| s.len() <= SCRIPT_BYTES));
}

#[test]
fn the_previous_keyboard_is_read_and_odd_values_are_not_trusted() {
    let p = parse_previous(
        "com.android.inputmethod.latin/.LatinIME\ncom.android.inputmethod.latin/.LatinIME:com.x/.Y\nInput method ...",
    );
    assert_eq!(
        p.selected.as_deref(),
        Some("com.android.inputmethod.latin/.LatinIME")
    );
    assert_eq!(p.enabled.len(), 2);
    let p = parse_previous("null\nnull\n");
    assert_eq!(p.selected, None);
    assert!(p.enabled.is_empty());
    assert_eq!(parse_previous("a/b; rm -rf /\n").selected, None);
    assert_eq!(sh_quote("it's"), "'it'\\''s'");
}
