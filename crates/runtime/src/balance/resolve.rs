//! How a service name becomes the addresses of its replicas: the system resolver (a headless
//! Service's DNS name answers with every ready pod), a hosts file re-read at every resolution,
//! or a table a test changes while the client runs.
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

pub type ResolveFuture = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// Resolves `host` (a name or an address literal) and `port` to socket addresses.
pub trait Resolver: Debug + Send + Sync + 'static {
    fn resolve(&self, host: &str, port: u16) -> ResolveFuture;
}

/// The operating system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> ResolveFuture {
        let target = format!("{host}:{port}");
        Box::pin(async move {
            let mut addrs: Vec<SocketAddr> = tokio::net::lookup_host(target).await?.collect();
            addrs.sort();
            addrs.dedup();
            Ok(addrs)
        })
    }
}

/// Names mapped to addresses in memory; a name it does not know is not found. Clones share
/// the table, so a test can add or remove replicas while a client resolves through it.
#[derive(Debug, Default, Clone)]
pub struct StaticResolver {
    table: Arc<RwLock<HashMap<String, Vec<IpAddr>>>>,
}

impl StaticResolver {
    /// Sets what `name` resolves to (an empty list: resolves to nothing).
    pub fn set(&self, name: &str, addrs: &[IpAddr]) {
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        table.insert(name.to_ascii_lowercase(), addrs.to_vec());
    }

    fn lookup(&self, host: &str) -> Option<Vec<IpAddr>> {
        let table = self.table.read().unwrap_or_else(|p| p.into_inner());
        table.get(&host.to_ascii_lowercase()).cloned()
    }
}

impl Resolver for StaticResolver {
    fn resolve(&self, host: &str, port: u16) -> ResolveFuture {
        let found = literal(host)
            .map(|ip| vec![ip])
            .or_else(|| self.lookup(host))
            .ok_or_else(|| not_found(host, "it is not in the resolver's table"));
        Box::pin(async move { Ok(to_socket_addrs(found?, port)) })
    }
}

/// A hosts file (`address name [name...]` per line, `#` comments), read again at every
/// resolution so replicas can be added or removed by rewriting it; names it does not list go
/// to the system resolver.
#[derive(Debug, Clone)]
pub struct HostsFileResolver {
    path: PathBuf,
}

/// The largest hosts file read; a bigger one is refused rather than read whole.
const HOSTS_FILE_LIMIT: u64 = 1 << 20;

impl HostsFileResolver {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

impl Resolver for HostsFileResolver {
    fn resolve(&self, host: &str, port: u16) -> ResolveFuture {
        let path = self.path.clone();
        let host = host.to_owned();
        Box::pin(async move {
            if let Some(ip) = literal(&host) {
                return Ok(vec![SocketAddr::new(ip, port)]);
            }
            let size = tokio::fs::metadata(&path).await?.len();
            if size > HOSTS_FILE_LIMIT {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "hosts file {} is {size} bytes; at most {HOSTS_FILE_LIMIT} are read",
                        path.display()
                    ),
                ));
            }
            let text = tokio::fs::read_to_string(&path).await?;
            let listed = parse_hosts(&text, &host);
            if listed.is_empty() {
                return SystemResolver.resolve(&host, port).await;
            }
            Ok(to_socket_addrs(listed, port))
        })
    }
}

/// Every address the hosts file text gives `host`, in file order, without repeats.
pub fn parse_hosts(text: &str, host: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let Some(addr) = fields.next().and_then(|a| a.parse::<IpAddr>().ok()) else {
            continue;
        };
        if fields.any(|name| name.eq_ignore_ascii_case(host)) && !out.contains(&addr) {
            out.push(addr);
        }
    }
    out
}

fn literal(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

fn to_socket_addrs(ips: Vec<IpAddr>, port: u16) -> Vec<SocketAddr> {
    ips.into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect()
}

fn not_found(host: &str, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("cannot resolve {host}: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_lines_give_every_address_of_a_name() {
        let text = "# replicas\n127.0.0.2 executor executor.local\n127.0.0.3\texecutor # second\n\
                    bogus executor\n127.0.0.4 other\n127.0.0.2 EXECUTOR\n";
        let ips: Vec<String> = parse_hosts(text, "executor")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(ips, ["127.0.0.2", "127.0.0.3"]);
        assert!(parse_hosts(text, "missing").is_empty());
    }

    #[tokio::test]
    async fn a_static_table_changes_under_a_running_client() {
        let resolver = StaticResolver::default();
        let err = resolver.resolve("executor", 1).await.unwrap_err();
        assert!(err.to_string().contains("cannot resolve executor"), "{err}");
        resolver.set("executor", &["127.0.0.2".parse().unwrap()]);
        let clone = resolver.clone();
        clone.set(
            "Executor",
            &["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()],
        );
        let got = resolver.resolve("executor", 7).await.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].to_string(), "127.0.0.3:7");
        assert_eq!(
            resolver.resolve("[::1]", 7).await.unwrap()[0].to_string(),
            "[::1]:7"
        );
    }
}
