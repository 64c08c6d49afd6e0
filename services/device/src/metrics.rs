//! Device metrics: `droidmesh.device.leases`, the leases held now (unexpired, read from every
//! device service of the process when collected), and `droidmesh.adb.command.duration` (s)
//! per device. Serials come from devices that attach, so at most [`MAX_SERIALS`] distinct ones
//! get their own `device.serial` label; the rest read `other`.
use crate::error::DeviceError;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, ObservableGauge};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, Weak};
use std::time::Duration;

/// Distinct serials labelled as themselves.
pub const MAX_SERIALS: usize = 256;
/// Lease sources remembered at once (one per device service in the process).
const MAX_SOURCES: usize = 64;

/// Something that holds leases: a device service.
pub trait LeaseCount: Send + Sync {
    /// Leases held now (expired ones not counted).
    fn held(&self) -> usize;
}

struct Instruments {
    adb: Histogram<f64>,
    _leases: ObservableGauge<i64>,
    serials: Mutex<HashSet<String>>,
}

static SOURCES: Mutex<Vec<Weak<dyn LeaseCount>>> = Mutex::new(Vec::new());

/// Made on first use from the global meter provider, which the process installs first.
fn instruments() -> &'static Instruments {
    static INST: OnceLock<Instruments> = OnceLock::new();
    INST.get_or_init(|| {
        let meter = opentelemetry::global::meter("droidmesh");
        Instruments {
            adb: meter
                .f64_histogram("droidmesh.adb.command.duration")
                .with_unit("s")
                .with_description("ADB shell commands, from sending to the last byte read")
                .with_boundaries(vec![
                    0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0,
                ])
                .build(),
            _leases: meter
                .i64_observable_gauge("droidmesh.device.leases")
                .with_unit("{lease}")
                .with_description("Device leases held now")
                .with_callback(|observer| {
                    let sources = SOURCES.lock().unwrap_or_else(|p| p.into_inner());
                    let held: usize = sources
                        .iter()
                        .filter_map(Weak::upgrade)
                        .map(|s| s.held())
                        .sum();
                    observer.observe(i64::try_from(held).unwrap_or(i64::MAX), &[]);
                })
                .build(),
            serials: Mutex::new(HashSet::new()),
        }
    })
}

/// Counts `source`'s leases in `droidmesh.device.leases` for as long as it lives.
pub fn watch_leases(source: Weak<dyn LeaseCount>) {
    instruments();
    let mut sources = SOURCES.lock().unwrap_or_else(|p| p.into_inner());
    sources.retain(|s| s.strong_count() > 0);
    if sources.len() >= MAX_SOURCES {
        sources.remove(0);
    }
    sources.push(source);
}

/// The `device.serial` attribute for `serial` (or `other` past [`MAX_SERIALS`]).
pub fn serial_label(serial: &str) -> KeyValue {
    let inst = instruments();
    let mut seen = inst.serials.lock().unwrap_or_else(|p| p.into_inner());
    let value = if seen.contains(serial) {
        serial.to_owned()
    } else if seen.len() < MAX_SERIALS {
        seen.insert(serial.to_owned());
        serial.to_owned()
    } else {
        "other".to_owned()
    };
    KeyValue::new("device.serial", value)
}

/// Records one ADB command on the device labelled `serial`.
pub fn adb_command(serial: &KeyValue, took: Duration, error: Option<&DeviceError>) {
    let secs = took.as_secs_f64();
    let inst = instruments();
    match error {
        None => inst.adb.record(secs, std::slice::from_ref(serial)),
        Some(e) => {
            let kind = match e {
                DeviceError::Timeout { .. } => "timeout",
                DeviceError::Unavailable { .. } => "unavailable",
                DeviceError::Adb { .. } => "refused",
                _ => "other",
            };
            inst.adb
                .record(secs, &[serial.clone(), KeyValue::new("error.type", kind)]);
        }
    }
}
