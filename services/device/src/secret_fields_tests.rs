//! Tests of the per-device table: any number of fields up to a generous bound, what gives way
//! past it, masks sent by readers, and screenshots withheld for one lease.
#![allow(clippy::unwrap_used)]
use super::*;
use crate::ui_dump::ParsedUi;

fn field(id: &str, text: &str, top: i32) -> UiElement {
    UiElement {
        class_name: "android.widget.EditText".into(),
        resource_id: id.into(),
        text: text.into(),
        bounds: Some(Bounds {
            left: 0,
            top,
            right: 100,
            bottom: top + 50,
        }),
        ..UiElement::default()
    }
}

fn masked(set: &MaskSet, elements: Vec<UiElement>) -> Vec<String> {
    let mut ui = ParsedUi {
        elements,
        focused_index: None,
        total_nodes: 0,
    };
    set.apply(&mut ui);
    ui.elements.into_iter().map(|e| e.text).collect()
}

#[test]
fn a_thousand_fields_stay_masked() {
    let f = SecretFields::default();
    for i in 0..1000 {
        let e = field(&format!("app:id/f{i}"), "", 0);
        f.remember("s", Some(&e), &format!("secret-{i}"), Some("L1"))
            .unwrap();
    }
    let set = f.remembered();
    let fields: Vec<UiElement> = (0..1000)
        .map(|i| field(&format!("app:id/f{i}"), "typed", 0))
        .collect();
    assert!(masked(&set, fields).iter().all(|t| t == "•••••"));
    assert_eq!(
        masked(&set, vec![field("", "see secret-0 and secret-999", 0)]),
        ["see •••••••• and ••••••••••"]
    );
}

#[test]
fn past_the_bound_earlier_leases_give_way_and_the_current_one_is_refused() {
    let f = SecretFields::default();
    let e = |i: usize| field(&format!("app:id/f{i}"), "", 0);
    f.remember("s", Some(&e(0)), "old-secret", Some("L1"))
        .unwrap();
    for i in 1..MAX_MASKS {
        f.remember("s", Some(&e(i)), &format!("s{i}"), Some("L2"))
            .unwrap();
    }
    // Full: the earlier lease's mask makes room.
    f.remember("s", Some(&e(MAX_MASKS)), "new", Some("L2"))
        .unwrap();
    assert_eq!(
        masked(&f.remembered(), vec![field("app:id/f0", "typed", 0)]),
        ["typed"]
    );
    assert_eq!(
        masked(&f.remembered(), vec![field("", "old-secret new", 0)]),
        ["old-secret •••"]
    );
    // Every mask is this lease's: refused, naming the bound.
    let refused = f
        .remember("s", Some(&e(MAX_MASKS + 1)), "one-more", Some("L2"))
        .unwrap_err();
    assert!(refused.to_string().contains("1024"), "{refused}");
    assert!(!refused.to_string().contains("one-more"));
    // A secret already known is not a new one.
    f.remember("s", Some(&e(5)), "s5", Some("L2")).unwrap();
}

#[test]
fn masks_sent_with_a_read_are_remembered_when_they_name_their_field() {
    let f = SecretFields::default();
    let sent = |secret: &str, id: Option<&str>| SecretMask {
        secret: secret.into(),
        field: id.map(|id| MaskedField {
            resource_id: id.into(),
            class_name: "android.widget.EditText".into(),
            bounds: None,
        }),
    };
    let set = f
        .for_read(
            &[
                sent("typed-one", Some("app:id/pin")),
                sent("known-one", None),
            ],
            None,
        )
        .unwrap();
    assert_eq!(
        masked(
            &set,
            vec![field("app:id/pin", "x", 0), field("", "known-one", 60)]
        ),
        ["•", "•••••••••"]
    );
    // A later reader that sends nothing: the typed one is masked, the other is not known.
    let later = f.remembered();
    assert_eq!(
        masked(
            &later,
            vec![
                field("app:id/pin", "x", 0),
                field("", "known-one typed-one", 60)
            ]
        ),
        ["•", "known-one •••••••••"]
    );
    let too_many = vec![sent("x", None); MAX_READ_MASKS + 1];
    assert!(matches!(
        f.for_read(&too_many, None),
        Err(DeviceError::InvalidArgument(_))
    ));
    assert!(!format!("{f:?}").contains("typed-one"));
}

#[test]
fn screenshots_are_withheld_for_the_rest_of_one_lease() {
    let f = SecretFields::default();
    assert_eq!(f.withheld(Some("L1")), None);
    f.withhold(Some("L1"), "first".into());
    f.withhold(Some("L1"), "second".into());
    assert_eq!(f.withheld(Some("L1")).as_deref(), Some("first"));
    // The lease changed: the mark was for the one that ended.
    assert_eq!(f.withheld(Some("L2")), None);
    assert_eq!(f.withheld(Some("L1")), None);
    f.withhold(None, "no lease".into());
    assert_eq!(f.withheld(None).as_deref(), Some("no lease"));
}

#[test]
fn reads_sending_the_masks_already_kept_write_nothing() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MaskStore::open(dir.path()).unwrap());
    let f = SecretFields::kept("s", Some(store));
    let sent = |secret: &str, id: &str| SecretMask {
        secret: secret.into(),
        field: Some(MaskedField {
            resource_id: id.into(),
            class_name: "android.widget.EditText".into(),
            bounds: None,
        }),
    };
    let masks = [sent("pin-1", "app:id/a"), sent("pin-2", "app:id/b")];
    f.for_read(&masks, Some("L1")).unwrap();
    let file = || {
        let path = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::metadata(path).unwrap().ino()
    };
    let written = file();
    // Each read moves both masks to newest; nothing on disk changes.
    for _ in 0..5 {
        f.for_read(&masks, Some("L1")).unwrap();
    }
    assert_eq!(file(), written, "the masks were written again");
    // Another lease: written once more.
    f.for_read(&masks, Some("L2")).unwrap();
    assert_ne!(file(), written);
}
