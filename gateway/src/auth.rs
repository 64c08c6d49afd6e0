//! Who is calling: API keys sent as `authorization: Bearer <key>`, kept hashed (SHA-256, hex)
//! in a keys file (`gateway.auth.keys_file`), each naming its tenant and optionally an expiry,
//! the devices it may use and the secrets its tasks may type. The file is read again when it changes (its modification time
//! and size are looked at most once a second), so keys rotate without a restart; a new file
//! that does not parse keeps the previous keys and the log says why. Without a keys file every
//! caller is the one implicit tenant (`""`).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::error::GatewayError;
use serde::Deserialize;
use sha2::Digest as _;

/// How often, at most, the keys file is looked at for a change.
const RECHECK: Duration = Duration::from_secs(1);
/// Largest keys file read.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Longest key accepted in a request (longer is malformed, not hashed).
const MAX_KEY_BYTES: usize = 512;
/// The tenant of every caller when no keys are configured.
pub const OPEN_TENANT: &str = "";

/// `[gateway.auth]`: where the keys are.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The keys file (TOML, `[[key]]` tables: `tenant`, `sha256`, optional `expires_unix`,
    /// `devices` and `secrets`). Unset: no keys, every caller is one tenant, which is only allowed when
    /// the gateway listens on loopback (or `open` says so).
    pub keys_file: Option<PathBuf>,
    /// Serve without keys even when listening beyond loopback (anyone who reaches the port
    /// may use every device).
    pub open: bool,
    /// Tasks one tenant may have running at once in this gateway process (0: no limit).
    pub max_running_per_tenant: u32,
    /// Tasks one tenant may create per minute in this gateway process (0: no limit).
    pub tasks_per_minute_per_tenant: u32,
    /// Model tokens (input + output) one tenant's tasks created in a UTC day may use before
    /// its next task is refused, counted in the task store (0: no limit).
    pub model_tokens_per_day_per_tenant: u64,
}

/// The keys file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    key: Vec<KeyEntry>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    tenant: String,
    /// SHA-256 of the key, lower-case hex.
    sha256: String,
    /// Seconds since the Unix epoch after which the key is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_unix: Option<u64>,
    /// Device serials the key may lease; absent or empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    devices: Vec<String>,
    /// Ids of the secrets the key's tasks may name in `secret_ids` (case-insensitive);
    /// absent or empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secrets: Vec<String>,
}

/// Longest secret id a keys file may list.
const MAX_SECRET_ID_BYTES: usize = 128;

/// The caller of an RPC, once its key is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: String,
    /// The only devices it may use; `None`: any.
    pub devices: Option<Vec<String>>,
    /// The only secret ids its tasks may name, lower case; `None`: any the executors hold
    /// (the open tenant of a gateway without keys).
    pub secrets: Option<Vec<String>>,
}

impl Caller {
    /// The one caller of a gateway without keys.
    pub fn open() -> Self {
        Self {
            tenant: OPEN_TENANT.to_owned(),
            devices: None,
            secrets: None,
        }
    }

    /// Whether its tasks may name the secret `id` (ids are case-insensitive).
    pub fn may_name_secret(&self, id: &str) -> bool {
        self.secrets
            .as_ref()
            .is_none_or(|s| s.iter().any(|k| k.eq_ignore_ascii_case(id)))
    }

    /// Whether it may use the device `serial`.
    pub fn may_use(&self, serial: &str) -> bool {
        self.devices
            .as_ref()
            .is_none_or(|d| d.iter().any(|s| s == serial))
    }
}

