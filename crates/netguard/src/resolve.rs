//! Name resolution that vets every address before a connection may use it. The client
//! connects only to the addresses returned here, so a name cannot be re-resolved to another
//! address (DNS rebinding) between the check and the connection.
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::policy::{AllowList, Blocked, blocked};

/// A connection refused by the address policy; found again in reqwest's error chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The name that was resolved, when the URL held a name.
    pub name: Option<String>,
    pub ip: IpAddr,
    pub kind: Blocked,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(
                f,
                "{name} resolves to {}, {}",
                self.ip,
                self.kind.describe()
            ),
            None => write!(f, "{} is {}", self.ip, self.kind.describe()),
        }
    }
}

impl std::error::Error for Refusal {}

/// A name the trusted client was asked for although it is not on the allow list.
#[derive(Debug)]
struct NotListed(String);

impl std::fmt::Display for NotListed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not on the allow list", self.0)
    }
}

impl std::error::Error for NotListed {}

/// Resolves with the system resolver. `vet`: keep only addresses the policy allows, and refuse
/// the name when none is left. Without `vet` (the client for allow-listed hosts) only names on
/// the allow list are resolved at all.
pub struct PolicyResolver {
    pub allow: Arc<AllowList>,
    pub vet: bool,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let allow = Arc::clone(&self.allow);
        let vet = self.vet;
        Box::pin(async move {
            if !vet && !allow.names(&host) {
                return Err(Box::new(NotListed(host)) as _);
            }
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .take(32)
                .collect();
            if !vet {
                return Ok(Box::new(found.into_iter()) as Addrs);
            }
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                found.into_iter().partition(|a| blocked(a.ip()).is_none());
            if !refused.is_empty() {
                tracing::debug!(host = %host, refused = refused.len(), "addresses refused by policy");
            }
            match (allowed.is_empty(), refused.first()) {
                (false, _) => Ok(Box::new(allowed.into_iter()) as Addrs),
                (true, Some(first)) => {
                    let ip = first.ip();
                    let kind = blocked(ip).unwrap_or(Blocked::Private);
                    Err(Box::new(Refusal {
                        name: Some(host),
                        ip,
                        kind,
                    }) as _)
                }
                (true, None) => Err(format!("{host} has no addresses").into()),
            }
        })
    }
}

/// The policy refusal somewhere in an error's chain of causes.
pub fn find_refusal<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<Refusal>() {
            return Some(r);
        }
        next = e.source();
    }
    None
}

/// An error and its causes on one line, without repeats.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}
