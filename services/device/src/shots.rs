//! Screenshots of a device with typed secrets. The screen is looked at (a UI dump) before and
//! after the capture; when the masked elements stood in the same places both times, their
//! bounds are blacked out before the image is scaled or encoded. When they moved, the capture
//! is taken again (the screen was changing); when a secret shows outside its field, the
//! device's screenshots are withheld for the rest of its lease ([`crate::secret_fields`]).
use droidmesh_proto::v1::{Bounds, Screenshot};

use crate::error::{DeviceError, Result};
use crate::mask_set::MaskSet;
use crate::registry::Slot;
use crate::screenshot::fit_png_masked;
use crate::ui_dump::parse_ui_dump;

/// A screenshot, or why there is none.
#[derive(Debug)]
pub enum Shot {
    Taken(Screenshot),
    Withheld(String),
}

/// Captures tried while the masked elements keep moving.
const TRIES: usize = 3;

/// Screenshots decoded and scaled at the same time.
const IMAGE_WORKERS: usize = 2;
static IMAGE_WORK: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(IMAGE_WORKERS);

/// Fits `png` into `max_side` (0: device resolution) with `regions` blacked out.
pub async fn process(png: Vec<u8>, max_side: u32, regions: Vec<Bounds>) -> Result<Screenshot> {
    // Scaling is CPU work: keep it off the async workers. A full-resolution frame decodes to
    // ~8 MB, so at most IMAGE_WORKERS are in flight however many devices are read at once:
    // memory stays bounded and the CPU is not oversubscribed.
    let _permit = IMAGE_WORK
        .acquire()
        .await
        .map_err(|e| DeviceError::Image(format!("image workers closed: {e}")))?;
    tokio::task::spawn_blocking(move || fit_png_masked(&png, max_side, &regions))
        .await
        .map_err(|e| DeviceError::Image(format!("screenshot worker stopped: {e}")))?
}

/// The full reason screenshots are withheld, from what masking found.
pub fn withheld_reason(found: &str) -> String {
    format!(
        "{found}; the app may draw it where masking cannot find it, so screenshots of this device are withheld for the rest of its lease"
    )
}

/// Withholds the device's screenshots under `lease` when `elsewhere` says why; the reason.
pub fn withhold_if(slot: &Slot, lease: Option<&str>, elsewhere: Option<String>) -> Option<String> {
    let reason = withheld_reason(&elsewhere?);
    slot.secret_fields.withhold(lease, reason.clone());
    Some(reason)
}

/// A screenshot masked by `masks`, the screen having shown the masked elements at `before`
/// (sorted bounds, from a dump taken just before this call).
pub async fn masked(
    slot: &Slot,
    max_side: u32,
    masks: &MaskSet,
    mut before: Vec<Bounds>,
    lease: Option<&str>,
) -> Result<Shot> {
    for _ in 0..TRIES {
        if let Some(why) = slot.secret_fields.withheld(lease) {
            return Ok(Shot::Withheld(why));
        }
        let png = slot.adb.shell_bytes("screencap -p").await?;
        let observed = crate::state::observe(slot).await?;
        let mut ui = parse_ui_dump(&observed.ui.text)?;
        let after = masks.apply(&mut ui);
        if let Some(why) = withhold_if(slot, lease, after.elsewhere) {
            return Ok(Shot::Withheld(why));
        }
        if after.regions == before {
            return process(png, max_side, after.regions).await.map(Shot::Taken);
        }
        before = after.regions;
    }
    Ok(Shot::Withheld(format!(
        "the screen kept changing while the places of its masked secrets were read ({TRIES} tries); ask again once it is still"
    )))
}
