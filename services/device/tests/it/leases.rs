//! Lease behaviour over gRPC: races, refusals naming the holder, release.
use droidmesh_proto::v1::{
    AcquireLeaseRequest, LeaseRef, Point, ReleaseLeaseRequest, TapRequest, tap_request,
};
use tonic::Code;

use super::common::*;
use super::sims::*;

#[tokio::test(flavor = "multi_thread")]
async fn two_holders_racing_for_one_device_exactly_one_wins() {
    let Some(shared) = shared() else { return };
    let serial = shared.serials[DEV_LEASES].clone();
    let client = serve(config(shared)).await;
    let mut tasks = Vec::new();
    for holder in ["task-a", "task-b", "task-c", "task-d"] {
        let mut c = client.clone();
        let serial = serial.clone();
        tasks.push(tokio::spawn(async move {
            c.acquire_lease(AcquireLeaseRequest {
                serial,
                holder: holder.into(),
                ttl_ms: 0,
            })
            .await
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let holder = &winners[0].get_ref().holder;
    for err in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert!(
            err.message().contains(&format!("leased by {holder}")),
            "{}",
            err.message()
        );
    }
    // ListDevices shows the holder.
    let devices = devices(&mut client.clone()).await;
    let d = devices.iter().find(|d| d.serial == serial).unwrap();
    assert_eq!(&d.lease.as_ref().unwrap().holder, holder);
}

#[tokio::test(flavor = "multi_thread")]
async fn actions_without_a_valid_lease_are_refused_without_naming_the_holder() {
    let Some(shared) = shared() else { return };
    let serial = &shared.serials[DEV_LEASES];
    let mut client = serve(config(shared)).await;
    let tap = |lease: Option<LeaseRef>| TapRequest {
        lease,
        target: Some(tap_request::Target::Point(Point { x: 10, y: 10 })),
    };
    // No lease on the device at all.
    let err = client
        .tap(tap(Some(LeaseRef {
            serial: serial.clone(),
            lease_id: "made-up".into(),
        })))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        err.message(),
        format!("no lease held on device {serial}; acquire one first")
    );
    let err = client.tap(tap(None)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    let lease = acquire(&mut client, serial, "holder-one").await;
    let err = client
        .tap(tap(Some(LeaseRef {
            serial: serial.clone(),
            lease_id: "stale-or-forged".into(),
        })))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    // A stale or forged lease is told that its lease is not the device's, not who holds it.
    assert!(
        err.message().contains(&format!(
            "the lease given for device {serial} is no longer valid"
        )) && !err.message().contains("holder-one"),
        "{}",
        err.message()
    );

    // After release, the old lease is stale and the device is free again.
    let released = client
        .release_lease(ReleaseLeaseRequest {
            lease: lref(&lease),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(released.released);
    let err = client.tap(tap(lref(&lease))).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let again = acquire(&mut client, serial, "holder-two").await;
    assert_ne!(again.lease_id, lease.lease_id);
}

/// Whether `s` is safe to print in a terminal or a log: no control characters, no format
/// characters (bidi overrides and isolates, zero-width characters, ...), no line separators.
fn printable(s: &str) -> bool {
    !s.chars().any(|c| {
        c.is_control()
            || matches!(
                c,
                '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}'
            )
            || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}')
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn lease_holders_are_bounded_printable_text_and_refusals_are_safe_to_print() {
    let Some(shared) = shared() else { return };
    let serial = shared.serials[DEV_LEASES].clone();
    let mut client = serve(config(shared)).await;
    let ask = |serial: &str, holder: &str| AcquireLeaseRequest {
        serial: serial.into(),
        holder: holder.into(),
        ttl_ms: 0,
    };
    let refused = [
        ("x".repeat(1 << 20), "at most 256 bytes"),
        ("é".repeat(128) + "a", "at most 256 bytes"),
        ("task-1\u{1b}[2J\u{1b}]0;pwned\u{7}".into(), "U+001B"),
        ("task-1\nINFO lease granted to admin".into(), "U+000A"),
        ("task-1\u{202e}nimda".into(), "U+202E"),
        ("task-\u{2066}1\u{2069}".into(), "U+2066"),
        ("task\u{200b}-1".into(), "U+200B"),
        ("\u{feff}task-1".into(), "U+FEFF"),
        ("task-1\u{85}".into(), "U+0085"),
        ("task-1\u{2028}".into(), "U+2028"),
    ];
    for (holder, rule) in &refused {
        let err = match client.acquire_lease(ask(&serial, holder)).await {
            Ok(l) => panic!(
                "a holder of {} bytes with {rule} was accepted: {:?}",
                holder.len(),
                l.into_inner()
                    .holder
                    .escape_debug()
                    .take(80)
                    .collect::<String>()
            ),
            Err(e) => e,
        };
        let msg = err.message();
        assert_eq!(err.code(), Code::InvalidArgument, "{msg}");
        assert!(msg.starts_with("holder "), "{msg}");
        assert!(msg.contains(rule), "{rule} not in {msg}");
        assert!(printable(msg) && msg.len() < 512, "{msg:?}");
    }
    // Nothing was leased, and the device lists no holder.
    let listed = devices(&mut client).await;
    let d = listed.iter().find(|d| d.serial == serial).unwrap();
    assert!(d.lease.is_none(), "{:?}", d.lease);

    // What callers really send passes: the gateway's task ids, people, 256 bytes exactly.
    let task = format!("task-{}", "0123456789abcdef".repeat(2));
    for holder in [
        task.as_str(),
        "alice@example.com",
        "Zoë Ünïcödé 用户",
        &"é".repeat(128),
        &"h".repeat(256),
    ] {
        let lease = acquire(&mut client, &serial, holder).await;
        assert_eq!(lease.holder, holder);
        let listed = devices(&mut client).await;
        let d = listed.iter().find(|d| d.serial == serial).unwrap();
        assert_eq!(d.lease.as_ref().unwrap().holder, holder);
        // Another caller is refused naming this holder, as given.
        let err = client
            .acquire_lease(ask(&serial, "someone-else"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert!(
            err.message().contains(&format!("leased by {holder} until")),
            "{}",
            err.message()
        );
        client
            .release_lease(ReleaseLeaseRequest {
                lease: lref(&lease),
            })
            .await
            .unwrap();
    }

    // A refusal that echoes what the caller sent (an unknown serial) is printable and bounded.
    let hostile = format!("emu\u{1b}]0;pwned\u{7}\u{202e}{}", "z".repeat(100_000));
    let err = client
        .acquire_lease(ask(&hostile, "task-x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{}", err.message());
    let msg = err.message();
    assert!(
        msg.starts_with("device emu\\u{1b}]0;pwned\\u{7}\\u{202e}zzz"),
        "{msg:?}"
    );
    assert!(
        printable(msg) && msg.len() <= 2048,
        "{} bytes: {msg:?}",
        msg.len()
    );
}
