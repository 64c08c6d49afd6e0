//! The server side: a rustls acceptor built from the current files, and the handshake of one
//! accepted connection within the deadline (the gRPC ports' accept loop, `server::accept`,
//! and the gateway's HTTP face call it for each connection they hold).
use super::{Cached, Material, Source, TlsConfig, TlsError, provider};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// Whether a server asks its callers for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// None asked for.
    None,
    /// Checked against the CA when a caller offers one; a caller without one is served.
    Optional,
    /// A caller without a certificate signed by the CA is refused in the handshake.
    Required,
}

/// A port's TLS: the process's certificate, the protocols it offers (ALPN) and whether it asks
/// callers for a certificate. Cheap to clone.
#[derive(Clone)]
pub struct ServerTls {
    source: Arc<Source>,
    alpn: Vec<Vec<u8>>,
    client_auth: ClientAuth,
    handshake_timeout: Duration,
    built: Arc<Cached<ServerConfig>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("client_auth", &self.client_auth)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The TLS of a gRPC port (ALPN `h2`), when `cfg` serves TLS; reads the files now.
    pub fn grpc(cfg: &TlsConfig, client_auth: ClientAuth) -> Result<Option<Self>, TlsError> {
        Self::with_alpn(cfg, client_auth, &[b"h2"])
    }

    /// The TLS of an HTTP/1.1 port (ALPN `http/1.1`), when `cfg` serves TLS.
    pub fn http1(cfg: &TlsConfig, client_auth: ClientAuth) -> Result<Option<Self>, TlsError> {
        Self::with_alpn(cfg, client_auth, &[b"http/1.1"])
    }

    fn with_alpn(
        cfg: &TlsConfig,
        client_auth: ClientAuth,
        alpn: &[&[u8]],
    ) -> Result<Option<Self>, TlsError> {
        if !cfg.serves() {
            return Ok(None);
        }
        if client_auth != ClientAuth::None && cfg.ca.is_none() {
            return Err(TlsError(
                "tls.ca: must be set to check callers' certificates".to_owned(),
            ));
        }
        let tls = Self {
            source: Source::load(cfg)?,
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            client_auth,
            handshake_timeout: cfg.handshake_timeout(),
            built: Arc::default(),
        };
        // Builds once now so a setup rustls refuses fails at start, not at the first caller.
        tls.config()?;
        Ok(Some(tls))
    }

    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth
    }

    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// The acceptor for a new connection, from the files as they are now.
    pub fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
        self.config().map(tokio_rustls::TlsAcceptor::from)
    }

    /// Accepts one TLS connection on `stream` within the handshake deadline.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        let acceptor = self
            .acceptor()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        match tokio::time::timeout(self.handshake_timeout, acceptor.accept(stream)).await {
            Ok(done) => done,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no TLS handshake within {:?}", self.handshake_timeout),
            )),
        }
    }

    fn config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.built
            .get(&self.source.current(), |material| self.build(material))
    }

    fn build(&self, material: &Material) -> Result<ServerConfig, TlsError> {
        let (chain, key) = material
            .identity
            .as_ref()
            .ok_or_else(|| TlsError("tls.cert and tls.key: must be set to serve TLS".to_owned()))?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError(format!("tls: {e}")))?;
        let builder =
            match (self.client_auth, &material.roots) {
                (ClientAuth::None, _) => builder.with_no_client_auth(),
                (auth, Some(roots)) => {
                    let verifier =
                        WebPkiClientVerifier::builder_with_provider(roots.clone(), provider());
                    let verifier = if auth == ClientAuth::Optional {
                        verifier.allow_unauthenticated()
                    } else {
                        verifier
                    };
                    builder.with_client_cert_verifier(verifier.build().map_err(|e| {
                        TlsError(format!("tls.ca: cannot check clients with it: {e}"))
                    })?)
                }
                (_, None) => {
                    return Err(TlsError(
                        "tls.ca: must be set to check callers' certificates".to_owned(),
                    ));
                }
            };
        let mut config = builder
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| TlsError(format!("tls.cert and tls.key: {e}")))?;
        config.alpn_protocols.clone_from(&self.alpn);
        Ok(config)
    }
}
