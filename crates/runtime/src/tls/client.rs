//! The client side: how this process calls `https://` endpoints (the CA it checks servers
//! against, the certificate it presents), and the connector tonic channels dial them with.
use super::{Cached, Material, Source, TlsConfig, TlsError, provider};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// How this process calls `https://` endpoints. Cheap to clone. The default checks servers
/// against the system's roots and presents no certificate; [`ClientTls::install`] sets the
/// process's own, which every [`crate::ClientOptions`] made afterwards takes.
#[derive(Clone)]
pub struct ClientTls {
    /// The `[tls]` files; `None`: the system's roots, no certificate.
    source: Option<Arc<Source>>,
    server_name: Option<String>,
    handshake_timeout: Duration,
    built: Arc<Cached<ClientConfig>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("private_ca", &self.source.is_some())
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

static PROCESS: RwLock<Option<ClientTls>> = RwLock::new(None);

impl Default for ClientTls {
    /// The process's TLS when one was installed, else the system's roots.
    fn default() -> Self {
        let installed = PROCESS.read().unwrap_or_else(|p| p.into_inner()).clone();
        installed.unwrap_or_else(Self::system)
    }
}

impl ClientTls {
    /// The system's roots, no certificate presented.
    pub fn system() -> Self {
        Self {
            source: None,
            server_name: None,
            handshake_timeout: TlsConfig::default().handshake_timeout(),
            built: Arc::default(),
        }
    }

    /// From `[tls]`: its CA (else the system's roots), its certificate presented to servers
    /// that ask when it has one; reads the files now.
    pub fn from_config(cfg: &TlsConfig) -> Result<Self, TlsError> {
        let tls = if cfg.serves() || cfg.ca.is_some() {
            Self {
                source: Some(Source::load(cfg)?),
                server_name: cfg.server_name.clone(),
                handshake_timeout: cfg.handshake_timeout(),
                built: Arc::default(),
            }
        } else {
            Self {
                server_name: cfg.server_name.clone(),
                handshake_timeout: cfg.handshake_timeout(),
                ..Self::system()
            }
        };
        if tls.source.is_some() {
            // Fails at start on files rustls refuses, not at the first call. The system's roots
            // are read at the first https:// call instead (they take a while).
            tls.config()?;
        }
        Ok(tls)
    }

    /// Makes this the TLS of every client this process makes from now on
    /// ([`ClientTls::default`]).
    pub fn install(self) {
        *PROCESS.write().unwrap_or_else(|p| p.into_inner()) = Some(self);
    }

    /// The name servers' certificates are checked against: the configured one, else `host`.
    pub fn server_name_for<'a>(&'a self, host: &'a str) -> &'a str {
        self.server_name.as_deref().unwrap_or(host)
    }

    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// The rustls config for a new connection, from the files as they are now.
    pub fn config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let Some(source) = &self.source else {
            return system_config();
        };
        self.built.get(&source.current(), build)
    }
}

/// A client config from the `[tls]` files: their CA (else the system's roots), their
/// certificate presented when they have one, HTTP/2 offered.
fn build(material: &Material) -> Result<ClientConfig, TlsError> {
    let roots = match &material.roots {
        Some(roots) => roots.clone(),
        None => system_roots()?,
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("tls: {e}")))?
        .with_root_certificates(roots);
    let mut config = match &material.identity {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|e| TlsError(format!("tls.cert and tls.key: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// A client config for something other than droidmesh's own ports (a database, say):
/// servers checked against the CA certificates in `ca` (else the system's roots), no
/// certificate presented, the protocols `alpn` offered. Read once, not again when the file
/// changes.
pub fn client_config_for(
    field: &str,
    ca: Option<&std::path::Path>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsError> {
    let roots = match ca {
        Some(path) => {
            let mut store = RootCertStore::empty();
            for c in super::read_certs(field, path)? {
                store.add(c).map_err(|e| {
                    TlsError(format!(
                        "{field} {}: a certificate is not a usable CA: {e}",
                        path.display()
                    ))
                })?;
            }
            Arc::new(store)
        }
        None => system_roots()?,
    };
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("tls: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The system's CA certificates, read once.
fn system_roots() -> Result<Arc<RootCertStore>, TlsError> {
    static ROOTS: OnceLock<Result<Arc<RootCertStore>, String>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_owned(), ToString::to_string);
                return Err(format!(
                    "no system CA certificates to check https:// servers with ({why}); set tls.ca"
                ));
            }
            Ok(Arc::new(store))
        })
        .clone()
        .map_err(TlsError)
}

fn system_config() -> Result<Arc<ClientConfig>, TlsError> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = system_roots().map_err(|e| e.0)?;
            let mut config = ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("tls: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
        .map_err(TlsError)
}

/// Dials `https://` URIs for a tonic channel: TCP (no delay), then TLS checked against the
/// name given (a balanced endpoint's name), the configured `server_name`, or the URI's host.
#[derive(Clone, Debug)]
pub struct TlsConnector {
    tls: ClientTls,
    server_name: Option<String>,
}

impl TlsConnector {
    /// `server_name`: the name to check the server's certificate against when it is not the
    /// URI's host (a replica reached at an address found for a name).
    pub fn new(tls: ClientTls, server_name: Option<String>) -> Self {
        Self { tls, server_name }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<http::Uri> for TlsConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let tls = self.tls.clone();
        let name_override = self.server_name.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or("the endpoint has no host")?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let name = tls
                .server_name
                .clone()
                .or(name_override)
                .unwrap_or_else(|| host.clone());
            let server_name = ServerName::try_from(name.clone())
                .map_err(|e| format!("cannot check a certificate against {name:?}: {e}"))?;
            let config = tls.config()?;
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            let _ = tcp.set_nodelay(true);
            let handshake = tokio_rustls::TlsConnector::from(config).connect(server_name, tcp);
            match tokio::time::timeout(tls.handshake_timeout, handshake).await {
                Ok(Ok(stream)) => Ok(TokioIo::new(stream)),
                Ok(Err(e)) => Err(handshake_error(&host, port, &name, &e).into()),
                Err(_) => Err(format!(
                    "TLS handshake with {host}:{port} not done within {:?}",
                    tls.handshake_timeout
                )
                .into()),
            }
        })
    }
}

/// The handshake's failure in words a user can act on.
fn handshake_error(host: &str, port: u16, name: &str, e: &std::io::Error) -> String {
    let text = e.to_string();
    let hint = if text.contains("InvalidContentType") || text.contains("corrupt message") {
        " (the server does not speak TLS: is its endpoint http://?)"
    } else if text.contains("UnknownIssuer") || text.contains("BadSignature") {
        " (its certificate is not signed by a CA in tls.ca)"
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        " (its certificate does not name this host: set tls.server_name, or reissue it)"
    } else if text.contains("CertificateRequired") || text.contains("certificate required") {
        " (the server asks for a client certificate: set tls.cert and tls.key)"
    } else {
        ""
    };
    let checked = if name == host {
        String::new()
    } else {
        format!(" (checked against the name {name})")
    };
    format!("TLS handshake with {host}:{port}{checked} failed: {text}{hint}")
}