/// The lower-case hex SHA-256 of a key, as the keys file holds it.
pub fn hash_key(key: &str) -> String {
    let digest = sha2::Sha256::digest(key.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh random key: 244 bits from the operating system's generator (two version 4 UUIDs),
/// marked `dmk_` so it is recognised in a leak.
pub fn new_key() -> String {
    format!(
        "dmk_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The keys file entry (`[[key]]` table) for `key`: its hash, never the key.
pub fn key_entry(
    key: &str,
    tenant: &str,
    devices: &[String],
    secrets: &[String],
    expires_unix: Option<u64>,
) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct One<'a> {
        key: [&'a KeyEntry; 1],
    }
    let entry = KeyEntry {
        tenant: tenant.to_owned(),
        sha256: hash_key(key),
        expires_unix,
        devices: devices.to_vec(),
        secrets: secrets.iter().map(|s| s.to_ascii_lowercase()).collect(),
    };
    let text = toml::to_string(&One { key: [&entry] }).map_err(|e| e.to_string())?;
    parse(&text)?;
    Ok(text)
}

struct Loaded {
    by_hash: HashMap<String, KeyEntry>,
    /// The file's modification time and size when read.
    stamp: Option<(SystemTime, u64)>,
    checked: Instant,
}

/// The keys a gateway accepts; `None` path: open.
pub struct Keys {
    path: Option<PathBuf>,
    loaded: Mutex<Loaded>,
}

impl Keys {
    /// Reads the keys file the config names (a file that cannot be read or parsed at start is
    /// an error: the gateway does not start without the keys it was told to use).
    pub fn new(cfg: &AuthConfig) -> Result<Self, String> {
        let mut loaded = Loaded {
            by_hash: HashMap::new(),
            stamp: None,
            checked: Instant::now(),
        };
        if let Some(path) = &cfg.keys_file {
            let (stamp, by_hash) = read(path)?;
            loaded.by_hash = by_hash;
            loaded.stamp = Some(stamp);
        }
        Ok(Self {
            path: cfg.keys_file.clone(),
            loaded: Mutex::new(loaded),
        })
    }

    /// Whether keys are required (a keys file is configured).
    pub fn required(&self) -> bool {
        self.path.is_some()
    }

    /// The caller of a request, from its `authorization` metadata.
    pub fn caller(&self, metadata: &tonic::metadata::MetadataMap) -> Result<Caller, GatewayError> {
        let Some(path) = &self.path else {
            return Ok(Caller::open());
        };
        let key = bearer(metadata)?;
        let hash = hash_key(key);
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.checked.elapsed() >= RECHECK {
            reload(path, &mut loaded);
        }
        let Some(entry) = loaded.by_hash.get(&hash) else {
            return Err(GatewayError::Unauthenticated(
                "the API key is not known to this gateway (revoked, or never added to its keys file); \
                 send `authorization: Bearer <key>` with a key made by `droidmesh keys new`"
                    .into(),
            ));
        };
        if let Some(at) = entry.expires_unix {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if now >= at {
                return Err(GatewayError::Unauthenticated(format!(
                    "the API key expired (expires_unix {at}); send `authorization: Bearer <key>` \
                     with a current key"
                )));
            }
        }
        Ok(Caller {
            tenant: entry.tenant.clone(),
            devices: (!entry.devices.is_empty()).then(|| entry.devices.clone()),
            secrets: Some(entry.secrets.clone()),
        })
    }
}

/// The key of an `authorization: Bearer <key>` header; never shown in an error.
fn bearer(metadata: &tonic::metadata::MetadataMap) -> Result<&str, GatewayError> {
    let Some(value) = metadata.get("authorization") else {
        return Err(GatewayError::Unauthenticated(
            "no API key: send the header `authorization: Bearer <key>` (make a key with \
             `droidmesh keys new --tenant NAME`)"
                .into(),
        ));
    };
    let malformed = || {
        GatewayError::Unauthenticated(
            "the authorization header is malformed: send `authorization: Bearer <key>`".into(),
        )
    };
    let value = value.to_str().map_err(|_| malformed())?;
    let (scheme, key) = value.trim().split_once(' ').ok_or_else(malformed)?;
    let key = key.trim();
    if !scheme.eq_ignore_ascii_case("bearer")
        || key.is_empty()
        || key.len() > MAX_KEY_BYTES
        || key.contains(char::is_whitespace)
    {
        return Err(malformed());
    }
    Ok(key)
}

/// Reads the keys file again if it changed; a file that cannot be read or parsed keeps the
/// keys already loaded.
fn reload(path: &Path, loaded: &mut Loaded) {
    loaded.checked = Instant::now();
    let stamp = match stamp(path) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "the keys file cannot be read; the previous keys stay in use");
            return;
        }
    };
    if loaded.stamp == Some(stamp) {
        return;
    }
    match read(path) {
        Ok((stamp, by_hash)) => {
            tracing::info!(keys = by_hash.len(), file = %path.display(), "keys file read again");
            loaded.by_hash = by_hash;
            loaded.stamp = Some(stamp);
        }
        Err(e) => {
            // Not tried again until it changes once more.
            loaded.stamp = Some(stamp);
            tracing::warn!(error = %e, "the keys file changed but is not usable; the previous keys stay in use");
        }
    }
}

fn stamp(path: &Path) -> Result<(SystemTime, u64), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("keys file {}: {e}", path.display()))?;
    let modified = meta
        .modified()
        .map_err(|e| format!("keys file {}: {e}", path.display()))?;
    Ok((modified, meta.len()))
}

