//! Reading a device: UI tree, focus and keyboard in one command ([`observe`]), screen size
//! (once per device) and screenshot, concurrently.
use std::sync::Arc;
use std::sync::atomic::Ordering;

use droidmesh_proto::v1::{PhoneState, ScreenSize, Screenshot, UiState};

use crate::device_output::{parse_focus, parse_keyboard_shown, parse_wm};
use crate::error::{DeviceError, Result};
use crate::lease::now_unix_ms;
use crate::mask_set::MaskSet;
use crate::observe::{self, Observed};
use crate::portal::UiSource;
use crate::registry::Slot;
use crate::shots::{self, Shot};
use crate::ui_dump::{ParsedUi, parse_ui_dump};

/// Dumps and parses the UI hierarchy, masking the secrets typed on the device.
pub async fn read_ui(slot: &Slot) -> Result<ParsedUi> {
    let mut ui = read_ui_unmasked(slot).await?;
    slot.secret_fields.remembered().apply(&mut ui);
    Ok(ui)
}

/// The UI as the device shows it; only for finding the field a secret was just typed into.
pub async fn read_ui_unmasked(slot: &Slot) -> Result<ParsedUi> {
    let raw = slot.adb.shell("uiautomator dump /dev/tty").await?;
    parse_ui_dump(&raw)
}

/// Screen size and density, read once per device.
pub async fn screen_size(slot: &Slot) -> Result<(u32, u32, u32)> {
    slot.screen
        .get_or_try_init(|| async {
            let size = slot.adb.shell("wm size").await?;
            let density = slot.adb.shell("wm density").await.unwrap_or_default();
            parse_wm(&format!("{size}\n{density}")).ok_or_else(|| DeviceError::BadOutput {
                serial: slot.adb.serial().to_owned(),
                command: "wm size".into(),
                detail: format!("expected 'Physical size: WxH', got '{}'", size.trim()),
            })
        })
        .await
        .copied()
}

/// Whether some fixed fact about the device (see [`learn`]) is still to be asked.
pub fn unlearned(slot: &Slot) -> bool {
    slot.needs_description()
        || (slot.is_usable()
            && !slot.learned.load(Ordering::Acquire)
            && (slot.screen.get().is_none() || !slot.ui_source.known()))
}

/// Reads, all at once, what does not change about a device: model and product when adb did
/// not give them (asked again at every call until they come, as ListDevices shows them), the
/// screen's size and where its UI is read from (asked once here, answered or not). A device's
/// first screen read would otherwise ask for the last two itself (three more commands);
/// ListDevices learns them for the devices it lists.
pub async fn learn(slot: &Slot) {
    let serial = slot.adb.serial();
    let first = !slot.learned.swap(true, Ordering::AcqRel);
    let rest = async {
        if first {
            let (screen, _) = tokio::join!(screen_size(slot), slot.ui_source.get(&slot.adb));
            screen.map(|_| ())
        } else {
            Ok(())
        }
    };
    let (described, screen) = tokio::join!(slot.describe(), rest);
    if let Err(e) = described {
        tracing::debug!(%serial, error = %e, "cannot read model and product");
    }
    if let Err(e) = screen {
        tracing::debug!(%serial, error = %e, "cannot read the screen size");
    }
}

/// Takes a screenshot and fits it into `max_side` (0: device resolution), unmasked: for a
/// device with no secrets to mask.
pub async fn screenshot(slot: &Slot, max_side: u32) -> Result<Screenshot> {
    let png = slot.adb.shell_bytes("screencap -p").await?;
    shots::process(png, max_side, Vec::new()).await
}

/// A screenshot with `masks` applied (see [`shots`]); refused when it is withheld.
pub async fn take_screenshot(
    slot: &Slot,
    max_side: u32,
    masks: &MaskSet,
    lease: Option<&str>,
) -> Result<Screenshot> {
    if masks.is_empty() {
        return screenshot(slot, max_side).await;
    }
    let observed = observe(slot).await?;
    let mut ui = parse_ui_dump(&observed.ui.text)?;
    let found = masks.apply(&mut ui);
    shots::withhold_if(slot, lease, found.elsewhere);
    match shots::masked(slot, max_side, masks, found.regions, lease).await? {
        Shot::Taken(s) => Ok(s),
        Shot::Withheld(reason) => Err(DeviceError::ScreenshotWithheld {
            serial: slot.adb.serial().to_owned(),
            reason,
        }),
    }
}

