//! Text in any language on the simulated phone: `input text` fails on what the virtual
//! keyboard cannot type exactly as a phone does, and the two keyboard apps a phone may have
//! (the companion's keyboard and ADBKeyBoard) type any text into the focused field, each only
//! in the way the app itself does.
use std::sync::{Arc, Mutex};

use base64::Engine;
use droidmesh_sim::apps::AppSet;
use droidmesh_sim::device::Device;
use droidmesh_sim::shell::{Output, run};
use droidmesh_sim::view::Tap;

const COMPANION_IME: &str = "com.mobilerun.portal/.input.MobilerunKeyboardIME";
const ADB_IME: &str = "com.android.adbkeyboard/.AdbIME";
const LATIN: &str = "com.android.inputmethod.latin/.LatinIME";

/// A phone in the notes app with its note field focused.
fn phone(portal: bool, adb_keyboard: bool) -> Mutex<Device> {
    let mut dev = Device::new(Arc::new(AppSet::default_set().unwrap()), "sim");
    dev.set_portal(portal);
    dev.set_adb_keyboard(adb_keyboard);
    let dev = Mutex::new(dev);
    run(&dev, "monkey -p com.droidmesh.notes 1");
    let (x, y) = {
        let d = dev.lock().unwrap();
        let view = d.view();
        let n = view
            .nodes
            .iter()
            .find(|n| n.resource_id.ends_with("note_input"))
            .expect("the note field");
        assert!(matches!(n.tap, Tap::Focus(_)));
        (
            (n.bounds.left + n.bounds.right) / 2,
            (n.bounds.top + n.bounds.bottom) / 2,
        )
    };
    run(&dev, &format!("input tap {x} {y}"));
    dev
}

/// What the note field holds (the screen shows its hint while it is empty).
fn field(dev: &Mutex<Device>) -> String {
    let d = dev.lock().unwrap();
    d.fields
        .get(&d.field_key("note_input"))
        .cloned()
        .unwrap_or_default()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn input_text_fails_whole_on_a_character_the_keyboard_cannot_type() {
    let dev = phone(false, false);
    for text in ["café", "Привет", "你好", "مرحبا", "👍🏽", "a\u{a0}b"] {
        let o = run(&dev, &format!("input text '{text}'"));
        assert_eq!(o.code, 255, "{text}");
        assert!(o.stdout.is_empty(), "{text}: {}", out(&o));
        let e = err(&o);
        assert!(
            e.starts_with("\nException occurred while executing 'text':\njava.lang.NullPointerException: Attempt to get length of null array\n\tat com.android.server.input.InputShellCommand.sendText("),
            "{text}: {e}"
        );
        assert_eq!(field(&dev), "", "nothing of {text:?} is typed");
    }
    // What the keyboard has is typed; `%s` is a space however it is written.
    let o = run(&dev, "input text 'it'\\''s%s100%%s;|&<>()$*?[]{}#~`\"'");
    assert_eq!(o.code, 0, "{}", err(&o));
    assert_eq!(field(&dev), "it's 100% ;|&<>()$*?[]{}#~`\"");
    // Unquoted words are separate arguments: the first is typed, the rest ignored.
    run(&dev, "input text ' x' y z");
    assert!(field(&dev).ends_with(" x"), "{}", field(&dev));
    let o = run(&dev, "input text");
    assert_eq!(o.code, 255);
    assert!(
        err(&o).contains("Argument expected after \"text\""),
        "{}",
        err(&o)
    );
}

#[test]
fn the_companion_keyboard_types_any_text_and_the_phone_shows_the_app() {
    let dev = phone(true, false);
    let packages = out(&run(&dev, "pm list packages"));
    assert!(
        packages.contains("package:com.mobilerun.portal\n"),
        "{packages}"
    );
    let third = out(&run(&dev, "pm list packages -3"));
    assert!(third.contains("package:com.mobilerun.portal\n"), "{third}");
    assert_eq!(
        out(&run(
            &dev,
            "settings get secure enabled_accessibility_services"
        ))
        .trim(),
        "com.mobilerun.portal/com.mobilerun.portal.service.MobilerunAccessibilityService"
    );
    let apps = out(&run(
        &dev,
        "content query --uri content://com.mobilerun.portal/packages",
    ));
    let json = apps.trim().strip_prefix("Row: 0 result=").expect(&apps);
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["status"], "success");
    let list = v["result"].as_array().expect("a list of apps");
    assert!(
        list.iter()
            .any(|a| a["packageName"] == "com.android.settings" && a["label"] == "Settings"),
        "{list:?}"
    );
    let all = out(&run(&dev, "ime list -a -s"));
    assert!(all.lines().any(|l| l == COMPANION_IME), "{all}");
    assert!(
        !out(&run(&dev, "ime list -s")).contains(COMPANION_IME),
        "installed, not enabled"
    );
    assert_eq!(
        out(&run(&dev, &format!("ime enable {COMPANION_IME}"))),
        format!("Input method {COMPANION_IME}: now enabled for user #0\n")
    );
    assert_eq!(
        out(&run(&dev, &format!("ime set {COMPANION_IME}"))),
        format!("Input method {COMPANION_IME} selected for user #0\n")
    );
    assert_eq!(
        out(&run(&dev, "settings get secure default_input_method")).trim(),
        COMPANION_IME
    );
    let insert = |text: &str, clear: bool| {
        run(
            &dev,
            &format!(
                "content insert --uri content://com.mobilerun.portal/keyboard/input --bind base64_text:s:{} --bind clear:b:{clear}",
                b64(text)
            ),
        )
    };
    let o = insert("old", false);
    assert_eq!(
        (o.code, out(&o), err(&o)),
        (0, String::new(), String::new())
    );
    let text = "Grüße, Привет, 你好, مرحبا 👨‍👩‍👧 👍🏽\n\ttab \"q\" 'q' %s $HOME";
    insert(text, true);
    assert_eq!(field(&dev), text, "clear replaces");
    insert("!", false);
    assert_eq!(field(&dev), format!("{text}!"), "no clear appends");
    // Not the selected keyboard: the app sets the focused field through accessibility.
    run(&dev, &format!("ime set {LATIN}"));
    insert("ж", true);
    assert_eq!(field(&dev), "ж");
    // Without the app the provider is missing and nothing is typed.
    let plain = phone(false, false);
    let o = run(
        &plain,
        &format!(
            "content insert --uri content://com.mobilerun.portal/keyboard/input --bind base64_text:s:{} --bind clear:b:true",
            b64("ж")
        ),
    );
    assert!(
        err(&o).contains("Could not find provider: com.mobilerun.portal"),
        "{}",
        err(&o)
    );
    assert_eq!(field(&plain), "");
    assert!(!out(&run(&plain, "pm list packages")).contains("com.mobilerun.portal"));
    assert_eq!(
        out(&run(
            &plain,
            "settings get secure enabled_accessibility_services"
        ))
        .trim(),
        "null"
    );
    let o = run(&plain, &format!("ime set {COMPANION_IME}"));
    assert!(err(&o).contains("Unknown input method"), "{}", err(&o));
}

