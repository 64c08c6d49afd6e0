//! Error answers: unknown serials, indices out of range, devices that disappear.
use std::time::{Duration, Instant};

use droidmesh_proto::v1::{GetStateRequest, Point, TapRequest, TypeTextRequest, tap_request};
use tonic::Code;

use super::common::*;
use super::sims::*;

#[tokio::test(flavor = "multi_thread")]
async fn unknown_serial_is_not_found_naming_it() {
    let Some(shared) = shared() else { return };
    let mut client = serve(config(shared)).await;
    let err = client
        .get_state(GetStateRequest {
            serial: "no-such-phone-42".into(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        err.message().contains("no-such-phone-42"),
        "{}",
        err.message()
    );
    let err = client
        .acquire_lease(droidmesh_proto::v1::AcquireLeaseRequest {
            serial: "no-such-phone-42".into(),
            holder: "t".into(),
            ttl_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn index_out_of_range_and_bad_input_are_invalid_argument() {
    let Some(shared) = shared() else { return };
    let serial = &shared.serials[DEV_ERRORS];
    let mut client = serve(config(shared)).await;
    let lease = acquire(&mut client, serial, "errors-test").await;
    let st = state(&mut client, serial).await;
    let n = st.elements.len();
    assert!(n > 0);
    let err = client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Index(n as u32 + 57)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        format!("index {} out of range: the screen has {n} elements", n + 57)
    );
    let err = client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Point(Point { x: -1, y: 99_999 })),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("off the screen"),
        "{}",
        err.message()
    );
    let err = client
        .type_text(TypeTextRequest {
            lease: lref(&lease),
            text: "café".into(),
            index: None,
            clear: false,
            sensitive: false,
        })
        .await
        .unwrap_err();
    // The text is fine, the phone lacks a keyboard app: a failed precondition, naming what
    // to install.
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().starts_with(
            "`input text` on Android accepts ASCII only; got 'é' at position 3; device"
        ) && err.message().contains("install the companion app"),
        "{}",
        err.message()
    );
    // The same for a secret: refused, without the character or its position.
    let err = client
        .type_text(TypeTextRequest {
            lease: lref(&lease),
            text: "pässwort".into(),
            index: None,
            clear: false,
            sensitive: true,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("printable ASCII"),
        "{}",
        err.message()
    );
    assert!(!err.message().contains('ä') && !err.message().contains("position"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_that_disappears_is_unavailable_within_bounded_time() {
    let Some(shared) = shared() else { return };
    let fleet = start_fleet(1).await;
    let addr = fleet.addrs()[0];
    let serial = shared.adb.connect(addr).unwrap();
    let mut client = serve(config(shared)).await;
    let lease = acquire(&mut client, &serial, "doomed").await;
    state(&mut client, &serial).await;
    fleet.shutdown().await;

    let started = Instant::now();
    let err = client
        .get_state(GetStateRequest {
            serial: serial.clone(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains(&serial), "{}", err.message());
    let err = client
        .tap(TapRequest {
            lease: lref(&lease),
            target: Some(tap_request::Target::Point(Point { x: 5, y: 5 })),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err.code(), Code::Unavailable | Code::NotFound),
        "{err:?}"
    );
    // The command timeout is 3 s; two calls must not take much more than that each.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
}
