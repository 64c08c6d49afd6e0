//! Typed secrets stay masked in every later read of the device, by anyone.
//!
//! A phone masks a password field itself, but a secret typed into an ordinary field (a PIN
//! box, a search field) would come back in the next UI dump and screenshot, and an app may
//! repeat it elsewhere ("Results for hunter2"). The device service remembers, per device, each
//! secret typed with `TypeText{sensitive}` as digests ([`crate::mask_set`]), never the secret,
//! with the field it went into (resource id and class, or bounds when it has no id) and the
//! lease it was typed under. Every read masks them ([`MaskSet::apply`]). Readers that know
//! secrets send them with each read (`GetStateRequest.masks`): those naming their field are
//! remembered as typed ones, so a restarted service masks again from the first such read;
//! the others mask that answer only.
//!
//! Masks outlive the lease (the next holder must not read the field either) and, with a state
//! directory, the service: every change is written there ([`crate::mask_store`]). At most
//! [`MAX_MASKS`] per device: past it the oldest of earlier leases give way; when all are the
//! current lease's, a further sensitive `TypeText` is refused rather than left unmasked.
//!
//! When a secret shows where its masking cannot be sure (outside its field), the device is
//! marked for the rest of that lease: screenshots are withheld until the lease changes.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use droidmesh_proto::v1::{Bounds, MaskedField, SecretMask, UiElement};

use crate::error::{DeviceError, Result};
use crate::mask_set::{Mask, MaskSet, Piece, Roller};
use crate::mask_store::{MaskStore, Saved, SavedField, SavedMask};

/// Secrets remembered per device.
pub const MAX_MASKS: usize = 1024;

/// Secrets one read may carry.
pub const MAX_READ_MASKS: usize = 64;

/// The character Android shows for each character of a password.
pub const BULLET: char = '\u{2022}';

/// Which element a secret was typed into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldKey {
    Id {
        resource_id: String,
        class_name: String,
    },
    Place(Bounds),
}

impl FieldKey {
    /// The key of `e`: its resource id and class, or its bounds when it has no id.
    pub fn of(e: &UiElement) -> Option<FieldKey> {
        if e.resource_id.is_empty() {
            e.bounds.map(FieldKey::Place)
        } else {
            Some(FieldKey::Id {
                resource_id: e.resource_id.clone(),
                class_name: e.class_name.clone(),
            })
        }
    }

    /// The key a reader sent back (as `TypeText`'s answer named it).
    pub fn from_mask(f: &MaskedField) -> Option<FieldKey> {
        if f.resource_id.is_empty() {
            f.bounds.map(FieldKey::Place)
        } else {
            Some(FieldKey::Id {
                resource_id: f.resource_id.clone(),
                class_name: f.class_name.clone(),
            })
        }
    }

    pub fn matches(&self, e: &UiElement) -> bool {
        match self {
            FieldKey::Id {
                resource_id,
                class_name,
            } => &e.resource_id == resource_id && &e.class_name == class_name,
            FieldKey::Place(b) => e.resource_id.is_empty() && e.bounds.as_ref() == Some(b),
        }
    }
}

/// The field as `TypeText`'s answer names it (`data.field`), for a reader's later masks.
pub fn field_json(e: &UiElement) -> serde_json::Value {
    let b = e.bounds.unwrap_or_default();
    serde_json::json!({
        "resource_id": e.resource_id,
        "class_name": e.class_name,
        "bounds": { "left": b.left, "top": b.top, "right": b.right, "bottom": b.bottom },
    })
}

#[derive(Debug, Clone)]
struct Remembered {
    mask: Mask,
    /// The lease it was typed (or last sent) under; `None`: the device had no lease.
    lease: Option<String>,
}

#[derive(Debug)]
struct Taint {
    lease: Option<String>,
    reason: String,
}

#[derive(Debug, Default)]
struct Table {
    masks: VecDeque<Remembered>,
    taint: Option<Taint>,
}

