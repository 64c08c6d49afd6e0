//! A task that may wait for its device (`wait_for_device`): it asks the device service for a
//! lease, and while the device (or, without a serial, every device) is leased it waits — woken
//! at once when a task of this gateway releases a lease, and otherwise asking again with
//! backoff — until `device_wait_ms` has passed.
use std::time::Duration;

use droidmesh_proto::v1::{AcquireLeaseRequest, Lease, ListDevicesRequest, TaskState};
use tokio::time::Instant;
use tonic::Code;

use crate::deps::Deps;
use crate::entry::TaskEntry;
use crate::error::{GatewayError, PeerError};
use crate::task_state::{finish_early, set_state};

/// The longest pause between two asks (unless `device_poll_ms` is longer).
const MAX_POLL: Duration = Duration::from_secs(5);

/// Waits for the task's lease. `None` when the task ended meanwhile (the ending is recorded):
/// cancelled, the wait expired, or the device service refused for good.
pub async fn wait_for_lease(
    deps: &Deps,
    entry: &TaskEntry,
    serial: &str,
    allowed: Option<&[String]>,
) -> Option<Lease> {
    let wait = Duration::from_millis(deps.cfg.device_wait_ms);
    let deadline = Instant::now() + wait;
    let first_poll = Duration::from_millis(deps.cfg.device_poll_ms);
    let mut poll = first_poll;
    let mut told: Option<Code> = None;
    loop {
        // Listen for releases before asking, so one that happens between the refusal and the
        // wait is not missed.
        let released = deps.released.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        let refusal = tokio::select! {
            r = acquire(deps, serial, &entry.id, allowed) => match r {
                Ok(lease) => return Some(lease),
                Err(s) => s,
            },
            reason = entry.cancelled() => {
                finish_early(entry, TaskState::Cancelled, &reason);
                return None;
            }
        };
        let why = match refusal.code() {
            Code::ResourceExhausted if allowed.is_some() => {
                format!("waiting for a device: {}", refusal.message())
            }
            Code::ResourceExhausted => every_device_busy(deps).await,
            Code::FailedPrecondition => {
                let why = crate::busy::refusal(deps, &entry.tenant, serial, allowed, &refusal);
                format!("waiting for a device: {}", why.await)
            }
            Code::Unavailable => {
                let peer = PeerError::call("device", &deps.device_endpoint, &refusal);
                format!("waiting for a device: {}", peer.message)
            }
            _ => {
                let e = GatewayError::from_lease(&deps.device_endpoint, &refusal);
                finish_early(entry, TaskState::Failed, &e.to_string());
                return None;
            }
        };
        // One status event per kind of refusal, not one per ask.
        if told != Some(refusal.code()) {
            set_state(entry, TaskState::Pending, &why);
            told = Some(refusal.code());
        }
        tokio::select! {
            _ = &mut released => poll = first_poll,
            _ = tokio::time::sleep(poll) => poll = (poll * 2).min(MAX_POLL.max(first_poll)),
            _ = tokio::time::sleep_until(deadline) => {
                let reason = why.trim_start_matches("waiting for a device: ");
                finish_early(
                    entry,
                    TaskState::Failed,
                    &format!(
                        "no device became free within {} ms (gateway.device_wait_ms): {reason}",
                        wait.as_millis()
                    ),
                );
                return None;
            }
            reason = entry.cancelled() => {
                finish_early(entry, TaskState::Cancelled, &reason);
                return None;
            }
        }
    }
}

/// Asks the device service for a lease on `serial`, or with `serial` empty on any free device
/// — among `allowed` when the caller is restricted to some devices: each is asked for in turn
/// (every one leased is RESOURCE_EXHAUSTED, none attached NOT_FOUND, as the device service
/// answers for all of its devices).
pub async fn acquire(
    deps: &Deps,
    serial: &str,
    holder: &str,
    allowed: Option<&[String]>,
) -> Result<Lease, tonic::Status> {
    let mut device = deps.device.clone();
    let ask = |serial: &str| AcquireLeaseRequest {
        serial: serial.to_owned(),
        holder: holder.to_owned(),
        ttl_ms: deps.cfg.lease_ttl_ms,
    };
    let Some(allowed) = allowed.filter(|_| serial.is_empty()) else {
        return device
            .acquire_lease(ask(serial))
            .await
            .map(|r| r.into_inner());
    };
    let mut busy = 0;
    for s in allowed {
        match device.acquire_lease(ask(s)).await {
            Ok(lease) => return Ok(lease.into_inner()),
            Err(st)
                if matches!(
                    st.code(),
                    Code::FailedPrecondition | Code::ResourceExhausted
                ) =>
            {
                busy += 1
            }
            Err(st) if st.code() == Code::NotFound => {}
            Err(st) => return Err(st),
        }
    }
    if busy > 0 {
        return Err(tonic::Status::resource_exhausted(format!(
            "all {busy} attached devices this key may use are leased"
        )));
    }
    Err(tonic::Status::not_found(format!(
        "none of the {} devices this key may use is attached to the device service",
        allowed.len()
    )))
}

/// "waiting for a device: all N leased", N counted from the device service's list.
async fn every_device_busy(deps: &Deps) -> String {
    let mut device = deps.device.clone();
    match device.list_devices(ListDevicesRequest {}).await {
        Ok(list) => {
            let leased = list
                .into_inner()
                .devices
                .iter()
                .filter(|d| d.lease.is_some())
                .count();
            format!("waiting for a device: all {leased} leased")
        }
        Err(_) => "waiting for a device: every device is leased".into(),
    }
}
