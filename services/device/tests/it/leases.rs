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
async fn actions_without_a_valid_lease_are_refused_naming_the_holder() {
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
    assert!(
        err.message()
            .contains(&format!("device {serial} is leased by holder-one until")),
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