#[test]
fn adbkeyboard_types_only_while_it_is_the_selected_keyboard() {
    let dev = phone(false, true);
    assert!(out(&run(&dev, "pm list packages")).contains("package:com.android.adbkeyboard\n"));
    let b64_cmd = |text: &str| format!("am broadcast -a ADB_INPUT_B64 --es msg {}", b64(text));
    // Installed but not selected: its receiver is not running, the broadcast reaches nobody.
    let o = run(&dev, &b64_cmd("ж"));
    assert_eq!(o.code, 0);
    assert!(
        out(&o).ends_with("Broadcast completed: result=0\n"),
        "{}",
        out(&o)
    );
    assert_eq!(field(&dev), "");
    run(&dev, &format!("ime enable {ADB_IME}"));
    let o = run(&dev, &format!("ime set {ADB_IME}"));
    assert_eq!(
        out(&o),
        format!("Input method {ADB_IME} selected for user #0\n")
    );
    let text = "日本語 👩🏿‍💻\n'\"%s";
    let o = run(&dev, &b64_cmd(text));
    assert_eq!(
        out(&o),
        "Broadcasting: Intent { act=ADB_INPUT_B64 flg=0x400000 (has extras) }\nBroadcast completed: result=0\n"
    );
    assert_eq!(field(&dev), text);
    run(&dev, "am broadcast -a ADB_CLEAR_TEXT");
    assert_eq!(field(&dev), "");
    run(&dev, "am broadcast -a ADB_INPUT_TEXT --es msg 'a b'");
    run(
        &dev,
        "am broadcast -a ADB_INPUT_CHARS --eia chars 1078,32,128077",
    );
    assert_eq!(field(&dev), "a bж 👍");
    // Without the app nobody receives it either.
    let plain = phone(false, false);
    run(&plain, &b64_cmd("ж"));
    assert_eq!(field(&plain), "");
    let o = run(&plain, &format!("ime enable {ADB_IME}"));
    assert!(err(&o).contains("Unknown input method"), "{}", err(&o));
}
