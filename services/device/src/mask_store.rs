//! Typed secrets' masks kept across restarts of the device service.
//!
//! A secret typed into an ordinary field stays on the phone's screen after the device service
//! that masked it stops; a service started again would show it to the next reader (the
//! manager, another tenant's task) until a reader that knows the secret reads again. With a
//! state directory (`[device] state_dir`), each device's masks are written to a file there on
//! every change and read back when the service starts: `masks-<serial in hex>.json`, holding the
//! device's hash base and each secret's digests, field and lease, never the secret.
//!
//! The files are as sensitive as the adb key beside them (a short PIN's digest is brute-forced
//! with the base): they are written with mode 0600 in a directory of mode 0700, the trust the
//! service's key already needs, since that key reaches the phone the secret was typed into.
//! A file that cannot be read stops the service at start, naming it: starting without it would
//! show what it masks.
use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{DeviceError, Result};

/// Largest masks file read back (1024 masks of a few pieces each fit well within it).
const MAX_FILE_BYTES: u64 = 4 << 20;

/// One device's masks as written: the hash base and each mask, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saved {
    pub base: u64,
    pub masks: Vec<SavedMask>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedMask {
    /// `(length in bytes, digest)` of the secret and its lines.
    pub pieces: Vec<(usize, u64)>,
    pub field: Option<SavedField>,
    pub lease: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum SavedField {
    Id {
        resource_id: String,
        class_name: String,
    },
    Place {
        left: i32,
        top: i32,
        right: i32,
        bottom: i32,
    },
}

/// The state directory and the masks found there at start.
#[derive(Debug)]
pub struct MaskStore {
    dir: PathBuf,
    found: std::sync::Mutex<HashMap<String, Saved>>,
}

impl MaskStore {
    /// Opens (creating) `dir` and reads every masks file in it.
    pub fn open(dir: &Path) -> Result<Self> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            DeviceError::Config(format!("device.state_dir {}: {what}: {e}", dir.display()))
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail("cannot be created", &e))?;
        let mut found = HashMap::new();
        let entries = std::fs::read_dir(dir).map_err(|e| fail("cannot be listed", &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| fail("cannot be listed", &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(serial) = serial_of(&name) else {
                continue;
            };
            let path = entry.path();
            let saved = read(&path).map_err(|e| {
                DeviceError::Config(format!(
                    "{} cannot be read: {e}; it holds the masks of secrets typed on device \
                     {serial:?}, which would show unmasked without it: fix its permissions, \
                     or move it away once that device's screen shows no typed secret",
                    path.display()
                ))
            })?;
            found.insert(serial, saved);
        }
        // A write left halfway by a stop is dropped: the file it was to replace is whole.
        probe(dir).map_err(|e| fail("is not writable", &e))?;
        Ok(Self {
            dir: dir.to_owned(),
            found: std::sync::Mutex::new(found),
        })
    }

    /// The masks found at start for `serial` (taken: a device's table owns them afterwards).
    pub fn take(&self, serial: &str) -> Option<Saved> {
        self.found
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(serial)
    }

    /// Writes `serial`'s masks (to a new file renamed over the old one).
    pub fn save(&self, serial: &str, saved: &Saved) -> std::io::Result<()> {
        let path = self.dir.join(file_name(serial));
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec(saved).map_err(std::io::Error::other)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&body)?;
        drop(f);
        std::fs::rename(&tmp, &path)
    }
}

/// `masks-<serial as lowercase hex>.json`: any serial, one file name.
fn file_name(serial: &str) -> String {
    let hex: String = serial.bytes().map(|b| format!("{b:02x}")).collect();
    format!("masks-{hex}.json")
}

fn serial_of(name: &str) -> Option<String> {
    let hex = name.strip_prefix("masks-")?.strip_suffix(".json")?;
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn read(path: &Path) -> std::result::Result<Saved, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "it has {} bytes, more than the {MAX_FILE_BYTES} a masks file may have",
            meta.len()
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "its mode is {:o}: others than its owner may read it (chmod 600 it)",
            meta.permissions().mode() & 0o777
        ));
    }
    let body = std::fs::read(path).map_err(|e| e.to_string())?;
    let saved: Saved =
        serde_json::from_slice(&body).map_err(|e| format!("it is not a masks file ({e})"))?;
    if crate::mask_set::Roller::from_base(saved.base).is_none() {
        return Err(format!("its base {} is out of range", saved.base));
    }
    if saved.masks.len() > crate::secret_fields::MAX_MASKS {
        return Err(format!(
            "it holds {} masks, more than the {} a device keeps",
            saved.masks.len(),
            crate::secret_fields::MAX_MASKS
        ));
    }
    Ok(saved)
}

fn probe(dir: &Path) -> std::io::Result<()> {
    let p = dir.join(".probe");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&p)?;
    std::fs::remove_file(p)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn saved() -> Saved {
        Saved {
            base: 12345,
            masks: vec![SavedMask {
                pieces: vec![(6, 99)],
                field: Some(SavedField::Place {
                    left: 1,
                    top: 2,
                    right: 3,
                    bottom: 4,
                }),
                lease: Some("L1".into()),
            }],
        }
    }

    #[test]
    fn masks_come_back_per_serial_and_only_the_owner_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("state");
        let store = MaskStore::open(&at).unwrap();
        store.save("127.0.0.1:5555", &saved()).unwrap();
        store
            .save("emulator-5554", &Saved::default_for_test())
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&at), 0o700);
        for e in std::fs::read_dir(&at).unwrap() {
            assert_eq!(mode(&e.unwrap().path()), 0o600);
        }
        let again = MaskStore::open(&at).unwrap();
        assert_eq!(again.take("127.0.0.1:5555"), Some(saved()));
        assert_eq!(again.take("127.0.0.1:5555"), None);
        assert_eq!(again.take("emulator-5554"), Some(Saved::default_for_test()));
        assert_eq!(again.take("emulator-5556"), None);
    }

    #[test]
    fn an_unreadable_file_stops_the_start_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = MaskStore::open(dir.path()).unwrap();
        store.save("phone-1", &saved()).unwrap();
        let path = dir.path().join(file_name("phone-1"));
        std::fs::write(&path, b"{\"base\": 1, \"masks\": [").unwrap();
        let err = MaskStore::open(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string())
                && err.contains("\"phone-1\"")
                && err.contains("not a masks file"),
            "{err}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        store.save("phone-1", &saved()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = MaskStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("its mode is 644"), "{err}");
        // Other files are none of its business.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("masks-zz.json"), b"junk").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"junk").unwrap();
        assert!(MaskStore::open(dir.path()).is_ok());
    }

    #[test]
    fn serials_round_trip_through_file_names() {
        for s in ["emulator-5554", "127.0.0.1:5555", "a/b\\c..", "", "ü"] {
            assert_eq!(serial_of(&file_name(s)).as_deref(), Some(s));
        }
        assert_eq!(serial_of("masks-0.json"), None);
        assert_eq!(serial_of("masks-zz.json"), None);
        assert_eq!(serial_of("masks-41.json.tmp"), None);
    }

    impl Saved {
        fn default_for_test() -> Self {
            Saved {
                base: 7,
                masks: Vec::new(),
            }
        }
    }
}
