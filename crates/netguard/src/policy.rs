//! Where droidmesh's outgoing HTTP may connect: addresses that reach the host itself, private
//! networks, link-local and cloud metadata services are refused, unless the operator put the
//! host on the allow list. The check applies to the addresses a connection would actually use
//! (after DNS resolution, on every redirect hop), never to the text of a URL alone.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16.
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// 169.254.169.254 and fd00:ec2::254: cloud instance metadata services.
    Metadata,
    /// 0.0.0.0/8 ("this network"; 0.0.0.0 reaches the host itself on many systems).
    ThisNetwork,
    /// `::`.
    Unspecified,
    /// 100.64.0.0/10, carrier-grade NAT space.
    SharedCgnat,
    /// fc00::/7.
    UniqueLocal,
}

impl Blocked {
    /// The kind of address, as the refusal names it: "a loopback address".
    pub fn describe(self) -> &'static str {
        match self {
            Blocked::Loopback => "a loopback address",
            Blocked::Private => "a private-network address",
            Blocked::LinkLocal => "a link-local address",
            Blocked::Metadata => "a link-local/metadata address",
            Blocked::ThisNetwork => "a 'this network' address (0.0.0.0/8)",
            Blocked::Unspecified => "the unspecified address",
            Blocked::SharedCgnat => "a shared (carrier-grade NAT) address",
            Blocked::UniqueLocal => "a unique-local (private IPv6) address",
        }
    }
}

/// Whether `ip` is refused, and why. IPv6 forms that carry an IPv4 address (mapped
/// `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) are judged by that
/// IPv4 address.
pub fn blocked(ip: IpAddr) -> Option<Blocked> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<Blocked> {
    let [a, b, c, d] = ip.octets();
    match (a, b) {
        _ if [a, b, c, d] == [169, 254, 169, 254] => Some(Blocked::Metadata),
        (127, _) => Some(Blocked::Loopback),
        (10, _) | (192, 168) => Some(Blocked::Private),
        (172, 16..=31) => Some(Blocked::Private),
        (169, 254) => Some(Blocked::LinkLocal),
        (0, _) => Some(Blocked::ThisNetwork),
        (100, 64..=127) => Some(Blocked::SharedCgnat),
        _ => None,
    }
}

fn blocked_v6(ip: Ipv6Addr) -> Option<Blocked> {
    const METADATA: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);
    if ip == Ipv6Addr::LOCALHOST {
        return Some(Blocked::Loopback);
    }
    if ip == Ipv6Addr::UNSPECIFIED {
        return Some(Blocked::Unspecified);
    }
    if ip == METADATA {
        return Some(Blocked::Metadata);
    }
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return blocked_v4(v4);
    }
    // IPv4-compatible (::a.b.c.d, deprecated) and the NAT64 well-known prefix 64:ff9b::/96.
    let embedded = Ipv4Addr::new(
        (s[6] >> 8) as u8,
        (s[6] & 0xff) as u8,
        (s[7] >> 8) as u8,
        (s[7] & 0xff) as u8,
    );
    if s[..6] == [0, 0, 0, 0, 0, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return blocked_v4(embedded);
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => Some(Blocked::UniqueLocal),
        x if x & 0xffc0 == 0xfe80 => Some(Blocked::LinkLocal),
        _ => None,
    }
}

/// A URL's host: an IP literal or a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

impl<'a> Host<'a> {
    /// Reads a URL's host as `Url::host_str` gives it (IPv6 in brackets).
    pub fn parse(host: &'a str) -> Self {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(host),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum EntryHost {
    Ip(IpAddr),
    /// Lower case, without a trailing dot.
    Name(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: EntryHost,
    /// `None`: any port.
    port: Option<u16>,
}

/// The operator's allow list: hosts (names or IP literals, optionally with `:port`) that may be
/// reached although their addresses are refused by default. Matching is exact and
/// case-insensitive; a name on the list does not cover its subdomains.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    entries: Vec<Entry>,
    shown: Vec<String>,
}

impl AllowList {
    /// Parses `host`, `host:port`, an IPv4 or IPv6 literal, or `[v6]:port` per entry.
    pub fn new(entries: &[String]) -> Result<Self, String> {
        let mut list = Self::default();
        for raw in entries {
            list.entries.push(parse_entry(raw)?);
            list.shown.push(raw.trim().to_ascii_lowercase());
        }
        Ok(list)
    }

