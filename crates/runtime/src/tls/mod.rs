//! TLS on every droidmesh port and mutual TLS between services (rustls with ring), configured
//! by file paths (`[tls]`): the certificate and key a process presents, the CA bundle it checks
//! its peers against, and whether servers ask callers for a certificate.
//!
//! The files are read again when they change (their modification time or size, looked at most
//! once a second when a connection is made), so certificates renewed in place (cert-manager, a
//! rotated Secret) are used by new connections without a restart. A new set that does not load
//! keeps the last good one, and the log says why. Connections already open keep what they
//! started with.
mod client;
pub mod dev;
mod server;

pub use client::{ClientTls, TlsConnector, client_config_for};
pub use server::{ClientAuth, ServerTls};

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The `[tls]` section: off unless `cert` and `key` (to serve TLS) or `ca` (to call TLS
/// servers signed by a private CA) are set.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain this process presents: as the server on every gRPC port and the
    /// gateway's HTTP face, and as a client to servers that ask for one. Set with `key`.
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `cert`.
    pub key: Option<PathBuf>,
    /// PEM CA certificates that sign droidmesh's servers (clients check `https://` endpoints
    /// against them; without it, the system's roots) and, with `mutual`, its clients.
    pub ca: Option<PathBuf>,
    /// Mutual TLS between services: the device service and the agents refuse a caller without a
    /// certificate signed by `ca`, and every client presents `cert`. The gateway's public ports
    /// check a certificate a caller offers but do not ask for one (API keys authenticate
    /// callers there) unless `gateway_client_certs` is set.
    pub mutual: bool,
    /// The gateway's gRPC port and HTTP face also refuse a caller without a certificate
    /// signed by `ca`.
    pub gateway_client_certs: bool,
    /// The name clients check servers' certificates against, instead of each endpoint's host
    /// (for certificates that do not name the addresses they are reached at). A balanced
    /// endpoint's replicas are checked against its name, not their addresses.
    pub server_name: Option<String>,
    /// A TLS handshake not done within this is dropped, on either side.
    pub handshake_timeout_ms: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            cert: None,
            key: None,
            ca: None,
            mutual: false,
            gateway_client_certs: false,
            server_name: None,
            handshake_timeout_ms: 10_000,
        }
    }
}

impl TlsConfig {
    /// Whether this process serves TLS on its ports.
    pub fn serves(&self) -> bool {
        self.cert.is_some() && self.key.is_some()
    }

    /// Every problem with the section, each naming its field.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match (&self.cert, &self.key) {
            (Some(_), None) => problems.push("tls.key: must be set with tls.cert".to_owned()),
            (None, Some(_)) => problems.push("tls.cert: must be set with tls.key".to_owned()),
            _ => {}
        }
        if self.mutual && !(self.serves() && self.ca.is_some()) {
            problems.push(
                "tls.mutual: needs tls.cert, tls.key and tls.ca (the certificate this process \
                 presents and the CA its peers' certificates are checked against)"
                    .to_owned(),
            );
        }
        if self.gateway_client_certs && self.ca.is_none() {
            problems.push("tls.gateway_client_certs: needs tls.ca".to_owned());
        }
        if self.handshake_timeout_ms == 0 {
            problems.push("tls.handshake_timeout_ms: must be above 0".to_owned());
        }
        if let Some(name) = &self.server_name
            && rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
        {
            problems.push(format!(
                "tls.server_name: {name:?} is neither a DNS name nor an address"
            ));
        }
        problems
    }

    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }
}

/// A TLS setup that cannot be used, naming the file and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

pub(crate) fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<CryptoProvider>> = std::sync::OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// What the files held when last read.
pub(crate) struct Material {
    /// Changes each time the files are read again with a new content.
    pub(crate) generation: u64,
    /// The certificate chain and key this process presents.
    pub(crate) identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    /// The CA certificates peers are checked against.
    pub(crate) roots: Option<Arc<RootCertStore>>,
}

/// A rustls config built from one generation of the material, kept until the files change.
pub(crate) struct Cached<T>(Mutex<Option<(u64, Arc<T>)>>);

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<T> Cached<T> {
    /// The config of `material`'s generation, built with `build` if it is not the one kept.
    pub(crate) fn get(
        &self,
        material: &Material,
        build: impl FnOnce(&Material) -> Result<T, TlsError>,
    ) -> Result<Arc<T>, TlsError> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((generation, config)) = kept.as_ref()
            && *generation == material.generation
        {
            return Ok(config.clone());
        }
        let config = Arc::new(build(material)?);
        *kept = Some((material.generation, config.clone()));
        Ok(config)
    }
}

