//! Tests of the `uiautomator dump` parser, including truncation at every offset.
use super::*;
use proptest::prelude::*;

const SAMPLE: &str = include_str!("../testdata/settings_dump.xml");

#[test]
fn sample_dump_is_flattened_to_meaningful_elements() {
    let ui = parse_ui_dump(SAMPLE).unwrap();
    assert_eq!(ui.total_nodes, 13);
    let texts: Vec<(&str, &str)> = ui
        .elements
        .iter()
        .map(|e| (e.text.as_str(), e.content_desc.as_str()))
        .collect();
    assert_eq!(
        texts,
        vec![
            ("Settings", ""),
            ("", "Search settings"),
            ("", ""),
            ("", ""),
            ("Wi-Fi", ""),
            ("Off & \"idle\"", ""),
            ("", ""),
            ("", ""),
            ("Bluetooth", ""),
            ("", ""),
            ("", ""),
        ]
    );
    for (i, e) in ui.elements.iter().enumerate() {
        assert_eq!(e.index as usize, i);
    }
    // The recycler view is kept (scrollable); its parents are layout-only and skipped.
    let recycler = &ui.elements[2];
    assert!(recycler.scrollable);
    assert_eq!((recycler.depth, recycler.parent_index), (0, None));
    let wifi_row = &ui.elements[3];
    assert!(wifi_row.clickable);
    assert_eq!((wifi_row.depth, wifi_row.parent_index), (1, Some(2)));
    let wifi = &ui.elements[4];
    assert_eq!((wifi.depth, wifi.parent_index), (2, Some(3)));
    assert_eq!(wifi.resource_id, "android:id/title");
    assert_eq!(
        wifi.bounds,
        Some(Bounds {
            left: 189,
            top: 660,
            right: 600,
            bottom: 720
        })
    );
    let switch = &ui.elements[6];
    assert!(switch.checkable && !switch.checked);
    assert_eq!(switch.class_name, "android.widget.Switch");
    let edit = &ui.elements[9];
    assert!(edit.editable && edit.long_clickable && !edit.password);
    let pin = &ui.elements[10];
    assert!(pin.password && pin.editable && !pin.enabled);
    assert_eq!(ui.focused_index, Some(7));
    assert!(ui.focused().unwrap().focused);
}

#[test]
fn leading_noise_and_missing_trailer_are_tolerated() {
    let body = SAMPLE
        .trim_end()
        .trim_end_matches("UI hierchary dumped to: /dev/tty");
    let noisy = format!("WARNING: linker: something\r\n{body}");
    assert_eq!(
        parse_ui_dump(&noisy).unwrap(),
        parse_ui_dump(SAMPLE).unwrap()
    );
    // Without the XML declaration.
    let no_decl = &body[body.find("<hierarchy").unwrap()..];
    assert_eq!(parse_ui_dump(no_decl).unwrap().elements.len(), 11);
}

#[test]
fn errors_never_quote_an_apps_text() {
    let secret = "hunter2xyz";
    for input in [
        format!("<node text=\"{secret}\"/></hierarchy>"),
        format!("garbage <node content-desc=\"{secret}\"/>"),
        format!("<hierarchy><node text=\"{secret}\" bounds=\"[0,0]\"/></hierarchy>"),
        format!("<hierarchy><node text=\"{secret}&bogus;\"/></hierarchy>"),
        format!("<hierarchy><node text=\"{secret}/></hierarchy>"),
        format!("<hierarchy><{secret}/></hierarchy>"),
    ] {
        let err = parse_ui_dump(&input).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{input:?}: {err}");
    }
    // A tool's own words are still shown.
    let err = parse_ui_dump("ERROR: could not get idle state.").unwrap_err();
    assert!(
        err.to_string()
            .contains("starts with 'ERROR: could not get idle state.'"),
        "{err}"
    );
}

#[test]
fn empty_and_garbage_are_errors_not_panics() {
    for input in [
        "",
        "   ",
        "ERROR: could not get idle state.",
        "<hierarchy>",
        "<hierarchy></node></hierarchy>",
        "<hierarchy><node bounds=\"[0,0][1,1]\"></hierarchy>",
        "<hierarchy><node bounds=\"[0,0]\" text=\"x\"/></hierarchy>",
        "<hierarchy><node text=\"a &bogus; b\"/></hierarchy>",
        "<hierarchy><node text=\"unterminated/></hierarchy>",
        "<hierarchy><script/></hierarchy>",
        "<node text=\"x\"/></hierarchy>",
        "\u{0}\u{1}<hierarchy\u{ff}</hierarchy>",
    ] {
        let err = parse_ui_dump(input).unwrap_err();
        assert!(
            matches!(err, DeviceError::UiDump { .. }),
            "{input:?}: {err}"
        );
    }
}

#[test]
fn empty_hierarchy_has_no_elements() {
    let ui = parse_ui_dump("<hierarchy rotation=\"0\"/>").unwrap();
    assert!(ui.elements.is_empty());
    let ui = parse_ui_dump("<hierarchy rotation=\"0\"></hierarchy>").unwrap();
    assert!(ui.elements.is_empty());
}

#[test]
fn every_truncation_of_a_real_dump_is_an_error() {
    let end = SAMPLE.find("</hierarchy>").unwrap() + "</hierarchy>".len();
    for cut in 0..SAMPLE.len() {
        if !SAMPLE.is_char_boundary(cut) {
            continue;
        }
        let r = parse_ui_dump(&SAMPLE[..cut]);
        if cut < end {
            assert!(
                matches!(r, Err(DeviceError::UiDump { .. })),
                "cut at {cut} gave {r:?}"
            );
        } else {
            assert_eq!(r.unwrap().elements.len(), 11, "cut at {cut}");
        }
    }
}

#[test]
fn bounds_parse_and_centre() {
    let b = parse_bounds("[10,20][110,220]").unwrap();
    assert_eq!(centre(&b), (60, 120));
    assert_eq!(parse_bounds("[-5,0][5,10]").unwrap().left, -5);
    for bad in [
        "",
        "[1,2]",
        "[a,b][c,d]",
        "[1,2][3]",
        "1,2][3,4",
        "[1,2][3,4",
    ] {
        assert!(parse_bounds(bad).is_none(), "{bad}");
    }
}

proptest! {
    #[test]
    fn arbitrary_strings_never_panic(s in ".{0,400}") {
        let _ = parse_ui_dump(&s);
    }

    #[test]
    fn arbitrary_xml_like_strings_never_panic(
        s in "(<hierarchy>|<node text=\"[a-z&;]{0,5}\" bounds=\"\\[[0-9,\\]\\[]{0,12}\"|>|/>|</node>|</hierarchy>|[ a-z\"=]){0,40}"
    ) {
        let _ = parse_ui_dump(&s);
    }

    #[test]
    fn splicing_garbage_into_a_dump_never_panics(pos in 0usize..4000, junk in ".{0,8}") {
        let mut s = SAMPLE.to_owned();
        let mut p = pos.min(s.len());
        while !s.is_char_boundary(p) { p -= 1; }
        s.insert_str(p, &junk);
        let _ = parse_ui_dump(&s);
    }
}