/// One device's masks and whether its screenshots are withheld.
pub struct SecretFields {
    roller: Roller,
    table: Mutex<Table>,
    /// Where the masks are written on every change, and the device's serial.
    kept: Option<(Arc<MaskStore>, String)>,
}

impl std::fmt::Debug for SecretFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.lock();
        f.debug_struct("SecretFields")
            .field("masks", &t.masks.len())
            .field("withheld", &t.taint.is_some())
            .finish()
    }
}

impl Default for SecretFields {
    fn default() -> Self {
        Self {
            roller: Roller::random(),
            table: Mutex::default(),
            kept: None,
        }
    }
}

impl FieldKey {
    fn saved(&self) -> SavedField {
        match self {
            FieldKey::Id {
                resource_id,
                class_name,
            } => SavedField::Id {
                resource_id: resource_id.clone(),
                class_name: class_name.clone(),
            },
            FieldKey::Place(b) => SavedField::Place {
                left: b.left,
                top: b.top,
                right: b.right,
                bottom: b.bottom,
            },
        }
    }

    fn restored(f: SavedField) -> Self {
        match f {
            SavedField::Id {
                resource_id,
                class_name,
            } => FieldKey::Id {
                resource_id,
                class_name,
            },
            SavedField::Place {
                left,
                top,
                right,
                bottom,
            } => FieldKey::Place(Bounds {
                left,
                top,
                right,
                bottom,
            }),
        }
    }
}

impl SecretFields {
    /// The table of device `serial`, with the masks `store` kept from an earlier run; every
    /// change is written to `store`. Without a store, masks live as long as the process.
    pub fn kept(serial: &str, store: Option<Arc<MaskStore>>) -> Self {
        let Some(store) = store else {
            return Self::default();
        };
        let saved = store.take(serial);
        let roller = saved
            .as_ref()
            .and_then(|s| Roller::from_base(s.base))
            .unwrap_or_else(Roller::random);
        let masks = saved
            .map(|s| s.masks)
            .unwrap_or_default()
            .into_iter()
            .map(|m| Remembered {
                mask: Mask {
                    pieces: m
                        .pieces
                        .into_iter()
                        .map(|(len, hash)| Piece { len, hash })
                        .collect(),
                    field: m.field.map(FieldKey::restored),
                },
                lease: m.lease,
            })
            .collect();
        Self {
            roller,
            table: Mutex::new(Table { masks, taint: None }),
            kept: Some((store, serial.to_owned())),
        }
    }

