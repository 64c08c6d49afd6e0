//! Tests of loop detection: repeats on one screen, screens that change, what counts, words.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use serde_json::json;

use super::*;

fn element(index: u32, text: &str) -> UiElement {
    UiElement {
        index,
        text: text.into(),
        class_name: "android.widget.TextView".into(),
        bounds: [0, 100 * index as i32, 1080, 100 * index as i32 + 90],
        clickable: true,
        ..UiElement::default()
    }
}

/// A screen with a counter that reads `n`.
fn counter(n: u32) -> ScreenPrint {
    let elements = [element(0, "Count"), element(1, &n.to_string())];
    let phone = PhoneState {
        package: "com.example.counter".into(),
        ..PhoneState::default()
    };
    ScreenPrint::of(&elements, &phone)
}

/// The print of a screen without elements and a blank phone state, as this build computes it.
const EMPTY_SCREEN: &str = "fda05579cecf8712";

fn tap(i: u32) -> Action {
    Action::new(Tool::Tap, &[json!(i)])
}

#[test]
fn three_taps_on_one_screen_warn_then_three_more_stop() {
    let mut g = LoopGuard::new(DEFAULT_REPEATS);
    let screen = counter(0);
    assert_eq!(g.record(screen, &[tap(5)]), Verdict::Go);
    assert_eq!(g.record(screen, &[tap(5)]), Verdict::Go);
    let repeat = Repeat {
        what: "tap on element 5".into(),
        actions: 1,
        times: 3,
    };
    assert_eq!(g.record(screen, &[tap(5)]), Verdict::Warn(repeat.clone()));
    assert_eq!(
        repeat.summary(),
        "the same tap on element 5 repeated 3 times on an unchanged screen"
    );
    // Counted afresh after the warning: the same repeat reaching 3 again ends the run.
    assert_eq!(g.record(screen, &[tap(5)]), Verdict::Go);
    assert_eq!(g.record(screen, &[tap(5)]), Verdict::Go);
    assert_eq!(g.record(screen, &[tap(5)]), Verdict::Stop(repeat));
}

#[test]
fn the_same_tap_on_a_screen_that_changes_each_time_is_no_loop() {
    let mut g = LoopGuard::new(DEFAULT_REPEATS);
    // A counter: every tap lands on a screen the last one changed.
    for n in 0..50 {
        assert_eq!(g.record(counter(n), &[tap(1)]), Verdict::Go, "tap {n}");
    }
    // A switch that flips: two screens in turn.
    for n in 0..50 {
        assert_eq!(g.record(counter(n % 2), &[tap(1)]), Verdict::Go, "flip {n}");
    }
}

#[test]
fn another_target_or_another_action_breaks_a_run() {
    let mut g = LoopGuard::new(DEFAULT_REPEATS);
    let s = counter(0);
    let steps = [
        tap(5),
        tap(5),
        tap(6),
        tap(5),
        Action::new(Tool::LongPress, &[json!(5)]),
        tap(5),
        tap(5),
        Action::new(Tool::TapAt, &[json!(540), json!(600)]),
        Action::new(Tool::TapAt, &[json!(540), json!(601)]),
    ];
    for (i, a) in steps.iter().enumerate() {
        assert_eq!(
            g.record(s, std::slice::from_ref(a)),
            Verdict::Go,
            "step {i}"
        );
    }
}

#[test]
fn steps_that_do_not_act_neither_count_nor_break_a_run() {
    let mut g = LoopGuard::new(DEFAULT_REPEATS);
    let s = counter(0);
    let remember = Action::new(Tool::Remember, &[json!("the row did nothing")]);
    let wait = Action::new(Tool::Wait, &[json!(1000)]);
    assert_eq!(g.record(s, &[tap(5)]), Verdict::Go);
    // Waiting on a screen, noting, or a step without tool calls: not an action.
    for _ in 0..5 {
        assert_eq!(g.record(s, std::slice::from_ref(&wait)), Verdict::Go);
        assert_eq!(g.record(s, std::slice::from_ref(&remember)), Verdict::Go);
        assert_eq!(g.record(s, &[]), Verdict::Go);
    }
    assert_eq!(g.record(s, &[tap(5), remember.clone()]), Verdict::Go);
    assert!(matches!(
        g.record(s, &[wait, tap(5)]),
        Verdict::Warn(r) if r.what == "tap on element 5"
    ));
}

#[test]
fn a_step_of_several_actions_is_one_entry() {
    let mut g = LoopGuard::new(DEFAULT_REPEATS);
    let s = counter(0);
    let step = [
        tap(5),
        Action::new(Tool::TypeText, &[json!("x".repeat(100)), Value::Null]),
        Action::new(Tool::Back, &[]),
        Action::new(Tool::PressKey, &[json!("enter")]),
    ];
    assert_eq!(g.record(s, &step), Verdict::Go);
    // The same actions in another order are another step.
    let mut other = step.clone();
    other.swap(0, 2);
    assert_eq!(g.record(s, &other), Verdict::Go);
    assert_eq!(g.record(s, &step), Verdict::Go);
    assert_eq!(g.record(s, &step), Verdict::Go);
    let Verdict::Warn(r) = g.record(s, &step) else {
        panic!("no warning after three equal steps");
    };
    assert_eq!(r.actions, 4);
    let long = format!("\"{}…\"", "x".repeat(40));
    assert_eq!(
        r.summary(),
        format!(
            "the same actions (tap on element 5, then type_text({long}), then back(), then 1 more) repeated 3 times on an unchanged screen"
        )
    );
}

