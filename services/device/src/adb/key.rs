//! The RSA key a direct-TCP connection offers when a device asks for authentication.
//!
//! adb_client generates a fresh 2048-bit key for every connection when the key file is missing
//! (seconds in a debug build). Instead, like `adb` itself, we create the key file once
//! (`~/.android/adbkey`, or the configured path) with owner-only permissions and reuse it.
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rsa::pkcs8::{EncodePrivateKey, LineEnding};

use crate::error::{DeviceError, Result};

/// `$ANDROID_USER_HOME/android/adbkey` or `~/.android/adbkey`, as adb_client looks it up.
pub fn default_key_path() -> Option<PathBuf> {
    if let Ok(home) = std::env::var("ANDROID_USER_HOME") {
        return Some(PathBuf::from(home).join("android").join("adbkey"));
    }
    std::env::home_dir().map(|h| h.join(".android").join("adbkey"))
}

static CREATING: Mutex<()> = Mutex::new(());

/// Makes sure a private key exists at `path`, generating one if needed. Blocking.
pub fn ensure_key(path: &Path) -> Result<()> {
    ensure_key_with_bits(path, 2048)
}

fn ensure_key_with_bits(path: &Path, bits: usize) -> Result<()> {
    let _guard = CREATING.lock().unwrap_or_else(|p| p.into_inner());
    if path.exists() {
        return Ok(());
    }
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        DeviceError::Config(format!(
            "cannot create adb key {}: {what}: {e}",
            path.display()
        ))
    };
    let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits)
        .map_err(|e| fail("generate", &e))?;
    let pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| fail("encode", &e))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| fail("create directory", &e))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        use std::io::Write;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp).map_err(|e| fail("write", &e))?;
        f.write_all(pem.as_bytes()).map_err(|e| fail("write", &e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| fail("rename", &e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_created_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("droidmesh-key-test-{}", std::process::id()));
        let path = dir.join("sub").join("adbkey");
        // A small key keeps the test fast; the format is what matters.
        ensure_key_with_bits(&path, 512).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert!(first.starts_with("-----BEGIN PRIVATE KEY-----"));
        ensure_key(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
