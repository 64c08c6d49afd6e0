//! The phone's own data as a check reads it: contacts and text messages changed through the
//! apps' screens (taps and typing, as a person does) and read back with `content query`, as
//! Android's `content` command answers; `content insert`/`delete`; the fixed device clock; a
//! reset restoring the first records; odd `--where`/`--bind` text never breaking the shell.
use std::sync::Mutex;

use droidmesh_sim::device::Device;
use droidmesh_sim::query::{Where, parse_bind, parse_sort};
use droidmesh_sim::shell::run;
use proptest::prelude::*;

use crate::screen::{phone, sh, tap};

const PHONES: &str =
    "content query --uri content://contacts/phones/ --projection display_name:number";
/// 2023-10-15 15:34:00 UTC, the clock every phone starts at.
const START_S: i64 = 1_697_384_040;

/// The rows of a query without their `Row: N ` prefix, in order.
fn rows(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.strip_prefix("Row: ") {
            Some(rest) => rest.split_once(' ').map_or("", |(_, r)| r).to_owned(),
            None => panic!("not a row: {l:?} in\n{text}"),
        })
        .collect()
}

/// The activity in front, as `.Name` in its package.
fn activity(dev: &Mutex<Device>) -> String {
    let (package, activity) = dev.lock().unwrap().focus_component();
    activity
        .strip_prefix(&package)
        .unwrap_or(&activity)
        .to_owned()
}

fn shows(dev: &Mutex<Device>, text: &str) -> bool {
    dev.lock()
        .unwrap()
        .view()
        .nodes
        .iter()
        .any(|n| n.text == text)
}

/// Scrolls the screen down (at most 20 swipes) until it shows `text`.
fn scroll_to(dev: &Mutex<Device>, text: &str) -> bool {
    for _ in 0..20 {
        if shows(dev, text) {
            return true;
        }
        sh(dev, "input swipe 540 1800 540 700 300");
    }
    shows(dev, text)
}

/// Taps the field `id` and types `text` with `input text` (spaces as `%s`).
fn type_into(dev: &Mutex<Device>, id: &str, text: &str) {
    tap(dev, id);
    sh(dev, &format!("input text '{}'", text.replace(' ', "%s")));
}

/// Empties the focused field with DEL presses.
fn clear_focused(dev: &Mutex<Device>, chars: usize) {
    let keys = vec!["67"; chars].join(" ");
    sh(dev, &format!("input keyevent {keys}"));
}

#[test]
fn a_contact_added_in_the_contacts_app_is_in_the_contacts_provider() {
    let dev = phone();
    let before = rows(&sh(&dev, PHONES));
    assert!(before.contains(&"display_name=Ada Lovelace, number=+44 20 7946 0101".to_owned()));
    sh(&dev, "monkey -p com.android.contacts 1");
    tap(&dev, "Create new contact");
    type_into(&dev, "name", "Zoe Muller");
    type_into(&dev, "phone", "+49 30 555 0199");
    tap(&dev, "Save");
    let after = rows(&sh(&dev, PHONES));
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert!(
        after.contains(&"display_name=Zoe Muller, number=+49 30 555 0199".to_owned()),
        "{after:?}"
    );
    // A check that asks for that one contact finds exactly it, with its label.
    let one = sh(
        &dev,
        "content query --uri content://contacts/phones --projection display_name:number:label --where \"display_name='Zoe Muller'\"",
    );
    assert_eq!(
        one,
        "Row: 0 display_name=Zoe Muller, number=+49 30 555 0199, label=Mobile\n"
    );
    // Back on the list, the new contact is shown.
    assert_eq!(
        activity(&dev),
        ".activities.PeopleActivity",
        "save closes the form"
    );
    assert!(
        scroll_to(&dev, "Zoe Muller"),
        "the list shows the new contact"
    );
}

