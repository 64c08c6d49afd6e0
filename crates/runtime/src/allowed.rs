//! Which endpoints a service may be told to call. An agent's request names the device service
//! that holds its task's device (`DeviceBinding.endpoint`); [`AllowedEndpoints`] checks that
//! name against the endpoints the agent was configured with before any channel is made, so
//! whoever reaches an agent's port cannot point it at another host. Endpoints are compared in
//! a normal form ([`normalise`]: scheme, host case, default port, a trailing `/`), and what is
//! dialled is always the configured spelling, never the request's.
use std::net::IpAddr;

/// A request named an endpoint outside the allowed ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not the configured device service nor listed in {setting}: add it to {setting} to allow it"
)]
pub struct NotAllowed {
    /// The endpoint as the request named it.
    pub endpoint: String,
    /// The config setting that lists more endpoints (`executor.device_endpoints`, ...).
    pub setting: &'static str,
}

/// The endpoints a service calls: its default (used when a request names none) and those a
/// setting lists. Each may be a comma-separated list of replicas; each of its addresses is
/// allowed on its own.
#[derive(Debug, Clone)]
pub struct AllowedEndpoints {
    /// The configured default, trimmed ("" when there is none).
    default: String,
    /// Each allowed address: its normal form and its configured spelling.
    known: Vec<(String, String)>,
    setting: &'static str,
}

impl AllowedEndpoints {
    /// The default endpoint and the `setting`'s entries. An entry that is not an endpoint is
    /// refused, named.
    pub fn new(default: &str, more: &[String], setting: &'static str) -> Result<Self, String> {
        let default = default.trim().to_owned();
        let mut known = Vec::new();
        let named = |what: &str, e: String| format!("{what} is not an endpoint: {e}");
        for (entry, what) in
            std::iter::once((default.as_str(), "the default device service".into())).chain(
                more.iter()
                    .map(|m| (m.as_str(), format!("{setting} entry '{m}'"))),
            )
        {
            let mut any = false;
            for one in split(entry) {
                any = true;
                let norm = normalise(one).map_err(|e| named(&what, e))?;
                if !known.iter().any(|(n, _)| *n == norm) {
                    known.push((norm, one.to_owned()));
                }
            }
            if !any && !entry.is_empty() {
                return Err(named(&what, "no address in it".into()));
            }
        }
        Ok(Self {
            default,
            known,
            setting,
        })
    }

    /// What to dial for a request naming `requested`: the default when it names none (which
    /// may be empty when there is no default); else, when every address it names is allowed,
    /// their configured spellings (comma-separated, in the request's order).
    pub fn pick(&self, requested: &str) -> Result<String, NotAllowed> {
        let requested = requested.trim();
        if requested.is_empty() {
            return Ok(self.default.clone());
        }
        let refused = || NotAllowed {
            endpoint: requested.to_owned(),
            setting: self.setting,
        };
        let mut picked = Vec::new();
        for one in split(requested) {
            let norm = normalise(one).map_err(|_| refused())?;
            let (_, spelled) = self
                .known
                .iter()
                .find(|(n, _)| *n == norm)
                .ok_or_else(refused)?;
            picked.push(spelled.as_str());
        }
        if picked.is_empty() {
            return Err(refused());
        }
        Ok(picked.join(","))
    }

    /// Every allowed address, as configured.
    pub fn configured(&self) -> impl Iterator<Item = &str> {
        self.known.iter().map(|(_, spelled)| spelled.as_str())
    }
}

