//! A task that may wait for its device (`wait_for_device`): it asks the device service for a
//! lease, and while the device (or, without a serial, every device) is leased it waits — woken
//! at once when a task of this gateway releases a lease, and otherwise asking again with
//! backoff — until `device_wait_ms` has passed.
use std::time::Duration;

use droidmesh_proto::v1::{AcquireLeaseRequest, Lease, ListDevicesRequest, TaskState};
use tokio::time::Instant;
use tonic::Code;

use crate::error::{GatewayError, PeerError};
use crate::runner::{Deps, finish_early, set_state};
use crate::store::TaskEntry;

/// The longest pause between two asks (unless `device_poll_ms` is longer).
const MAX_POLL: Duration = Duration::from_secs(5);

/// Waits for the task's lease. `None` when the task ended meanwhile (the ending is recorded):
/// cancelled, the wait expired, or the device service refused for good.
pub async fn wait_for_lease(deps: &Deps, entry: &TaskEntry, serial: &str) -> Option<Lease> {
    let wait = Duration::from_millis(deps.cfg.device_wait_ms);
    let deadline = Instant::now() + wait;
    let first_poll = Duration::from_millis(deps.cfg.device_poll_ms);
    let mut poll = first_poll;
    let mut device = deps.device.clone();
    let mut told: Option<Code> = None;
    loop {
        // Listen for releases before asking, so one that happens between the refusal and the
        // wait is not missed.
        let released = deps.released.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        let req = AcquireLeaseRequest {
            serial: serial.to_owned(),
            holder: entry.id.clone(),
            ttl_ms: deps.cfg.lease_ttl_ms,
        };
        let refusal = tokio::select! {
            r = device.acquire_lease(req) => match r {
                Ok(lease) => return Some(lease.into_inner()),
                Err(s) => s,
            },
            reason = entry.cancelled() => {
                finish_early(entry, TaskState::Cancelled, &reason);
                return None;
            }
        };
        let why = match refusal.code() {
            Code::ResourceExhausted => every_device_busy(deps).await,
            Code::FailedPrecondition | Code::Unavailable => {
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