#[test]
fn deleting_a_contact_in_the_app_removes_it_and_keeps_every_other_row() {
    let dev = phone();
    let before = rows(&sh(&dev, PHONES));
    sh(&dev, "monkey -p com.android.contacts 1");
    tap(&dev, "Alan Turing");
    tap(&dev, "Delete");
    let after = rows(&sh(&dev, PHONES));
    let expected: Vec<String> = before
        .iter()
        .filter(|r| !r.starts_with("display_name=Alan Turing,"))
        .cloned()
        .collect();
    assert_eq!(expected.len(), before.len() - 1);
    assert_eq!(after, expected);
    assert_eq!(
        sh(
            &dev,
            "content query --uri content://contacts/phones --where \"display_name='Alan Turing'\""
        ),
        "No result found.\n"
    );
}

#[test]
fn editing_a_contact_in_the_app_changes_only_that_row() {
    let dev = phone();
    let before = rows(&sh(&dev, PHONES));
    sh(&dev, "monkey -p com.android.contacts 1");
    tap(&dev, "Ada Lovelace");
    tap(&dev, "Edit contact");
    // The form starts with what the contact holds.
    tap(&dev, "phone");
    clear_focused(&dev, "+44 20 7946 0101".len());
    sh(&dev, "input text '+44%s20%s7946%s0999'");
    tap(&dev, "Save");
    let after = rows(&sh(&dev, PHONES));
    let expected: Vec<String> = before
        .iter()
        .map(|r| {
            if r.starts_with("display_name=Ada Lovelace,") {
                "display_name=Ada Lovelace, number=+44 20 7946 0999".to_owned()
            } else {
                r.clone()
            }
        })
        .collect();
    assert_eq!(after, expected);
    // The detail screen shows the new number.
    assert_eq!(
        activity(&dev),
        ".activities.ContactDetailActivity",
        "save closes the form"
    );
    assert!(shows(&dev, "+44 20 7946 0999"));
}

/// The `date=` of an SMS row, in ms.
fn date_of(row: &str) -> i64 {
    row.split(", ")
        .find_map(|c| c.strip_prefix("date="))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no date in {row}"))
}

fn clock_s(dev: &Mutex<Device>) -> i64 {
    sh(dev, "date +%s").trim().parse().unwrap()
}

#[test]
fn a_message_sent_from_a_thread_is_in_sms_sent_with_the_clocks_date() {
    let dev = phone();
    assert_eq!(
        sh(&dev, "content query --uri content://sms/sent"),
        "No result found.\n"
    );
    let inbox = sh(
        &dev,
        "content query --uri content://sms/inbox --projection address:body",
    );
    assert!(
        inbox.contains("address=+1 202 555 0110, body=Did the build pass?"),
        "{inbox}"
    );
    let t0 = clock_s(&dev);
    sh(&dev, "monkey -p com.android.messaging 1");
    tap(&dev, "Grace Hopper");
    type_into(&dev, "compose", "On my way");
    tap(&dev, "Send");
    let t1 = clock_s(&dev);
    let sent = sh(
        &dev,
        "content query --uri content://sms/sent --projection address:body:date",
    );
    let sent = rows(&sent);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].starts_with("address=+1 202 555 0110, body=On my way, date="),
        "{sent:?}"
    );
    let date = date_of(&sent[0]);
    assert!(
        (t0 * 1000..=t1 * 1000 + 999).contains(&date),
        "{date} is not between {t0} s and {t1} s"
    );
    // The thread shows it, and the conversation list names it as the last message.
    assert!(shows(&dev, "On my way"));
    sh(&dev, "input keyevent 4 4");
    assert_eq!(
        activity(&dev),
        ".ui.conversationlist.ConversationListActivity"
    );
    let d = dev.lock().unwrap();
    let view = d.view();
    let at = view
        .nodes
        .iter()
        .position(|n| n.text == "Grace Hopper")
        .unwrap();
    assert_eq!(view.nodes[at + 1].text, "On my way");
}

