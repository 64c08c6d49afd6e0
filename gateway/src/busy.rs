//! What a caller is told about devices other tasks hold. The device service names a lease's
//! holder (a task id) in its refusals and its device list; the gateway passes a holder on only
//! to the tenant whose task it is, so a tenant never learns another's task ids or how long
//! they keep a device: to anyone else a leased device is "busy". Whose task a holder is comes
//! from the task store (a holder that is no task of the caller's tenant, or that cannot be
//! looked up, counts as someone else's).
use droidmesh_proto::v1::{DeviceInfo, LeaseInfo, ListDevicesRequest};
use tonic::{Code, Status};

use crate::deps::Deps;

/// Most lease holders looked up in one answer; beyond them holders are treated as another
/// tenant's (a look-up may be a store query).
const MAX_LOOKUPS: usize = 64;
/// Most of the caller's own holders named in one refusal.
const MAX_NAMED: usize = 8;

/// Whether the device service's refusal to lease says the device (FAILED_PRECONDITION) or
/// every device (RESOURCE_EXHAUSTED) is leased.
pub fn is_busy(refusal: &Status) -> bool {
    matches!(
        refusal.code(),
        Code::FailedPrecondition | Code::ResourceExhausted
    )
}

/// Whether the lease holder `holder` is a task of `tenant`.
async fn is_mine(deps: &Deps, tenant: &str, holder: &str) -> bool {
    let Some(store) = &deps.store else {
        return false;
    };
    match store.find(holder).await {
        Ok(Some(crate::store::Found::Live(entry))) => entry.tenant == tenant,
        Ok(Some(crate::store::Found::Stored(task))) => task.tenant == tenant,
        Ok(None) | Err(_) => false,
    }
}

/// The device service's list, or `None` when it does not answer.
async fn devices(deps: &Deps) -> Option<Vec<DeviceInfo>> {
    let mut device = deps.device.clone();
    device
        .list_devices(ListDevicesRequest {})
        .await
        .ok()
        .map(|r| r.into_inner().devices)
}

/// Why the device service would not lease what a task of `tenant` asked for, in words that
/// name only that tenant's tasks: `serial` (empty: any device) among `allowed` (the caller's
/// devices, when its key has some). Refusals the gateway worded itself (a restricted key's
/// devices all leased) carry no holder and are passed on.
pub async fn refusal(
    deps: &Deps,
    tenant: &str,
    serial: &str,
    allowed: Option<&[String]>,
    status: &Status,
) -> String {
    if serial.is_empty() && allowed.is_some() {
        return status.message().to_owned();
    }
    let list = devices(deps).await.unwrap_or_default();
    if !serial.is_empty() {
        return one(deps, tenant, serial, lease_on(&list, serial)).await;
    }
    let leased: Vec<&DeviceInfo> = list.iter().filter(|d| d.lease.is_some()).collect();
    let mut mine = Vec::new();
    for d in leased.iter().take(MAX_LOOKUPS) {
        let Some(l) = &d.lease else { continue };
        if mine.len() < MAX_NAMED && is_mine(deps, tenant, &l.holder).await {
            mine.push(format!("{} by {}", d.serial, l.holder));
        }
    }
    let all = if leased.is_empty() {
        "every device is busy".to_owned()
    } else {
        format!("every device is busy (all {} leased)", leased.len())
    };
    if mine.is_empty() {
        all
    } else {
        format!("{all}; tasks of this tenant hold {}", mine.join(", "))
    }
}

/// The lease on `serial` in `list`, if it is leased.
fn lease_on<'a>(list: &'a [DeviceInfo], serial: &str) -> Option<&'a LeaseInfo> {
    list.iter()
        .find(|d| d.serial == serial)
        .and_then(|d| d.lease.as_ref())
}

/// "device S is busy", or, when a task of `tenant` holds it, which task and until when.
async fn one(deps: &Deps, tenant: &str, serial: &str, lease: Option<&LeaseInfo>) -> String {
    if let Some(l) = lease
        && is_mine(deps, tenant, &l.holder).await
    {
        return format!(
            "device {serial} is leased by {} (a task of this tenant) until {} (unix ms)",
            l.holder, l.expires_at_ms
        );
    }
    format!("device {serial} is busy")
}

/// Why a task of `tenant` could no longer renew its lease on `serial`: another task holds the
/// device now (named only when it is the tenant's own), or the lease lapsed.
pub async fn lost(deps: &Deps, tenant: &str, serial: &str) -> String {
    match devices(deps).await {
        Some(list) => match lease_on(&list, serial) {
            Some(l) => one(deps, tenant, serial, Some(l)).await,
            None => format!("the lease on device {serial} lapsed"),
        },
        None => format!("device {serial} is no longer leased to this task"),
    }
}

/// The device list as `tenant` may see it: a lease another tenant's task holds (or anyone
/// else) shows that the device is leased, without holder or expiry.
pub async fn hide_foreign_holders(deps: &Deps, tenant: &str, devices: &mut [DeviceInfo]) {
    let mut looked = 0;
    for d in devices {
        let Some(lease) = &mut d.lease else { continue };
        looked += 1;
        if looked > MAX_LOOKUPS || !is_mine(deps, tenant, &lease.holder).await {
            lease.holder.clear();
            lease.expires_at_ms = 0;
        }
    }
}