#[test]
fn repeats_are_configurable_and_zero_turns_detection_off() {
    let mut two = LoopGuard::new(2);
    let s = counter(0);
    assert_eq!(two.record(s, &[tap(1)]), Verdict::Go);
    assert!(matches!(two.record(s, &[tap(1)]), Verdict::Warn(r) if r.times == 2));
    assert_eq!(two.record(s, &[tap(1)]), Verdict::Go);
    assert!(matches!(two.record(s, &[tap(1)]), Verdict::Stop(_)));

    let mut off = LoopGuard::new(0);
    for _ in 0..20 {
        assert_eq!(off.record(s, &[tap(1)]), Verdict::Go);
    }
}

#[test]
fn a_repeat_warned_about_earlier_is_stopped_when_it_comes_back() {
    let mut g = LoopGuard::new(DEFAULT_REPEATS);
    let (a, b) = (counter(0), counter(1));
    for _ in 0..2 {
        assert_eq!(g.record(a, &[tap(5)]), Verdict::Go);
    }
    assert!(matches!(g.record(a, &[tap(5)]), Verdict::Warn(_)));
    // Another loop elsewhere is warned about once too.
    for _ in 0..2 {
        assert_eq!(g.record(b, &[tap(7)]), Verdict::Go);
    }
    assert!(matches!(g.record(b, &[tap(7)]), Verdict::Warn(_)));
    // Back to the first one: it was told, so reaching the count again ends the run.
    for _ in 0..2 {
        assert_eq!(g.record(a, &[tap(5)]), Verdict::Go);
    }
    assert!(matches!(g.record(a, &[tap(5)]), Verdict::Stop(r) if r.what == "tap on element 5"));
}

#[test]
fn positional_and_named_arguments_are_one_action() {
    let named = |v: serde_json::Value| match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    };
    assert_eq!(
        Action::named(Tool::Tap, &named(json!({"index": 5}))),
        tap(5)
    );
    assert_eq!(
        Action::named(Tool::TypeText, &named(json!({"text": "hi"}))),
        Action::new(Tool::TypeText, &[json!("hi"), Value::Null, Value::Null])
    );
    assert_eq!(
        Action::named(Tool::TapAt, &named(json!({"y": 2, "x": 1}))).describe(),
        "tap_at (1, 2)"
    );
    assert_eq!(
        Action::new(Tool::OpenApp, &[json!("Settings")]).describe(),
        "open_app(\"Settings\")"
    );
}

#[test]
fn a_screen_print_sees_every_change_and_nothing_else() {
    let phone = PhoneState::default();
    let base = [element(0, "Wi-Fi"), element(1, "Bluetooth")];
    let print = ScreenPrint::of(&base, &phone);
    assert_eq!(print, ScreenPrint::of(&base.clone(), &phone.clone()));
    let mut checked = base.clone();
    checked[0].checked = true;
    let mut moved = base.clone();
    moved[1].bounds[1] += 1;
    let mut renamed = base.clone();
    renamed[1].text = "Bluetooth ".into();
    let keyboard = PhoneState {
        keyboard_shown: true,
        ..PhoneState::default()
    };
    let focus = PhoneState {
        focused_index: Some(0),
        ..PhoneState::default()
    };
    let others = [
        ScreenPrint::of(&checked, &phone),
        ScreenPrint::of(&moved, &phone),
        ScreenPrint::of(&renamed, &phone),
        ScreenPrint::of(&base[..1], &phone),
        ScreenPrint::of(&base, &keyboard),
        ScreenPrint::of(&base, &focus),
    ];
    for (i, o) in others.iter().enumerate() {
        assert_ne!(*o, print, "change {i} went unseen");
    }
    // Shown as 16 hex digits and read back; the empty screen's value is fixed, so every
    // process and build computes the same prints.
    let shown = print.to_string();
    assert_eq!(shown.len(), 16);
    assert_eq!(ScreenPrint::parse(&shown), Some(print));
    assert_eq!(ScreenPrint::parse("xyz"), None);
    assert_eq!(ScreenPrint::parse("0123456789abcdeg"), None);
    assert_eq!(
        ScreenPrint::of(&[], &phone).to_string(),
        EMPTY_SCREEN,
        "the hash changed: prints from other builds no longer compare"
    );
    // Texts are told apart by their lengths, not only their bytes.
    let mut a = Fold::new();
    a.text("ab");
    a.text("");
    let mut b = Fold::new();
    b.text("a");
    b.text("b");
    assert_ne!(a.0, b.0);
}
