//! Tests of secret matching: every occurrence found as a plain search finds it, masked with
//! one bullet per character, and where it shows decides whether screenshots can be trusted.
#![allow(clippy::unwrap_used)]
use proptest::prelude::*;

use super::*;

fn el(index: u32, id: &str, text: &str, desc: &str, top: i32) -> UiElement {
    UiElement {
        index,
        class_name: "android.widget.TextView".into(),
        resource_id: id.into(),
        text: text.into(),
        content_desc: desc.into(),
        bounds: Some(Bounds {
            left: 0,
            top,
            right: 100,
            bottom: top + 50,
        }),
        ..UiElement::default()
    }
}

fn set(secrets: &[(&str, Option<FieldKey>)]) -> MaskSet {
    let roller = Roller::random();
    let masks = secrets
        .iter()
        .map(|(s, f)| Mask {
            pieces: roller.pieces(s),
            field: f.clone(),
        })
        .collect();
    MaskSet::new(roller, masks)
}

fn ui(elements: Vec<UiElement>) -> ParsedUi {
    ParsedUi {
        elements,
        focused_index: None,
        total_nodes: 0,
    }
}

fn code_field() -> FieldKey {
    FieldKey::Id {
        resource_id: "app:id/code".into(),
        class_name: "android.widget.TextView".into(),
    }
}

#[test]
fn a_secret_inside_longer_texts_and_descriptions_is_masked_and_nothing_else() {
    let masks = set(&[("hunter2", Some(code_field()))]);
    let mut screen = ui(vec![
        el(0, "app:id/code", "hunter2", "", 0),
        el(1, "", "Results for hunter2, and hunter2 again", "", 100),
        el(2, "", "Ünïcode hunter2 ünïcode", "searched hunter2", 200),
        el(3, "", "hunter", "hunte r2", 300),
    ]);
    let found = masks.apply(&mut screen);
    let texts: Vec<(&str, &str)> = screen
        .elements
        .iter()
        .map(|e| (e.text.as_str(), e.content_desc.as_str()))
        .collect();
    assert_eq!(
        texts,
        [
            ("•••••••", ""),
            ("Results for •••••••, and ••••••• again", ""),
            ("Ünïcode ••••••• ünïcode", "searched •••••••"),
            ("hunter", "hunte r2"),
        ]
    );
    // Three elements are blacked out; the secret shows outside its field.
    assert_eq!(found.regions.len(), 3);
    assert!(
        found.elsewhere.as_deref().unwrap().contains("element 1"),
        "{found:?}"
    );
}

#[test]
fn the_field_is_masked_whole_and_only_there_screenshots_stay_trusted() {
    let masks = set(&[("4711", Some(code_field()))]);
    let mut screen = ui(vec![
        el(0, "app:id/code", "47119", "", 0),
        el(1, "app:id/name", "Ada", "", 100),
    ]);
    let found = masks.apply(&mut screen);
    assert_eq!(screen.elements[0].text, "•••••");
    assert_eq!(screen.elements[1].text, "Ada");
    assert_eq!(found.regions, [screen.elements[0].bounds.unwrap()]);
    assert_eq!(found.elsewhere, None);
    // A field whose text changed altogether is still masked (and blacked out) as the field.
    let mut screen = ui(vec![el(0, "app:id/code", "changed", "", 0)]);
    let found = masks.apply(&mut screen);
    assert_eq!(screen.elements[0].text, "•••••••");
    assert_eq!((found.regions.len(), found.elsewhere), (1, None));
}

#[test]
fn a_secret_without_a_known_field_or_place_cannot_be_trusted_in_screenshots() {
    let masks = set(&[("s3cret", None)]);
    let mut screen = ui(vec![el(0, "app:id/code", "s3cret", "", 0)]);
    assert!(masks.apply(&mut screen).elsewhere.is_some());
    let masks = set(&[("s3cret", Some(code_field()))]);
    let mut nowhere = el(0, "", "x s3cret", "", 0);
    nowhere.bounds = None;
    let mut screen = ui(vec![nowhere]);
    let found = masks.apply(&mut screen);
    assert_eq!(screen.elements[0].text, "x ••••••");
    assert!(found.elsewhere.unwrap().contains("not known"));
}

#[test]
fn each_line_of_a_secret_of_several_is_masked() {
    let masks = set(&[("first\nsecond", Some(code_field()))]);
    let mut screen = ui(vec![el(0, "", "second", "first", 0)]);
    masks.apply(&mut screen);
    assert_eq!(screen.elements[0].text, "••••••");
    assert_eq!(screen.elements[0].content_desc, "•••••");
}

#[test]
fn overlapping_occurrences_are_masked_once() {
    let masks = set(&[("aba", None), ("bab", None)]);
    let mut screen = ui(vec![el(0, "", "xababax", "", 0)]);
    masks.apply(&mut screen);
    assert_eq!(screen.elements[0].text, "x•••••x");
}

proptest! {
    /// The rolling digests find exactly what a plain search finds.
    #[test]
    fn digests_find_what_a_plain_search_finds(
        text in "[ab€ ]{0,40}",
        secret in "[ab€]{1,5}",
    ) {
        let masks = set(&[(secret.as_str(), None)]);
        let found: Vec<usize> = masks
            .occurrences(&text)
            .into_iter()
            .map(|(start, _, _)| start)
            .collect();
        let mut plain = Vec::new();
        let mut from = 0;
        while let Some(i) = text[from..].find(&secret) {
            plain.push(from + i);
            from += i + text[from + i..].chars().next().map_or(1, char::len_utf8);
        }
        prop_assert_eq!(found, plain);
    }
}