    /// Whether `host` on `port` is on the list.
    pub fn allows(&self, host: Host<'_>, port: u16) -> bool {
        self.entries
            .iter()
            .any(|e| e.port.is_none_or(|p| p == port) && host_matches(&e.host, host))
    }

    /// Whether the name is on the list for some port.
    pub fn names(&self, name: &str) -> bool {
        self.entries
            .iter()
            .any(|e| host_matches(&e.host, Host::Name(name)))
    }

    /// The entries as configured (lower case), for prompts and refusals.
    pub fn entries(&self) -> &[String] {
        &self.shown
    }

    /// `a, b:8080`, or `none`.
    pub fn describe(&self) -> String {
        if self.shown.is_empty() {
            "none".into()
        } else {
            self.shown.join(", ")
        }
    }
}

fn host_matches(entry: &EntryHost, host: Host<'_>) -> bool {
    match (entry, host) {
        (EntryHost::Ip(a), Host::Ip(b)) => *a == b,
        (EntryHost::Name(a), Host::Name(b)) => {
            a.eq_ignore_ascii_case(b.strip_suffix('.').unwrap_or(b))
        }
        _ => false,
    }
}

fn parse_entry(raw: &str) -> Result<Entry, String> {
    let text = raw.trim();
    let bad = |why: &str| {
        Err(format!(
            "allow_hosts entry `{raw}`: {why}; expected a host name or IP address, optionally with :port (e.g. `api.internal`, `10.0.0.5:8080`, `[fd00::1]:443`)"
        ))
    };
    if text.is_empty() {
        return bad("it is empty");
    }
    if text.contains("://") || text.contains('/') {
        return bad("it is a URL or path, not a host");
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Entry {
            host: EntryHost::Ip(ip),
            port: None,
        });
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return bad("the `[` has no matching `]`");
        };
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':').map(str::parse::<u16>) {
                Some(Ok(port)) => Some(port),
                _ => return bad("the port after `]` is not a number from 0 to 65535"),
            },
        };
        match v6.parse::<Ipv6Addr>() {
            Ok(ip) => (EntryHost::Ip(IpAddr::V6(ip)), port),
            Err(_) => return bad("the part in brackets is not an IPv6 address"),
        }
    } else {
        let (host, port) = match text.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(port) => (h, Some(port)),
                Err(_) => return bad("the part after `:` is not a port number"),
            },
            None => (text, None),
        };
        match host.parse::<IpAddr>() {
            Ok(ip @ IpAddr::V4(_)) => (EntryHost::Ip(ip), port),
            Ok(IpAddr::V6(_)) => return bad("write an IPv6 address with a port as [addr]:port"),
            Err(_) => {
                let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
                let valid = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
                if !valid {
                    return bad("it is not a valid host name");
                }
                (EntryHost::Name(name), port)
            }
        }
    };
    Ok(Entry { host, port })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn kind(s: &str) -> Option<Blocked> {
        blocked(s.parse().unwrap())
    }

    #[test]
    fn every_refused_ipv4_range_and_its_edges() {
        use Blocked::*;
        let cases = [
            ("127.0.0.1", Some(Loopback)),
            ("127.255.255.255", Some(Loopback)),
            ("126.255.255.255", None),
            ("128.0.0.0", None),
            ("10.0.0.0", Some(Private)),
            ("10.255.255.255", Some(Private)),
            ("9.255.255.255", None),
            ("11.0.0.0", None),
            ("172.16.0.0", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("192.168.0.1", Some(Private)),
            ("192.168.255.255", Some(Private)),
            ("192.167.255.255", None),
            ("192.169.0.0", None),
            ("169.254.0.1", Some(LinkLocal)),
            ("169.254.255.255", Some(LinkLocal)),
            ("169.254.169.254", Some(Metadata)),
            ("169.253.255.255", None),
            ("169.255.0.0", None),
            ("0.0.0.0", Some(ThisNetwork)),
            ("0.255.255.255", Some(ThisNetwork)),
            ("1.0.0.0", None),
            ("100.64.0.0", Some(SharedCgnat)),
            ("100.127.255.255", Some(SharedCgnat)),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
        ];
        for (ip, want) in cases {
            assert_eq!(kind(ip), want, "{ip}");
        }
    }

    #[test]
    fn every_refused_ipv6_range_and_its_edges() {
        use Blocked::*;
        let cases = [
            ("::1", Some(Loopback)),
            ("::", Some(Unspecified)),
            ("fc00::", Some(UniqueLocal)),
            ("fdff:ffff::1", Some(UniqueLocal)),
            ("fd00:ec2::254", Some(Metadata)),
            ("fbff:ffff::1", None),
            ("fe00::1", None),
            ("fe80::1", Some(LinkLocal)),
            ("febf:ffff::1", Some(LinkLocal)),
            ("fec0::1", None),
            ("2001:4860:4860::8888", None),
            ("2606:4700::1111", None),
        ];
        for (ip, want) in cases {
            assert_eq!(kind(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_that_carry_ipv4_are_judged_by_the_ipv4_address() {
        use Blocked::*;
        let cases = [
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:10.1.2.3", Some(Private)),
            ("::ffff:172.20.0.1", Some(Private)),
            ("::ffff:192.168.1.1", Some(Private)),
            ("::ffff:169.254.169.254", Some(Metadata)),
            ("::ffff:169.254.1.1", Some(LinkLocal)),
            ("::ffff:0.0.0.0", Some(ThisNetwork)),
            ("::ffff:100.64.1.1", Some(SharedCgnat)),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some(Loopback)),
            ("::10.0.0.1", Some(Private)),
            ("64:ff9b::7f00:1", Some(Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(Metadata)),
            ("64:ff9b::808:808", None),
        ];
        for (ip, want) in cases {
            assert_eq!(kind(ip), want, "{ip}");
        }
    }

    #[test]
    fn refusals_name_the_kind() {
        assert_eq!(
            kind("169.254.169.254").unwrap().describe(),
            "a link-local/metadata address"
        );
        assert_eq!(kind("127.0.0.1").unwrap().describe(), "a loopback address");
    }

    #[test]
    fn hosts_parse_as_ip_or_name() {
        assert_eq!(Host::parse("[::1]"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(
            Host::parse("127.0.0.1"),
            Host::Ip("127.0.0.1".parse().unwrap())
        );
        assert_eq!(Host::parse("example.com"), Host::Name("example.com"));
    }

    fn list(entries: &[&str]) -> AllowList {
        AllowList::new(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn allow_list_matches_exactly_and_case_insensitively() {
        let l = list(&[
            "Internal.Example",
            "127.0.0.1:8080",
            "[::1]:9000",
            "10.0.0.5",
            "::2",
        ]);
        let ip = |s: &str| Host::Ip(s.parse().unwrap());
        assert!(l.allows(Host::Name("internal.example"), 80));
        assert!(l.allows(Host::Name("INTERNAL.EXAMPLE."), 443));
        assert!(!l.allows(Host::Name("api.internal.example"), 80));
        assert!(!l.allows(Host::Name("internal.example.com"), 80));
        assert!(l.allows(ip("127.0.0.1"), 8080));
        assert!(!l.allows(ip("127.0.0.1"), 8081));
        assert!(!l.allows(Host::Name("localhost"), 8080));
        assert!(l.allows(ip("::1"), 9000));
        assert!(!l.allows(ip("::1"), 80));
        assert!(l.allows(ip("10.0.0.5"), 1));
        assert!(l.allows(ip("0:0::2"), 1));
        assert!(!l.allows(ip("10.0.0.6"), 1));
        assert!(l.names("internal.example"));
        assert!(!l.names("localhost"));
        assert_eq!(
            l.describe(),
            "internal.example, 127.0.0.1:8080, [::1]:9000, 10.0.0.5, ::2"
        );
        assert_eq!(AllowList::default().describe(), "none");
    }

    #[test]
    fn allow_list_refuses_malformed_entries() {
        for bad in [
            "",
            "  ",
            "http://example.com",
            "example.com/path",
            "host:port",
            "host:70000",
            "[::1",
            "[::1]:x",
            "[nope]:80",
            "::1:80:zz",
            "bad host",
        ] {
            let e = AllowList::new(&[bad.to_string()]).unwrap_err();
            assert!(
                e.contains("expected a host name or IP address"),
                "{bad}: {e}"
            );
        }
    }
}
