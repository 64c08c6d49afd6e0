//! Certificates for trying TLS on one machine and for tests: a private CA and certificates it
//! signs, each good for servers and clients (mutual TLS). `droidmesh tls dev-certs` writes
//! them. Not for production: keys are written unencrypted, the CA's next to the others.
use super::TlsError;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A CA that signs certificates.
pub struct DevCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for DevCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DevCa")
    }
}

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

fn err(what: &str, e: rcgen::Error) -> TlsError {
    TlsError(format!("{what}: {e}"))
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // A day back, for clocks a little behind.
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(i64::from(days.max(1)));
}

impl DevCa {
    /// A new CA named `common_name`, valid for `days`.
    pub fn new(common_name: &str, days: u32) -> Result<Self, TlsError> {
        let key = KeyPair::generate().map_err(|e| err("CA key", e))?;
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        validity(&mut params, days);
        let cert = params
            .self_signed(&key)
            .map_err(|e| err("CA certificate", e))?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA in `cert_pem` with its key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| err("CA key", e))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| err("CA certificate", e))?;
        Ok(Self {
            issuer,
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A certificate for `names` (DNS names or addresses; the first is also its common name),
    /// for servers and clients, valid for `days`.
    pub fn issue(&self, names: &[String], days: u32) -> Result<Issued, TlsError> {
        let key = KeyPair::generate().map_err(|e| err("key", e))?;
        let mut params =
            CertificateParams::new(names.to_vec()).map_err(|e| err("certificate names", e))?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().map_or("droidmesh", String::as_str),
        );
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params, days);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| err("certificate", e))?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The files [`write_dev_certs`] wrote.
#[derive(Debug, Clone)]
pub struct DevFiles {
    pub ca: PathBuf,
    pub ca_key: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Whether the CA was made now (else the one in the folder signed).
    pub new_ca: bool,
}

/// The names a local mesh is reached at: `localhost`, `127.0.0.1` and `::1`.
pub fn local_names() -> Vec<String> {
    ["localhost", "127.0.0.1", "::1"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// Writes `NAME.crt` and `NAME.key` in `dir` for `names`, signed by the CA in `dir`
/// (`ca.crt`, `ca.key`), made first if the folder has none. Keys are written readable by
/// their owner only.
pub fn write_dev_certs(
    dir: &Path,
    file_name: &str,
    names: &[String],
    days: u32,
) -> Result<DevFiles, TlsError> {
    let io = |what: &Path, e: std::io::Error| TlsError(format!("{}: {e}", what.display()));
    if names.is_empty() {
        return Err(TlsError("a certificate needs at least one name".to_owned()));
    }
    if file_name.is_empty() || file_name.contains(['/', '\\']) || file_name.starts_with('.') {
        return Err(TlsError(format!(
            "{file_name:?}: a file name (no folders) is needed"
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let ca_path = dir.join("ca.crt");
    let ca_key_path = dir.join("ca.key");
    let (ca, new_ca) = if ca_path.exists() || ca_key_path.exists() {
        let cert = std::fs::read_to_string(&ca_path).map_err(|e| io(&ca_path, e))?;
        let key = std::fs::read_to_string(&ca_key_path).map_err(|e| io(&ca_key_path, e))?;
        (DevCa::from_pem(&cert, &key)?, false)
    } else {
        // Two folders' CAs are told apart by name.
        let tag = rand_tag();
        let ca = DevCa::new(&format!("droidmesh development CA {tag:08x}"), days)?;
        write(&ca_path, ca.cert_pem(), false).map_err(|e| io(&ca_path, e))?;
        write(&ca_key_path, ca.key_pem(), true).map_err(|e| io(&ca_key_path, e))?;
        (ca, true)
    };
    let issued = ca.issue(names, days)?;
    let cert = dir.join(format!("{file_name}.crt"));
    let key = dir.join(format!("{file_name}.key"));
    write(&cert, &issued.cert_pem, false).map_err(|e| io(&cert, e))?;
    write(&key, &issued.key_pem, true).map_err(|e| io(&key, e))?;
    Ok(DevFiles {
        ca: ca_path,
        ca_key: ca_key_path,
        cert,
        key,
        new_ca,
    })
}

/// A tag that differs between runs (a randomly keyed hash of the time): names only.
fn rand_tag() -> u32 {
    use std::hash::BuildHasher;
    let hash =
        std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
    // The low half of the hash is all a name needs.
    #[allow(clippy::cast_possible_truncation)]
    let tag = hash as u32;
    tag
}

/// Writes `text` to `path` through a temporary file renamed into place, so a server reading
/// it never sees half a file; `secret` files are made readable by their owner only.
fn write(path: &Path, text: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = options.open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
