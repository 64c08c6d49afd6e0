//! droidmesh's address guard for outgoing HTTP: where a request made on a model's behalf may
//! connect (the scripter's `fetch`, the executor's webhook tools).
//!
//! Addresses that reach the host itself, private networks, link-local and cloud metadata
//! services are refused unless the operator put the host on an allow list ([`policy`]). The
//! check applies to the addresses a connection would actually use: a [`Guard`] holds two
//! clients. Hosts on the allow list (with their port, when the entry names one) go through a
//! client whose resolver resolves only allow-listed names; every other host goes through a
//! client whose resolver drops refused addresses and refuses a name with none left
//! ([`resolve`]). IP-literal URLs never reach a resolver and are checked by
//! [`Guard::client_for`] before any connection. No proxy is used, and redirects are not
//! followed by the clients: a caller that follows one checks the next hop again.
pub mod policy;
pub mod resolve;

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

pub use policy::{AllowList, Blocked, Host, blocked};
pub use resolve::{Refusal, chain, find_refusal};

use resolve::PolicyResolver;

/// The clients and allow list of one service's outgoing HTTP.
#[derive(Debug, Clone)]
pub struct Guard {
    vetted: reqwest::Client,
    trusted: reqwest::Client,
    allow: Arc<AllowList>,
}

impl Guard {
    /// Clients for `allow_hosts` (entries as [`AllowList::new`] reads them), sending
    /// `user_agent`. An entry that does not parse is an error naming it.
    pub fn new(allow_hosts: &[String], user_agent: &str) -> Result<Self, String> {
        install_crypto_provider();
        let allow = Arc::new(AllowList::new(allow_hosts)?);
        let client = |vet: bool| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .dns_resolver(PolicyResolver {
                    allow: Arc::clone(&allow),
                    vet,
                })
                .user_agent(user_agent)
                .pool_max_idle_per_host(4)
                .pool_idle_timeout(Duration::from_secs(30))
                .build()
                .map_err(|e| format!("cannot build the http client: {e}"))
        };
        Ok(Self {
            vetted: client(true)?,
            trusted: client(false)?,
            allow,
        })
    }

    /// The allow list in effect.
    pub fn allow_list(&self) -> &AllowList {
        &self.allow
    }

    /// The client for a request to `url` (one hop), or the refusal of its scheme or address,
    /// worded for whoever asked for the request.
    pub fn client_for(&self, url: &Url) -> Result<&reqwest::Client, String> {
        check_scheme(url)?;
        let host = Host::parse(url.host_str().unwrap_or_default());
        let port = url.port_or_known_default().unwrap_or(0);
        if self.allow.allows(host, port) {
            return Ok(&self.trusted);
        }
        if let Host::Ip(ip) = host
            && let Some(kind) = blocked(ip)
        {
            return Err(self.refused(
                url,
                &Refusal {
                    name: None,
                    ip,
                    kind,
                },
            ));
        }
        Ok(&self.vetted)
    }

    /// `request to <url> refused: <why>; allowed hosts: <list>`.
    pub fn refused(&self, url: &Url, why: &Refusal) -> String {
        format!(
            "request to {} refused: {why}; allowed hosts: {}",
            shown(url),
            self.allow.describe()
        )
    }

    /// A failed send in words: the policy's refusal when the resolver refused the name, else
    /// what failed with its causes (never the URL's query, which may hold secrets).
    pub fn describe(&self, url: &Url, e: &reqwest::Error) -> String {
        if let Some(r) = find_refusal(e) {
            return self.refused(url, r);
        }
        let what = if e.is_connect() {
            "could not connect"
        } else {
            "failed"
        };
        // reqwest's own message names the full URL (query included); its causes do not.
        let detail = std::error::Error::source(e).map(chain).unwrap_or_default();
        if detail.is_empty() {
            format!("request to {} {what}", shown(url))
        } else {
            format!("request to {} {what}: {detail}", shown(url))
        }
    }
}

/// `scheme://host[:port]/path` of a URL: no credentials, query or fragment, which may hold
/// secrets and are not needed to say what was refused.
pub fn shown(url: &Url) -> String {
    format!("{}{}", url.origin().ascii_serialization(), url.path())
}

/// Only http and https leave droidmesh.
pub fn check_scheme(url: &Url) -> Result<(), String> {
    match url.scheme() {
        "http" | "https" if url.host_str().is_some() => Ok(()),
        "http" | "https" => Err(format!("`{}` has no host", shown(url))),
        other => Err(format!(
            "the {other}: scheme is not allowed; only http and https URLs can be fetched"
        )),
    }
}

/// The body, read chunk by chunk, refused as soon as it passes `cap`.
pub async fn read_capped(
    resp: &mut reqwest::Response,
    url: &Url,
    cap: u64,
) -> Result<Vec<u8>, String> {
    let too_large = |what: String| {
        format!(
            "the response from {} is larger than the limit of {cap} bytes ({what}); ask for less (a smaller page, a filter, a range)",
            shown(url)
        )
    };
    if let Some(len) = resp.content_length()
        && len > cap
    {
        return Err(too_large(format!("content-length {len}")));
    }
    let mut out = Vec::new();
    loop {
        let chunk = resp.chunk().await.map_err(|e| {
            let detail = std::error::Error::source(&e).map(chain).unwrap_or_default();
            format!("reading the response from {} failed: {detail}", shown(url))
        })?;
        let Some(chunk) = chunk else { break };
        if (out.len() + chunk.len()) as u64 > cap {
            return Err(too_large(format!("more than {cap} bytes arrived")));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// rustls needs a process-wide crypto provider before the first https client is built.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    });
}