#[test]
fn a_new_message_to_a_number_is_in_sms_sent() {
    let dev = phone();
    sh(&dev, "monkey -p com.android.messaging 1");
    tap(&dev, "Start chat");
    type_into(&dev, "to", "+1 555 0100");
    type_into(&dev, "body", "Hello there");
    tap(&dev, "Send");
    assert_eq!(
        sh(
            &dev,
            "content query --uri content://sms/sent --projection address:body --where \"address='+1 555 0100'\""
        ),
        "Row: 0 address=+1 555 0100, body=Hello there\n"
    );
    // The new conversation is on the list.
    assert_eq!(
        activity(&dev),
        ".ui.conversationlist.ConversationListActivity"
    );
    assert!(shows(&dev, "+1 555 0100"));
}

#[test]
fn the_clock_starts_at_the_fixed_date_and_runs() {
    let dev = phone();
    let now = clock_s(&dev);
    assert!((START_S..START_S + 600).contains(&now), "{now}");
    let date = sh(&dev, "date");
    assert!(date.starts_with("Sun Oct 15 15:3"), "{date}");
    assert!(date.ends_with(" UTC 2023\n"), "{date}");
    assert_eq!(sh(&dev, "date +%Y-%m-%d"), "2023-10-15\n");
}

#[test]
fn content_insert_update_and_delete_change_only_what_they_name() {
    let dev = phone();
    let before = rows(&sh(&dev, PHONES));
    sh(
        &dev,
        "content insert --uri content://contacts/phones --bind display_name:s:'Zoë Müller' --bind number:s:'+49 30 555 0100'",
    );
    let q = "content query --uri content://contacts/phones --projection display_name:number --where \"number='+49 30 555 0100'\"";
    assert_eq!(
        sh(&dev, q),
        "Row: 0 display_name=Zoë Müller, number=+49 30 555 0100\n"
    );
    sh(
        &dev,
        "content update --uri content://contacts/phones --bind display_name:s:'Zoe Mueller' --where \"number='+49 30 555 0100'\"",
    );
    assert_eq!(
        sh(&dev, q),
        "Row: 0 display_name=Zoe Mueller, number=+49 30 555 0100\n"
    );
    sh(
        &dev,
        "content delete --uri content://contacts/phones --where \"display_name='Zoe Mueller'\"",
    );
    assert_eq!(rows(&sh(&dev, PHONES)), before);
    // Sorted, as a check may ask.
    let sorted = rows(&sh(
        &dev,
        "content query --uri content://contacts/phones --projection display_name --sort 'display_name DESC'",
    ));
    assert_eq!(
        sorted.first().map(String::as_str),
        Some("display_name=Yukihiro Matsumoto")
    );
    // An SMS inserted into sent is in sent, not in the inbox.
    sh(
        &dev,
        "content insert --uri content://sms/sent --bind address:s:'+1 555 0101' --bind body:s:'hi there'",
    );
    let sent = rows(&sh(
        &dev,
        "content query --uri content://sms/sent --projection address:body:type",
    ));
    assert_eq!(
        sent,
        vec!["address=+1 555 0101, body=hi there, type=2".to_owned()]
    );
    assert!(!sh(&dev, "content query --uri content://sms/inbox").contains("hi there"));
}

#[test]
fn a_provider_the_phone_does_not_have_is_still_missing() {
    let dev = phone();
    let out = run(&dev, "content query --uri content://calendar/events");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Could not find provider: calendar"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_reset_restores_the_first_records() {
    let dev = phone();
    let contacts = sh(&dev, PHONES);
    let inbox = sh(&dev, "content query --uri content://sms/inbox");
    sh(
        &dev,
        "content delete --uri content://contacts/phones --where \"display_name='Ada Lovelace'\"",
    );
    sh(
        &dev,
        "content insert --uri content://sms/inbox --bind address:s:'+1 555 0102' --bind body:s:x",
    );
    assert_ne!(sh(&dev, PHONES), contacts);
    dev.lock().unwrap().reset();
    assert_eq!(sh(&dev, PHONES), contacts);
    assert_eq!(sh(&dev, "content query --uri content://sms/inbox"), inbox);
}