/// The addresses of a comma-separated endpoint list.
fn split(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// An endpoint's normal form: `scheme://host:port` with the scheme and host in lower case (an
/// IP address in its canonical form), the port written out (80 for `http`, 443 for `https`;
/// no scheme means `http`), and the path and query kept unless they are only `/`.
pub fn normalise(endpoint: &str) -> Result<String, String> {
    let endpoint = endpoint.trim();
    let with_scheme = if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("http://{endpoint}")
    };
    let uri: http::Uri = with_scheme.parse().map_err(|e| format!("{e}"))?;
    let scheme = uri.scheme_str().unwrap_or("http").to_ascii_lowercase();
    let port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        other => {
            return Err(format!(
                "only http:// and https:// are supported, not {other}://"
            ));
        }
    };
    let authority = uri.authority().ok_or("no host")?;
    let port = authority.port_u16().unwrap_or(port);
    let host = authority.host();
    if host.is_empty() {
        return Err("no host".into());
    }
    let host = match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        Ok(IpAddr::V4(ip)) => ip.to_string(),
        Err(_) => host.to_ascii_lowercase(),
    };
    // What precedes the host (a user name) is kept, so it never matches a configured endpoint.
    let user = authority
        .as_str()
        .rsplit_once('@')
        .map_or(String::new(), |(user, _)| format!("{user}@"));
    let path = uri.path_and_query().map_or("", |p| p.as_str());
    let path = if path == "/" { "" } else { path };
    Ok(format!("{scheme}://{user}{host}:{port}{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_endpoint_share_a_normal_form() {
        let same = [
            "http://droidmesh-device:50051",
            "HTTP://DroidMesh-Device:50051/",
            " droidmesh-device:50051 ",
        ];
        for s in same {
            assert_eq!(
                normalise(s).unwrap(),
                "http://droidmesh-device:50051",
                "{s}"
            );
        }
        assert_eq!(normalise("http://d").unwrap(), "http://d:80");
        assert_eq!(normalise("https://d:443").unwrap(), "https://d:443");
        assert_eq!(normalise("https://d").unwrap(), "https://d:443");
        assert_eq!(
            normalise("http://[0:0:0:0:0:0:0:1]:5").unwrap(),
            "http://[::1]:5"
        );
        // What makes another endpoint stays apart.
        let apart = [
            "https://droidmesh-device:50051",
            "http://droidmesh-device:50052",
            "http://droidmesh-device.evil:50051",
            "http://droidmesh-device:50051/other",
            "http://user@droidmesh-device:50051",
        ];
        for s in apart {
            assert_ne!(
                normalise(s).unwrap(),
                "http://droidmesh-device:50051",
                "{s}"
            );
        }
        for bad in ["ftp://d:1", "http://", "not a uri at all"] {
            assert!(normalise(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_request_gets_the_configured_spelling_of_an_allowed_endpoint_only() {
        let allowed = AllowedEndpoints::new(
            "http://127.0.0.1:50051",
            &["https://Devices.Lab:7000, http://10.0.0.5:50051".into()],
            "executor.device_endpoints",
        )
        .unwrap();
        assert_eq!(allowed.pick("").unwrap(), "http://127.0.0.1:50051");
        assert_eq!(
            allowed.pick("127.0.0.1:50051/").unwrap(),
            "http://127.0.0.1:50051"
        );
        assert_eq!(
            allowed.pick("https://devices.lab:7000").unwrap(),
            "https://Devices.Lab:7000"
        );
        assert_eq!(
            allowed
                .pick("http://10.0.0.5:50051,http://127.0.0.1:50051")
                .unwrap(),
            "http://10.0.0.5:50051,http://127.0.0.1:50051"
        );
        for refused in [
            "http://127.0.0.1:50052",
            "http://localhost:50051",
            "http://devices.lab:7000",
            "http://127.0.0.1:50051,http://127.0.0.1:9",
            "not a uri at all",
            ",",
        ] {
            let e = allowed.pick(refused).unwrap_err();
            assert_eq!(e.endpoint, refused, "{refused}");
            assert!(
                e.to_string()
                    .contains("add it to executor.device_endpoints"),
                "{e}"
            );
        }
        assert_eq!(allowed.configured().count(), 3);
    }

    #[test]
    fn an_entry_that_is_not_an_endpoint_is_refused_named() {
        let e = AllowedEndpoints::new(
            "http://127.0.0.1:1",
            &["ftp://x:1".into()],
            "manager.device_endpoints",
        )
        .unwrap_err();
        assert!(
            e.starts_with("manager.device_endpoints entry 'ftp://x:1' is not an endpoint"),
            "{e}"
        );
        // No default: nothing is allowed but what the setting lists.
        let only = AllowedEndpoints::new("", &[], "manager.device_endpoints").unwrap();
        assert_eq!(only.pick("").unwrap(), "");
        assert!(only.pick("http://127.0.0.1:1").is_err());
    }
}