/// Reads the device once: UI tree, focus and keyboard in one command. The tree comes from
/// the companion service when the device has it (turned into the dump format); when the
/// companion fails to answer, from `uiautomator dump` for this observation.
pub async fn observe(slot: &Slot) -> Result<Observed> {
    let source = slot.ui_source.get(&slot.adb).await;
    let nonce = observe::nonce();
    let out = slot.adb.shell(&observe::script(&nonce, source)).await?;
    let mut observed = observe::split(&out, &nonce);
    observed.source = source;
    if source == UiSource::Portal {
        match crate::portal::to_dump(&observed.ui.text) {
            Ok(dump) => observed.ui.text = dump,
            Err(why) => {
                tracing::debug!(serial = slot.adb.serial(), %why, "the companion service did not answer; reading with uiautomator");
                observed.ui.text = slot.adb.shell("uiautomator dump /dev/tty").await?;
                observed.source = UiSource::Uiautomator;
            }
        }
    }
    Ok(observed)
}

/// Reads the whole state with `masks` applied; the UI snapshot becomes the one later index
/// actions refer to. `lease` is the device's lease now, which a withheld screenshot is
/// withheld for.
pub async fn read_state(
    slot: &Slot,
    screenshot_max_side: Option<u32>,
    masks: &MaskSet,
    lease: Option<&str>,
) -> Result<UiState> {
    // With nothing to mask, the screenshot is taken alongside the dump; else after it (see
    // `shots`).
    let plain = masks.is_empty();
    let shot = async {
        match screenshot_max_side.filter(|_| plain) {
            Some(side) => screenshot(slot, side).await.map(Some),
            None => Ok(None),
        }
    };
    // The dump, focus and keyboard in one device command (see `observe`), or the observation
    // the last action settled on, taken just now.
    let observation = async {
        let observed = match slot.settle.take_fresh() {
            // Its fingerprint was kept with it.
            Some(o) => o,
            None => {
                let o = observe(slot).await?;
                slot.settle.seen(&o);
                o
            }
        };
        Ok::<_, DeviceError>(observed)
    };
    let (observed, screen, mut shot) = tokio::try_join!(observation, screen_size(slot), shot)?;
    let mut ui = parse_ui_dump(&observed.ui.text)?;
    let found = masks.apply(&mut ui);
    shots::withhold_if(slot, lease, found.elsewhere);
    let mut withheld = String::new();
    if let Some(side) = screenshot_max_side.filter(|_| !plain) {
        match shots::masked(slot, side, masks, found.regions, lease).await? {
            Shot::Taken(s) => shot = Some(s),
            Shot::Withheld(why) => withheld = why,
        }
    }
    let (package, activity) = parse_focus(&observed.window.text);
    let ime = &observed.ime.text;
    let ui = Arc::new(ui);
    *slot.last_ui.lock().unwrap_or_else(|p| p.into_inner()) = Some(ui.clone());
    let focused = ui.focused();
    Ok(UiState {
        serial: slot.adb.serial().to_owned(),
        elements: ui.elements.clone(),
        phone: Some(PhoneState {
            package,
            activity,
            keyboard_shown: parse_keyboard_shown(ime),
            focused_index: ui.focused_index,
            focused_text: focused.map(|e| e.text.clone()).unwrap_or_default(),
        }),
        screen: Some(ScreenSize {
            width: screen.0,
            height: screen.1,
            density_dpi: screen.2,
        }),
        screenshot: shot,
        captured_at_ms: now_unix_ms(),
        ui_source: observed.source.name().into(),
        screenshot_withheld: withheld,
    })
}

/// The UI snapshot index actions refer to: the latest GetState's, or a fresh dump if the
/// device has not been read yet.
pub async fn snapshot_for_index(slot: &Slot) -> Result<Arc<ParsedUi>> {
    let cached = slot
        .last_ui
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    match cached {
        Some(ui) => Ok(ui),
        None => {
            let ui = Arc::new(read_ui(slot).await?);
            *slot.last_ui.lock().unwrap_or_else(|p| p.into_inner()) = Some(ui.clone());
            Ok(ui)
        }
    }
}
