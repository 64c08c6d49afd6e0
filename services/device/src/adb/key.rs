//! The RSA key a direct-TCP connection offers when a device asks for authentication, and the
//! two things ADB does with it: signing the device's AUTH token and the Android public-key
//! encoding sent in AUTH RSAPUBLICKEY.
//!
//! adb_client generates a fresh 2048-bit key for every connection when the key file is missing
//! (seconds in a debug build). Instead, like `adb` itself, we create the key file once
//! (`~/.android/adbkey`, or the configured path) with owner-only permissions and reuse it.
//! The direct client only loads (or creates) it when a device actually asks for AUTH.
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{BigUint, Pkcs1v15Sign, RsaPrivateKey, RsaPublicKey};

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

/// Reads a private key file: PKCS#8 PEM (what `adb` and [`ensure_key`] write) or PKCS#1 PEM.
pub fn load_key(path: &Path) -> Result<RsaPrivateKey> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        DeviceError::Config(format!(
            "cannot read adb key {}: {what}: {e}",
            path.display()
        ))
    };
    let pem = std::fs::read_to_string(path).map_err(|e| fail("read", &e))?;
    match RsaPrivateKey::from_pkcs8_pem(&pem) {
        Ok(k) => Ok(k),
        Err(pkcs8) => RsaPrivateKey::from_pkcs1_pem(&pem)
            .map_err(|_| fail("not a PKCS#8 or PKCS#1 PEM RSA key", &pkcs8)),
    }
}

/// Signs a device's AUTH token the way adbd verifies it: PKCS#1 v1.5 with the SHA-1
/// DigestInfo prefix, the 20-byte token standing in for the digest (it is not hashed again).
pub fn sign_token(key: &RsaPrivateKey, token: &[u8]) -> std::result::Result<Vec<u8>, rsa::Error> {
    key.sign(Pkcs1v15Sign::new::<sha1::Sha1>(), token)
}

/// Bits of the only RSA key size adbd accepts.
pub const ANDROID_KEY_BITS: usize = 2048;
/// Size of the Android public-key struct: words, n0inv, modulus, rr, exponent.
pub const ANDROID_PUBKEY_LEN: usize = 4 + 4 + 256 + 256 + 4;

/// The Android public-key struct (libcrypto_utils `android_pubkey_encode`): modulus size in
/// 32-bit words (64), n0inv = -1/n mod 2^32, the modulus little endian, rr = (2^2048)^2 mod n
/// little endian, and the public exponent, all little endian.
pub fn android_pubkey(key: &RsaPublicKey) -> std::result::Result<Vec<u8>, String> {
    let n = key.n();
    if n.bits() != ANDROID_KEY_BITS {
        return Err(format!(
            "adb keys must be {ANDROID_KEY_BITS}-bit RSA; this one has {} bits",
            n.bits()
        ));
    }
    let le = |v: &BigUint| {
        let mut b = v.to_bytes_le();
        b.resize(256, 0);
        b
    };
    let modulus = le(n);
    let n0 = u32::from_le_bytes([modulus[0], modulus[1], modulus[2], modulus[3]]);
    // Newton's iteration doubles the correct low bits each round: 1 -> 2 -> ... -> 32 (n is odd).
    let mut inv: u32 = 1;
    for _ in 0..5 {
        inv = inv.wrapping_mul(2u32.wrapping_sub(n0.wrapping_mul(inv)));
    }
    let rr = (BigUint::from(1u32) << (2 * ANDROID_KEY_BITS)) % n;
    let e_bytes = key.e().to_bytes_le();
    if e_bytes.len() > 4 {
        return Err("the public exponent does not fit 32 bits".into());
    }
    let mut e = [0u8; 4];
    e[..e_bytes.len()].copy_from_slice(&e_bytes);
    let mut out = Vec::with_capacity(ANDROID_PUBKEY_LEN);
    out.extend_from_slice(&64u32.to_le_bytes());
    out.extend_from_slice(&inv.wrapping_neg().to_le_bytes());
    out.extend_from_slice(&modulus);
    out.extend_from_slice(&le(&rr));
    out.extend_from_slice(&e);
    Ok(out)
}

/// The AUTH RSAPUBLICKEY payload: base64 of [`android_pubkey`], ` droidmesh@<host>`, NUL.
/// The phone shows the part after the space in its "Allow USB debugging?" dialog.
pub fn android_pubkey_payload(key: &RsaPublicKey) -> std::result::Result<Vec<u8>, String> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(android_pubkey(key)?);
    Ok(format!("{encoded} droidmesh@{}\0", host_name()).into_bytes())
}

fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && !h.contains(['\0', ' ']))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_key() -> RsaPrivateKey {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/adbkey_test.pem");
        load_key(&path).unwrap()
    }

    #[test]
    fn the_android_pubkey_struct_matches_the_key() {
        let key = test_key();
        let public = key.to_public_key();
        let blob = android_pubkey(&public).unwrap();
        assert_eq!(blob.len(), ANDROID_PUBKEY_LEN);
        let word = |i: usize| u32::from_le_bytes([blob[i], blob[i + 1], blob[i + 2], blob[i + 3]]);
        assert_eq!(word(0), 64);
        let n = BigUint::from_bytes_le(&blob[8..264]);
        assert_eq!(&n, public.n());
        // n0inv * n0 == -1 (mod 2^32)
        assert_eq!(word(4).wrapping_mul(word(8)), u32::MAX);
        let rr = BigUint::from_bytes_le(&blob[264..520]);
        let r = BigUint::from(1u32) << 2048usize;
        assert_eq!(rr, (&r * &r) % &n);
        assert_eq!(BigUint::from(word(520)), *public.e());

        let payload = android_pubkey_payload(&public).unwrap();
        let text = std::str::from_utf8(&payload).unwrap();
        let text = text.strip_suffix('\0').unwrap();
        let (b64, who) = text.split_once(' ').unwrap();
        assert!(who.starts_with("droidmesh@"), "{who}");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(decoded, blob);
    }

    #[test]
    fn a_token_signature_verifies_as_pkcs1_sha1() {
        let key = test_key();
        let token: Vec<u8> = (0u8..20).collect();
        let sig = sign_token(&key, &token).unwrap();
        assert_eq!(sig.len(), 256);
        key.to_public_key()
            .verify(Pkcs1v15Sign::new::<sha1::Sha1>(), &token, &sig)
            .unwrap();
        // A token that is not digest-sized is refused rather than signed wrongly.
        assert!(sign_token(&key, b"short").is_err());
    }

    #[test]
    fn small_keys_are_refused_for_android() {
        let small = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 512).unwrap();
        let err = android_pubkey(&small.to_public_key()).unwrap_err();
        assert!(err.contains("2048"), "{err}");
    }

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
