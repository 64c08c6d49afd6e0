//! `ConnectDevice`: attaching a phone by its address. It is an operator's call, refused unless
//! `device.allow_connect` is on (the gateway offers tenants no way to it). When on, a failed
//! attach says one thing whatever answered at the address (nothing, a port that stays silent,
//! another protocol, a phone that refuses the key), and no sooner than
//! `device.command_timeout_ms` after the call, so this service does not tell a caller what
//! listens where; what happened goes to its log.
use std::sync::Arc;
use std::time::Duration;

use droidmesh_proto::v1::{ConnectDeviceRequest, Transport};

use crate::error::{DeviceError, Result};
use crate::registry::{Registry, Slot};

/// Whether phones may be attached by address, and how soon a failed attach answers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttachPolicy {
    pub allowed: bool,
    /// The least time a failed attach takes to answer.
    pub floor: Duration,
}

/// Attaches the phone `r` names, as `policy` allows.
pub(crate) async fn attach(
    registry: &Registry,
    policy: AttachPolicy,
    r: &ConnectDeviceRequest,
) -> Result<Arc<Slot>> {
    if !policy.allowed {
        return Err(DeviceError::ConnectOff);
    }
    let transport = Transport::try_from(r.transport).map_err(|_| {
        DeviceError::InvalidArgument(format!(
            "unknown transport {}: use TRANSPORT_ADB_SERVER (1), TRANSPORT_TCP_DIRECT (2) or leave it unset",
            r.transport
        ))
    })?;
    let started = tokio::time::Instant::now();
    match registry.connect(&r.address, transport).await {
        Ok(slot) => Ok(slot),
        // The address's form or this service's config: nothing was dialled.
        Err(e @ DeviceError::InvalidArgument(_)) => Err(e),
        Err(e) => {
            let address = r.address.trim();
            tracing::warn!(
                address = %crate::printable::printable(address, 64),
                ?transport,
                error = %e,
                "could not attach a phone"
            );
            tokio::time::sleep_until(started + policy.floor).await;
            Err(DeviceError::AttachFailed {
                address: address.to_owned(),
            })
        }
    }
}