    /// Writes the masks to the state directory, if there is one. A failed write is logged:
    /// the masks still hold in this process.
    fn keep(&self, t: &Table) {
        let Some((store, serial)) = &self.kept else {
            return;
        };
        let saved = Saved {
            base: self.roller.base(),
            masks: t
                .masks
                .iter()
                .map(|r| SavedMask {
                    pieces: r.mask.pieces.iter().map(|p| (p.len, p.hash)).collect(),
                    field: r.mask.field.as_ref().map(FieldKey::saved),
                    lease: r.lease.clone(),
                })
                .collect(),
        };
        if let Err(e) = store.save(serial, &saved) {
            tracing::warn!(serial = %serial, error = %e, "the masks of typed secrets could not be written to the state directory; a restart of this service would lose them");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that `secret` was typed into `field` (the element focused afterwards) under
    /// `lease`. Refused when [`MAX_MASKS`] of this lease's secrets are remembered already.
    pub fn remember(
        &self,
        serial: &str,
        field: Option<&UiElement>,
        secret: &str,
        lease: Option<&str>,
    ) -> Result<()> {
        let mask = Mask {
            pieces: self.roller.pieces(secret),
            field: field.and_then(FieldKey::of),
        };
        let mut t = self.lock();
        let changed =
            self.insert(&mut t, mask, lease)
                .map_err(|()| DeviceError::TooManySecrets {
                    serial: serial.to_owned(),
                    limit: MAX_MASKS,
                })?;
        if changed {
            self.keep(&t);
        }
        Ok(())
    }

    /// Adds `mask` under `lease`; whether what is kept on disk changed (a new mask, or a known
    /// one under another lease: a known mask moved to newest is not written again, so a reader
    /// sending the same masks at every read writes nothing). `Err` when it is full of this
    /// lease's masks.
    fn insert(&self, t: &mut Table, mask: Mask, lease: Option<&str>) -> Result<bool, ()> {
        if let Some(i) = t
            .masks
            .iter()
            .position(|r| r.mask.pieces == mask.pieces && r.mask.field == mask.field)
        {
            // Known: it is now the current lease's, and the newest.
            if let Some(mut known) = t.masks.remove(i) {
                let same = known.lease.as_deref() == lease;
                known.lease = lease.map(str::to_owned);
                t.masks.push_back(known);
                return Ok(!same);
            }
            return Ok(false);
        }
        if t.masks.len() >= MAX_MASKS {
            let earlier = t.masks.iter().position(|r| r.lease.as_deref() != lease);
            match earlier {
                Some(i) => {
                    t.masks.remove(i);
                }
                None => return Err(()),
            }
        }
        t.masks.push_back(Remembered {
            mask,
            lease: lease.map(str::to_owned),
        });
        Ok(true)
    }

    /// The masks of one read: every remembered secret, and those `sent` by the reader. Sent
    /// secrets naming their field are remembered as typed under `lease`; the others mask this
    /// read only, unless remembered already.
    pub fn for_read(&self, sent: &[SecretMask], lease: Option<&str>) -> Result<MaskSet> {
        if sent.len() > MAX_READ_MASKS {
            return Err(DeviceError::InvalidArgument(format!(
                "a read carries at most {MAX_READ_MASKS} masks, got {}: send the secrets this task may type",
                sent.len()
            )));
        }
        let mut t = self.lock();
        let mut only_here = Vec::new();
        let mut changed = false;
        for s in sent.iter().filter(|s| !s.secret.is_empty()) {
            let pieces = self.roller.pieces(&s.secret);
            match s.field.as_ref().and_then(FieldKey::from_mask) {
                Some(key) => {
                    let mask = Mask {
                        pieces,
                        field: Some(key),
                    };
                    // Past the bound it still masks this read.
                    match self.insert(&mut t, mask.clone(), lease) {
                        Ok(c) => changed |= c,
                        Err(()) => only_here.push(mask),
                    }
                }
                None if t.masks.iter().any(|r| r.mask.pieces == pieces) => {}
                None => only_here.push(Mask {
                    pieces,
                    field: None,
                }),
            }
        }
        if changed {
            self.keep(&t);
        }
        let mut masks: Vec<Mask> = t.masks.iter().map(|r| r.mask.clone()).collect();
        masks.extend(only_here);
        Ok(MaskSet::new(self.roller, masks))
    }

    /// The remembered masks alone (reads made inside an action).
    pub fn remembered(&self) -> MaskSet {
        let masks = self.lock().masks.iter().map(|r| r.mask.clone()).collect();
        MaskSet::new(self.roller, masks)
    }

    /// Withholds screenshots of the device for the rest of `lease` (`None`: until a lease is
    /// taken), saying `reason`.
    pub fn withhold(&self, lease: Option<&str>, reason: String) {
        let mut t = self.lock();
        if t.taint.as_ref().is_none_or(|w| w.lease.as_deref() != lease) {
            t.taint = Some(Taint {
                lease: lease.map(str::to_owned),
                reason,
            });
        }
    }

    /// Why screenshots are withheld under `lease`, if they are. A mark of another lease is
    /// dropped: the lease it was for has ended.
    pub fn withheld(&self, lease: Option<&str>) -> Option<String> {
        let mut t = self.lock();
        match &t.taint {
            Some(w) if w.lease.as_deref() == lease => Some(w.reason.clone()),
            Some(_) => {
                t.taint = None;
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
#[path = "secret_fields_tests.rs"]
mod tests;
