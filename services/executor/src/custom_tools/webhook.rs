//! Webhook tools: one HTTP request per call to the configured URL, through droidmesh's
//! address guard ([`droidmesh_netguard`]: loopback, private, link-local and metadata
//! addresses are refused unless the tool's `allow_hosts` names the host), within the tool's
//! timeout, its answer read up to `max_response_bytes`. The arguments go as a JSON body, or
//! as query parameters for GET. A 2xx answer is the call's value (JSON when it parses, else
//! its text); any other status is the call's error. Redirects are not followed.
use std::time::Duration;

use droidmesh_netguard::{Guard, read_capped, shown};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde_json::Value;
use tokio::time::Instant;

use super::config::WebhookConfig;
use super::headers::{self, HeaderTemplate};
use crate::secrets::Secrets;

/// Most characters of a failed answer's body shown in the error.
const ERROR_BODY_SHOWN: usize = 500;

/// One configured webhook.
#[derive(Debug)]
pub struct Webhook {
    url: Url,
    method: Method,
    headers: Vec<HeaderTemplate>,
    guard: Guard,
    max_response_bytes: u64,
}

/// A webhook's answer.
#[derive(Debug)]
pub struct Answer {
    pub value: Value,
    /// `POST http://host/path answered 200 OK (57 bytes)`.
    pub summary: String,
}

impl Webhook {
    /// Builds the webhook of a checked config (`config::problems` found nothing).
    pub fn new(cfg: &WebhookConfig) -> Result<Self, String> {
        let url = Url::parse(cfg.url.trim()).map_err(|e| format!("url: {e}"))?;
        let method = Method::from_bytes(cfg.method.to_ascii_uppercase().as_bytes())
            .map_err(|e| format!("method: {e}"))?;
        let headers = cfg
            .headers
            .iter()
            .map(|(name, value)| {
                HeaderTemplate::parse(name, value).map_err(|e| format!("headers.{name} {e}"))
            })
            .collect::<Result<_, _>>()?;
        let guard = Guard::new(
            &cfg.allow_hosts,
            concat!("droidmesh-executor/", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(Self {
            url,
            method,
            headers,
            guard,
            max_response_bytes: cfg.max_response_bytes,
        })
    }

    /// The secret ids the headers name.
    pub fn secret_ids(&self) -> Vec<&str> {
        self.headers
            .iter()
            .flat_map(HeaderTemplate::secret_ids)
            .collect()
    }

    /// Sends one call with `args` (an object), within `timeout`. Records the request's method,
    /// server and status on the current span.
    pub async fn call(
        &self,
        args: &Value,
        timeout: Duration,
        secrets: &Secrets,
    ) -> Result<Answer, String> {
        let started = Instant::now();
        let deadline = started + timeout;
        let filled = headers::fill(&self.headers, secrets)?;
        let mut url = self.url.clone();
        let body = if self.method == Method::GET {
            add_query(&mut url, args);
            None
        } else {
            Some(serde_json::to_vec(args).map_err(|e| format!("the arguments: {e}"))?)
        };
        let span = tracing::Span::current();
        span.record("http.request.method", self.method.as_str());
        span.record("server.address", url.host_str().unwrap_or_default());
        span.record("server.port", url.port_or_known_default().unwrap_or(0));
        // Checked before anything is sent: a refused address is never connected to.
        let client = self.guard.client_for(&url)?;
        let mut request = client.request(self.method.clone(), url.clone());
        let has =
            |name: &reqwest::header::HeaderName| filled.headers.iter().any(|(k, _)| k == name);
        if !has(&ACCEPT) {
            request = request.header(ACCEPT, "application/json, text/plain;q=0.9, */*;q=0.5");
        }
        for (name, value) in &filled.headers {
            request = request.header(name, value);
        }
        if let Some(body) = body {
            if !has(&CONTENT_TYPE) {
                request = request.header(CONTENT_TYPE, "application/json");
            }
            request = request.body(body);
        }
        let timed_out = || {
            format!(
                "request to {} timed out after {} ms (the tool's timeout_ms)",
                shown(&url),
                timeout.as_millis()
            )
        };
        let mut response = match tokio::time::timeout_at(deadline, request.send()).await {
            Err(_) => return Err(timed_out()),
            Ok(Err(e)) => return Err(self.guard.describe(&url, &e)),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        span.record("http.response.status_code", status.as_u16());
        if status.is_redirection() {
            return Err(format!(
                "{} answered {status}, a redirect; webhook tools do not follow redirects (the tool's url should be the final address)",
                shown(&url)
            ));
        }
        let read = read_capped(&mut response, &url, self.max_response_bytes);
        let bytes = match tokio::time::timeout_at(deadline, read).await {
            Err(_) => return Err(timed_out()),
            Ok(r) => r?,
        };
        // A service that echoes what it was sent must not hand the model a secret.
        let text = headers::redact(&String::from_utf8_lossy(&bytes), &filled.secrets);
        if !status.is_success() {
            let body = droidmesh_proto::text::shorten_noting(text.trim(), ERROR_BODY_SHOWN);
            return Err(if body.is_empty() {
                format!("{} answered {status}", shown(&url))
            } else {
                format!("{} answered {status}: {body}", shown(&url))
            });
        }
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Answer {
            value,
            summary: format!(
                "{} {} answered {status} ({} bytes)",
                self.method,
                shown(&url),
                bytes.len()
            ),
        })
    }
}

/// Adds the arguments to `url`'s query: scalars as text, arrays as repeated keys, objects as
/// JSON text; `null` is left out.
fn add_query(url: &mut Url, args: &Value) {
    let Some(args) = args.as_object() else {
        return;
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut pairs = url.query_pairs_mut();
    for (key, value) in args {
        match value {
            Value::Null => {}
            Value::Array(items) => {
                for item in items.iter().filter(|i| !i.is_null()) {
                    pairs.append_pair(key, &text(item));
                }
            }
            other => {
                pairs.append_pair(key, &text(other));
            }
        }
    }
    drop(pairs);
    if url.query() == Some("") {
        url.set_query(None);
    }
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
