//! Tests of the lease manager, with a manual clock.
use super::*;

fn known() -> Vec<String> {
    vec!["emu-b".into(), "emu-a".into()]
}

fn manager() -> (Arc<ManualClock>, LeaseManager) {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let m = LeaseManager::new(clock.clone(), 30_000, 60_000);
    (clock, m)
}

fn lref(l: &Lease) -> LeaseRef {
    LeaseRef {
        serial: l.serial.clone(),
        lease_id: l.lease_id.clone(),
    }
}

#[test]
fn any_free_device_is_picked_in_serial_order() {
    let (_, m) = manager();
    let a = m.acquire("", "task-1", 0, &known()).unwrap();
    assert_eq!(a.serial, "emu-a");
    assert_eq!(a.ttl_ms, 30_000);
    assert_eq!(a.expires_at_ms, 1_030_000);
    assert!(uuid::Uuid::parse_str(&a.lease_id).is_ok());
    let b = m.acquire("", "task-2", 0, &known()).unwrap();
    assert_eq!(b.serial, "emu-b");
    let err = m.acquire("", "task-3", 0, &known()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DeviceError::AllBusy { .. }));
    assert!(
        msg.contains("emu-a by task-1") && msg.contains("emu-b by task-2"),
        "{msg}"
    );
    assert!(matches!(
        m.acquire("", "x", 0, &[]),
        Err(DeviceError::NoDevices)
    ));
}

#[test]
fn specific_device_refusals_name_the_holder_or_serial() {
    let (_, m) = manager();
    m.acquire("emu-a", "task-1", 0, &known()).unwrap();
    let err = m.acquire("emu-a", "task-2", 0, &known()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "device emu-a is leased by task-1 until 1030000 (unix ms)"
    );
    let err = m.acquire("emu-z", "task-2", 0, &known()).unwrap_err();
    assert!(matches!(err, DeviceError::UnknownDevice { ref serial } if serial == "emu-z"));
    assert!(matches!(
        m.acquire("emu-b", " ", 0, &known()),
        Err(DeviceError::InvalidArgument(_))
    ));
}

#[test]
fn same_holder_reacquiring_keeps_its_lease() {
    let (clock, m) = manager();
    let a = m.acquire("emu-a", "task-1", 0, &known()).unwrap();
    clock.advance(10_000);
    let again = m.acquire("emu-a", "task-1", 0, &known()).unwrap();
    assert_eq!(again.lease_id, a.lease_id);
    assert_eq!(again.expires_at_ms, a.expires_at_ms + 10_000);
}

#[test]
fn leases_expire_and_renewal_extends_them() {
    let (clock, m) = manager();
    let a = m.acquire("emu-a", "task-1", 1_000, &known()).unwrap();
    clock.advance(900);
    let renewed = m.renew(&lref(&a), 2_000).unwrap();
    assert_eq!(renewed.expires_at_ms, 1_000_000 + 900 + 2_000);
    clock.advance(1_999);
    m.check(&lref(&a)).unwrap();
    clock.advance(1);
    // The holder died: the lease lapsed, and someone else can take the device.
    assert!(matches!(
        m.check(&lref(&a)),
        Err(DeviceError::NoLease { .. })
    ));
    assert!(m.info("emu-a").is_none());
    let b = m.acquire("emu-a", "task-2", 0, &known()).unwrap();
    assert_ne!(b.lease_id, a.lease_id);
    // The stale lease is told its lease ended, not who holds the device now (the new holder
    // may be another tenant's task).
    let err = m.check(&lref(&a)).unwrap_err();
    assert!(matches!(err, DeviceError::LeaseReplaced { .. }), "{err}");
    assert!(!err.to_string().contains("task-2"), "{err}");
    assert!(m.renew(&lref(&a), 0).is_err());
}

#[test]
fn ttl_is_clamped_to_the_maximum() {
    let (_, m) = manager();
    let a = m.acquire("emu-a", "t", u32::MAX, &known()).unwrap();
    assert_eq!(a.ttl_ms, 60_000);
}

#[test]
fn release_frees_the_device_and_is_idempotent() {
    let (_, m) = manager();
    let a = m.acquire("emu-a", "task-1", 0, &known()).unwrap();
    let err = m
        .release(&LeaseRef {
            serial: "emu-a".into(),
            lease_id: "forged".into(),
        })
        .unwrap_err();
    assert!(matches!(err, DeviceError::LeaseReplaced { .. }));
    assert!(m.release(&lref(&a)).unwrap());
    assert!(!m.release(&lref(&a)).unwrap());
    let err = m.check(&lref(&a)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no lease held on device emu-a; acquire one first"
    );
    m.acquire("emu-a", "task-2", 0, &known()).unwrap();
}

#[test]
fn concurrent_acquirers_exactly_one_wins() {
    let m = Arc::new(LeaseManager::new(Arc::new(SystemClock), 30_000, 60_000));
    let known = Arc::new(known());
    let barrier = Arc::new(std::sync::Barrier::new(16));
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let (m, known, barrier) = (m.clone(), known.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                m.acquire("emu-a", &format!("holder-{i}"), 0, &known)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(winners, 1);
    let winner = results.iter().find_map(|r| r.as_ref().ok()).unwrap();
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(r.to_string().contains(&winner.holder), "{r}");
    }
}