type Parsed = ((SystemTime, u64), HashMap<String, KeyEntry>);

fn read(path: &Path) -> Result<Parsed, String> {
    let stamp = stamp(path)?;
    if stamp.1 > MAX_FILE_BYTES {
        return Err(format!(
            "keys file {} has {} bytes, more than the {MAX_FILE_BYTES} read",
            path.display(),
            stamp.1
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("keys file {}: {e}", path.display()))?;
    Ok((
        stamp,
        parse(&text).map_err(|e| format!("keys file {}: {e}", path.display()))?,
    ))
}

/// The keys of a keys file, by hash.
fn parse(text: &str) -> Result<HashMap<String, KeyEntry>, String> {
    let file: KeysFile = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    let mut by_hash = HashMap::with_capacity(file.key.len());
    for (i, mut k) in file.key.into_iter().enumerate() {
        let n = i + 1;
        if k.tenant.trim().is_empty() || k.tenant.len() > 128 {
            return Err(format!(
                "key {n}: tenant must be 1 to 128 bytes, got {} bytes",
                k.tenant.len()
            ));
        }
        let hash = k.sha256.trim().to_ascii_lowercase();
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "key {n} (tenant '{}'): sha256 must be 64 hex digits, got {} characters",
                k.tenant,
                hash.len()
            ));
        }
        for id in &mut k.secrets {
            check_secret_id(id).map_err(|e| format!("key {n} (tenant '{}'): {e}", k.tenant))?;
            id.make_ascii_lowercase();
        }
        if by_hash.insert(hash, k).is_some() {
            return Err(format!("key {n}: the same sha256 is listed twice"));
        }
    }
    Ok(by_hash)
}

/// A secret id as a keys file may list it: what names an environment variable
/// (`DROIDMESH_SECRET_<ID>`) and a Kubernetes Secret's key (a file) alike.
fn check_secret_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= MAX_SECRET_ID_BYTES
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "secret id {id:?} must be 1 to {MAX_SECRET_ID_BYTES} letters, digits, '_', '-' or '.' \
             (not starting with '.')"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_sha256_hex() {
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_new_key_s_entry_is_accepted_and_holds_only_its_hash() {
        let key = new_key();
        assert!(key.starts_with("dmk_") && key.len() == 68, "{key}");
        assert_ne!(key, new_key());
        let entry = key_entry(
            &key,
            "acme \"x\"",
            &["s1".into()],
            &["PIN".into(), "mail_password".into()],
            Some(5),
        )
        .unwrap();
        assert!(!entry.contains(&key), "{entry}");
        let keys = parse(&entry).unwrap();
        let k = &keys[&hash_key(&key)];
        assert_eq!(
            (k.tenant.as_str(), k.devices.as_slice(), k.expires_unix),
            ("acme \"x\"", ["s1".to_owned()].as_slice(), Some(5))
        );
        assert_eq!(k.secrets, ["pin", "mail_password"]);
        assert!(key_entry(&key, " ", &[], &[], None).is_err());
        let e = key_entry(&key, "acme", &[], &["../etc/passwd".into()], None).unwrap_err();
        assert!(e.contains("secret id \"../etc/passwd\" must be"), "{e}");
    }

    #[test]
    fn a_broken_keys_file_is_refused_with_the_key_it_stops_at() {
        let ok = format!(
            "[[key]]\ntenant = \"a\"\nsha256 = \"{}\"\ndevices = [\"s1\"]\n",
            hash_key("k")
        );
        let keys = parse(&ok).unwrap();
        assert_eq!(keys[&hash_key("k")].devices, vec!["s1".to_owned()]);
        let e = parse("[[key]]\ntenant = \"a\"\nsha256 = \"xyz\"\n").unwrap_err();
        assert!(e.contains("key 1") && e.contains("64 hex digits"), "{e}");
        assert!(parse("[[key]]\ntenant = \"a\"\n").is_err());
    }

    #[test]
    fn the_bearer_key_is_read_and_a_malformed_header_is_refused_without_echoing_it() {
        let mut md = tonic::metadata::MetadataMap::new();
        md.insert("authorization", "Bearer  sekrit ".parse().unwrap());
        assert_eq!(bearer(&md).unwrap(), "sekrit");
        md.insert("authorization", "Basic sekrit".parse().unwrap());
        let e = tonic::Status::from(bearer(&md).unwrap_err());
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(!e.message().contains("sekrit"), "{}", e.message());
        md.insert("authorization", "sekrit".parse().unwrap());
        assert!(bearer(&md).is_err());
    }
}
