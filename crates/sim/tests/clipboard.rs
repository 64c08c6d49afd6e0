//! The phone's clipboard: text copied with an app's copy button is what the clipboard helper
//! app's `am broadcast -a clipper.get` answers over ADB, `clipper.set` puts text there (any
//! script), `input keyevent KEYCODE_PASTE` types it into the focused field, and a reset
//! empties it.
use std::sync::Mutex;

use droidmesh_sim::device::Device;
use droidmesh_sim::testkit::{one_phone, require_adb};

use crate::screen::{phone, sh, spot, tap};

/// What the field `id` of the screen in front holds.
fn field(dev: &Mutex<Device>, id: &str) -> String {
    let d = dev.lock().unwrap();
    d.fields.get(&d.field_key(id)).cloned().unwrap_or_default()
}

const GET: &str = "am broadcast -a clipper.get";
const EMPTY: &str = "Broadcasting: Intent { act=clipper.get flg=0x400000 }\nBroadcast completed: result=0, data=\"\"\n";

fn holds(text: &str) -> String {
    format!(
        "Broadcasting: Intent {{ act=clipper.get flg=0x400000 }}\nBroadcast completed: result=-1, data=\"{text}\"\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_number_copied_in_contacts_is_what_clipper_get_answers_over_adb() {
    if !require_adb("a_number_copied_in_contacts_is_what_clipper_get_answers_over_adb") {
        return;
    }
    let (fleet, adb, s) = one_phone().await.unwrap();
    let dev = &fleet.devices()[0].state;
    let packages = adb.shell(&s, "pm list packages -3").unwrap();
    assert!(packages.contains("package:ca.zgrs.clipper\n"), "{packages}");
    assert_eq!(
        adb.shell(&s, GET).unwrap(),
        EMPTY,
        "the clipboard starts empty"
    );

    adb.shell(&s, "monkey -p com.android.contacts 1").unwrap();
    let tap_over_adb = |what: &str| {
        let (x, y, _, _) = spot(dev, what);
        adb.shell(&s, &format!("input tap {x} {y}")).unwrap();
    };
    tap_over_adb("Ada Lovelace");
    tap_over_adb("Copy number");
    assert_eq!(adb.shell(&s, GET).unwrap(), holds("+44 20 7946 0101"));

    // Set through the helper: any script, quotes and all, comes back as it went in.
    let text = "Zoë Müller — 李雷 \"Иван\" 👍🏽";
    let set = adb
        .shell(&s, &format!("am broadcast -a clipper.set -e text '{text}'"))
        .unwrap();
    assert_eq!(
        set,
        "Broadcasting: Intent { act=clipper.set flg=0x400000 (has extras) }\nBroadcast completed: result=-1, data=\"Text is copied into clipboard.\"\n"
    );
    assert_eq!(adb.shell(&s, GET).unwrap(), holds(text));
    // Without text the helper refuses and the clipboard keeps what it had.
    let refused = adb.shell(&s, "am broadcast -a clipper.set").unwrap();
    assert!(
        refused.ends_with(
            "Broadcast completed: result=0, data=\"No text is provided. Use -e text \"text to be pasted\"\"\n"
        ),
        "{refused}"
    );
    assert_eq!(adb.shell(&s, GET).unwrap(), holds(text));
    drop(adb);
    fleet.shutdown().await;
}

#[test]
fn paste_types_the_clipboard_into_the_focused_field_and_nothing_without_one() {
    let dev = phone();
    sh(&dev, "mkdir -p /sdcard/Notes");
    sh(&dev, "printf 'Привет, 世界' > /sdcard/Notes/hello.md");
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "All notes");
    tap(&dev, "hello.md");
    tap(&dev, "Copy text");
    assert_eq!(sh(&dev, GET), holds("Привет, 世界"));

    sh(&dev, "monkey -p com.android.messaging 1");
    tap(&dev, "Start chat");
    // No field has focus yet: a paste types nothing anywhere.
    sh(&dev, "input keyevent KEYCODE_PASTE");
    assert_eq!(field(&dev, "body"), "");
    tap(&dev, "body");
    sh(&dev, "input keyevent KEYCODE_PASTE");
    assert_eq!(field(&dev, "body"), "Привет, 世界");
    sh(&dev, "input text '%s'");
    sh(&dev, "input keyevent 279");
    assert_eq!(field(&dev, "body"), "Привет, 世界 Привет, 世界");
}

#[test]
fn a_reset_empties_the_clipboard_and_an_empty_one_pastes_nothing() {
    let dev = phone();
    sh(&dev, "am broadcast -a clipper.set -e text 'secret plans'");
    assert_eq!(sh(&dev, GET), holds("secret plans"));
    dev.lock().unwrap().reset();
    assert_eq!(sh(&dev, GET), EMPTY);
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "note_input");
    sh(&dev, "input keyevent KEYCODE_PASTE");
    assert_eq!(field(&dev, "note_input"), "");
}
