//! Device leases: one holder per device, expiring after a TTL unless renewed.
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use droidmesh_proto::v1::{Lease, LeaseInfo, LeaseRef};

use crate::error::{DeviceError, Result};

/// Where "now" comes from, so that expiry is testable without sleeping.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Unix time in milliseconds.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        now_unix_ms()
    }
}

/// Unix time in milliseconds from the system clock.
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A clock that moves only when told to (for tests and simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        Self(AtomicI64::new(start_ms))
    }
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    lease_id: String,
    holder: String,
    expires_at_ms: i64,
    ttl_ms: u32,
}

/// Leases of all devices of one service instance.
#[derive(Debug)]
pub struct LeaseManager {
    clock: Arc<dyn Clock>,
    default_ttl_ms: u32,
    max_ttl_ms: u32,
    leases: Mutex<HashMap<String, Entry>>,
}

impl LeaseManager {
    pub fn new(clock: Arc<dyn Clock>, default_ttl_ms: u32, max_ttl_ms: u32) -> Self {
        Self {
            clock,
            default_ttl_ms: default_ttl_ms.max(1),
            max_ttl_ms: max_ttl_ms.max(default_ttl_ms).max(1),
            leases: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ttl(&self, requested: u32) -> u32 {
        match requested {
            0 => self.default_ttl_ms,
            t => t.min(self.max_ttl_ms),
        }
    }

    /// Acquires `serial` (or, when empty, the first free device of `known` in serial order)
    /// for `holder`, which must be short printable text ([`crate::printable::check_holder`]).
    /// A holder acquiring a device it already holds gets its lease renewed.
    pub fn acquire(
        &self,
        serial: &str,
        holder: &str,
        ttl_ms: u32,
        known: &[String],
    ) -> Result<Lease> {
        crate::printable::check_holder(holder)?;
        let now = self.clock.now_ms();
        let ttl = self.ttl(ttl_ms);
        let mut leases = self.lock();
        let target = if serial.is_empty() {
            let mut candidates: Vec<&String> = known.iter().collect();
            candidates.sort();
            candidates.dedup();
            if candidates.is_empty() {
                return Err(DeviceError::NoDevices);
            }
            let free = candidates.iter().find(|s| match leases.get(s.as_str()) {
                None => true,
                Some(e) => e.expires_at_ms <= now || e.holder == holder,
            });
            match free {
                Some(s) => (*s).clone(),
                None => {
                    let holders: Vec<String> = candidates
                        .iter()
                        .filter_map(|s| {
                            leases
                                .get(s.as_str())
                                .map(|e| format!("{s} by {} until {}", e.holder, e.expires_at_ms))
                        })
                        .collect();
                    return Err(DeviceError::AllBusy {
                        holders: holders.join(", "),
                    });
                }
            }
        } else {
            if !known.iter().any(|k| k == serial) {
                return Err(DeviceError::UnknownDevice {
                    serial: serial.to_owned(),
                });
            }
            serial.to_owned()
        };
        let entry = match leases.get(&target) {
            Some(e) if e.expires_at_ms > now && e.holder != holder => {
                return Err(DeviceError::LeaseHeld {
                    serial: target,
                    holder: e.holder.clone(),
                    expires_at_ms: e.expires_at_ms,
                });
            }
            Some(e) if e.expires_at_ms > now => Entry {
                expires_at_ms: now.saturating_add(i64::from(ttl)),
                ttl_ms: ttl,
                ..e.clone()
            },
            _ => Entry {
                lease_id: uuid::Uuid::new_v4().to_string(),
                holder: holder.to_owned(),
                expires_at_ms: now.saturating_add(i64::from(ttl)),
                ttl_ms: ttl,
            },
        };
        leases.insert(target.clone(), entry.clone());
        Ok(to_lease(&target, &entry))
    }

    /// Extends a valid lease by `ttl_ms` (0: the default) from now.
    pub fn renew(&self, lease: &LeaseRef, ttl_ms: u32) -> Result<Lease> {
        let now = self.clock.now_ms();
        let ttl = self.ttl(ttl_ms);
        let mut leases = self.lock();
        let entry = valid_entry(&mut leases, lease, now)?;
        entry.expires_at_ms = now.saturating_add(i64::from(ttl));
        entry.ttl_ms = ttl;
        Ok(to_lease(&lease.serial, entry))
    }

    /// Releases a lease. Releasing a lease that already lapsed returns `false`.
    pub fn release(&self, lease: &LeaseRef) -> Result<bool> {
        let now = self.clock.now_ms();
        let mut leases = self.lock();
        match valid_entry(&mut leases, lease, now) {
            Ok(_) => {
                leases.remove(&lease.serial);
                Ok(true)
            }
            Err(DeviceError::NoLease { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Checks that `lease` is the current, unexpired lease of its device.
    pub fn check(&self, lease: &LeaseRef) -> Result<()> {
        let now = self.clock.now_ms();
        let mut leases = self.lock();
        valid_entry(&mut leases, lease, now).map(|_| ())
    }

    /// Leases held now (expired ones not counted).
    pub fn held(&self) -> usize {
        let now = self.clock.now_ms();
        self.lock()
            .values()
            .filter(|e| e.expires_at_ms > now)
            .count()
    }

    /// The id of the lease on `serial` now, if any.
    pub fn current_id(&self, serial: &str) -> Option<String> {
        let now = self.clock.now_ms();
        self.lock()
            .get(serial)
            .filter(|e| e.expires_at_ms > now)
            .map(|e| e.lease_id.clone())
    }

    /// Who holds `serial` now, if anyone.
    pub fn info(&self, serial: &str) -> Option<LeaseInfo> {
        let now = self.clock.now_ms();
        self.lock()
            .get(serial)
            .filter(|e| e.expires_at_ms > now)
            .map(|e| LeaseInfo {
                holder: e.holder.clone(),
                expires_at_ms: e.expires_at_ms,
            })
    }
}

fn valid_entry<'a>(
    leases: &'a mut HashMap<String, Entry>,
    lease: &LeaseRef,
    now: i64,
) -> Result<&'a mut Entry> {
    let serial = &lease.serial;
    match leases.get_mut(serial) {
        Some(e) if e.expires_at_ms > now => {
            if e.lease_id == lease.lease_id {
                Ok(e)
            } else {
                Err(DeviceError::LeaseReplaced {
                    serial: serial.clone(),
                })
            }
        }
        _ => Err(DeviceError::NoLease {
            serial: serial.clone(),
        }),
    }
}

fn to_lease(serial: &str, e: &Entry) -> Lease {
    Lease {
        serial: serial.to_owned(),
        lease_id: e.lease_id.clone(),
        holder: e.holder.clone(),
        expires_at_ms: e.expires_at_ms,
        ttl_ms: e.ttl_ms,
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