#[test]
fn a_bad_where_or_bind_is_refused_with_the_reason() {
    let dev = phone();
    let before = sh(&dev, PHONES);
    for line in [
        "content query --uri content://contacts/phones --where \"display_name = \"",
        "content query --uri content://contacts/phones --where \"nope='x'\"",
        "content query --uri content://contacts/phones --projection nope",
        "content insert --uri content://contacts/phones --bind display_name:q:x",
        "content insert --uri content://contacts/phones --bind number:i:abc",
        "content delete --uri content://contacts/phones --where \"(\"",
    ] {
        let out = run(&dev, line);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("Error while accessing provider:contacts\n"),
            "{line}: {err}"
        );
        assert!(out.stdout.is_empty(), "{line}");
    }
    assert_eq!(
        sh(&dev, PHONES),
        before,
        "a refused command changed nothing"
    );
}

/// `s` inside single quotes for the shell.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn odd_where_and_bind_text_never_breaks_the_shell(
        text in "[ -~äß€\\PC]{0,40}",
        kind in 0usize..4,
    ) {
        let dev = phone();
        let line = match kind {
            0 => format!("content query --uri content://contacts/phones --where {}", quoted(&text)),
            1 => format!("content insert --uri content://sms/sent --bind {}", quoted(&text)),
            2 => format!("content delete --uri content://sms/inbox --where {}", quoted(&text)),
            _ => format!("content query --uri content://contacts/phones --sort {} --projection {}", quoted(&text), quoted(&text)),
        };
        let out = run(&dev, &line);
        prop_assert_eq!(out.code, 0);
        // The phone still answers.
        prop_assert_eq!(sh(&dev, "echo ok"), "ok\n");
    }

    #[test]
    fn the_parsers_answer_any_text_without_panicking(
        text in "(\\PC|[()'\"=<>!%_,: ]|AND |OR |NOT |LIKE |IS |NULL |IN ){0,60}",
    ) {
        let known = |c: &str| c == "a" || c == "b";
        if let Ok(w) = Where::parse(&text, &known) {
            let row = [("a".to_owned(), "1".to_owned())].into_iter().collect();
            let _ = w.matches(&row);
        }
        let _ = parse_sort(&text, &known);
        let _ = parse_bind(&text);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_over_adb_reads_what_content_insert_wrote() {
    if !droidmesh_sim::testkit::require_adb("a_check_over_adb_reads_what_content_insert_wrote") {
        return;
    }
    let (_fleet, adb, serial) = droidmesh_sim::testkit::one_phone().await.unwrap();
    // As a check sends it: the words as separate arguments, which adb joins with spaces.
    let sh = |args: &[&str]| {
        let mut all = vec!["-s", serial.as_str(), "shell"];
        all.extend_from_slice(args);
        let out = adb.adb(&all).unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    sh(&[
        "content insert --uri content://contacts/phones --bind display_name:s:'Zoë Müller' --bind number:s:'+49 30 555 0100'",
    ]);
    let all = sh(&[
        "content",
        "query",
        "--uri",
        "content://contacts/phones/",
        "--projection",
        "display_name:number",
    ]);
    assert!(
        all.ends_with("display_name=Zoë Müller, number=+49 30 555 0100\n"),
        "{all}"
    );
    assert_eq!(
        sh(&[
            "content query --uri content://contacts/phones --projection number --where \"display_name='Zoë Müller'\""
        ]),
        "Row: 0 number=+49 30 555 0100\n"
    );
    let now: i64 = sh(&["date", "+%s"]).trim().parse().unwrap();
    assert!((START_S..START_S + 600).contains(&now), "{now}");
}