/// The size and modification time of each file, to notice a change.
type Stamps = Vec<Option<(SystemTime, u64)>>;

struct Loaded {
    material: Arc<Material>,
    stamps: Stamps,
    checked: Instant,
}

/// The `[tls]` files, read at start and again when they change.
pub(crate) struct Source {
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
    state: Mutex<Loaded>,
}

/// How often the files are looked at for a change, at most.
const RECHECK: Duration = Duration::from_secs(1);

impl Source {
    /// Reads the files now: a file that cannot be read or holds nothing usable is an error
    /// naming it.
    pub(crate) fn load(cfg: &TlsConfig) -> Result<Arc<Source>, TlsError> {
        let (cert, key) = if cfg.serves() {
            (cfg.cert.clone(), cfg.key.clone())
        } else {
            (None, None)
        };
        let stamps = stamps(&[&cert, &key, &cfg.ca]);
        let material = read(cert.as_deref(), key.as_deref(), cfg.ca.as_deref(), 0)?;
        Ok(Arc::new(Source {
            cert,
            key,
            ca: cfg.ca.clone(),
            state: Mutex::new(Loaded {
                material: Arc::new(material),
                stamps,
                checked: Instant::now(),
            }),
        }))
    }

    /// The material now: read again first if a file changed since the last look (at most
    /// once a second). A new set that does not load leaves the last good one in use.
    pub(crate) fn current(&self) -> Arc<Material> {
        // The state holds no invariant a panicking holder could break.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() < RECHECK {
            return state.material.clone();
        }
        state.checked = Instant::now();
        let now = stamps(&[&self.cert, &self.key, &self.ca]);
        if now == state.stamps {
            return state.material.clone();
        }
        let generation = state.material.generation + 1;
        match read(
            self.cert.as_deref(),
            self.key.as_deref(),
            self.ca.as_deref(),
            generation,
        ) {
            Ok(material) => {
                tracing::info!("tls: certificate files changed; new connections use them");
                state.material = Arc::new(material);
                state.stamps = now;
            }
            Err(e) => {
                // Keep the stamps old so the next look tries again (a renewal may be half
                // written).
                tracing::warn!(error = %e, "tls: changed certificate files do not load; keeping the previous ones");
            }
        }
        state.material.clone()
    }
}

fn stamps(paths: &[&Option<PathBuf>]) -> Stamps {
    paths
        .iter()
        .map(|p| {
            let meta = std::fs::metadata(p.as_ref()?).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

fn read(
    cert: Option<&Path>,
    key: Option<&Path>,
    ca: Option<&Path>,
    generation: u64,
) -> Result<Material, TlsError> {
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = read_certs("tls.cert", cert)?;
            let key_der = read_key(key)?;
            // Refuses a key that does not match the certificate, here rather than at the
            // first handshake.
            rustls::sign::CertifiedKey::from_der(chain.clone(), key_der.clone_key(), &provider())
                .map(drop)
                .map_err(|e| {
                    TlsError(format!(
                        "tls.key {}: does not go with tls.cert {}: {e}",
                        key.display(),
                        cert.display()
                    ))
                })?;
            Some((chain, key_der))
        }
        _ => None,
    };
    let roots = match ca {
        Some(ca) => {
            let mut store = RootCertStore::empty();
            for c in read_certs("tls.ca", ca)? {
                store.add(c).map_err(|e| {
                    TlsError(format!(
                        "tls.ca {}: a certificate is not a usable CA: {e}",
                        ca.display()
                    ))
                })?;
            }
            Some(Arc::new(store))
        }
        None => None,
    };
    Ok(Material {
        generation,
        identity,
        roots,
    })
}

fn read_file(field: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    // Certificates and keys are small; a bigger file is the wrong file.
    const MAX: u64 = 1 << 20;
    let meta = std::fs::metadata(path)
        .map_err(|e| TlsError(format!("{field} {}: cannot read: {e}", path.display())))?;
    if meta.len() > MAX {
        return Err(TlsError(format!(
            "{field} {}: {} bytes is too large for PEM certificates or a key (at most {MAX})",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path)
        .map_err(|e| TlsError(format!("{field} {}: cannot read: {e}", path.display())))
}

fn read_certs(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_file(field, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError(format!("{field} {}: not PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!(
            "{field} {}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_file("tls.key", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        TlsError(format!(
            "tls.key {}: holds no usable PEM private key: {e}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests;
