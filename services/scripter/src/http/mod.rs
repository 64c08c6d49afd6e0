//! The scripter's HTTP capability: reqwest underneath, redirects followed by hand so that every
//! hop passes the address policy, a deadline per request, a cap on the body read and a budget
//! of requests per run.
//!
//! The address policy is droidmesh's address guard ([`droidmesh_netguard`]): hosts on the
//! allow list go through a client that resolves only allow-listed names; every other host
//! through one whose resolver drops refused addresses; IP-literal URLs are checked before any
//! connection. No proxy is used, so the vetted address is the one connected to.
mod request;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, LOCATION};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tracing::Instrument as _;

pub use droidmesh_netguard::Refusal;
pub use request::{HttpRequest, shown};

use crate::config::HttpConfig;
use droidmesh_netguard::{AllowList, Guard, check_scheme, read_capped};

/// Requests one run may still send.
#[derive(Debug)]
pub struct Budget {
    used: AtomicU32,
    max: u32,
}

impl Budget {
    pub fn new(max: u32) -> Self {
        Self {
            used: AtomicU32::new(0),
            max,
        }
    }

    /// Requests sent so far.
    pub fn used(&self) -> u32 {
        self.used.load(Ordering::Relaxed).min(self.max)
    }

    fn take(&self) -> Result<(), String> {
        if self.used.fetch_add(1, Ordering::Relaxed) >= self.max {
            return Err(format!(
                "this run has sent {} HTTP requests, its limit; work with the data you have",
                self.max
            ));
        }
        Ok(())
    }
}

/// The HTTP clients and policy of one scripter service.
#[derive(Debug, Clone)]
pub struct Http {
    guard: Guard,
    cfg: HttpConfig,
}

impl Http {
    pub fn new(cfg: &HttpConfig) -> Result<Self, String> {
        let guard = Guard::new(
            &cfg.allow_hosts,
            concat!("droidmesh-scripter/", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(Self {
            guard,
            cfg: cfg.clone(),
        })
    }

    /// The allow list in effect.
    pub fn allow_list(&self) -> &AllowList {
        self.guard.allow_list()
    }

    /// Sends `req`, following redirects, and returns the response as the script sees it:
    /// `{ status, status_text, ok, url, redirected, headers, body | body_base64 }`. Ends by
    /// `limit` at the latest (the step's deadline); the errors are worded for the script.
    pub async fn fetch(
        &self,
        req: HttpRequest,
        limit: Instant,
        budget: &Budget,
        task_id: &str,
    ) -> Result<Value, String> {
        let asked = req.timeout.unwrap_or(Duration::MAX);
        let timeout = asked.min(Duration::from_millis(self.cfg.timeout_ms));
        let started = Instant::now();
        let own = started.checked_add(timeout).unwrap_or(limit);
        let deadline = own.min(limit);
        let HttpRequest {
            mut url,
            mut method,
            mut headers,
            mut body,
            binary,
            ..
        } = req;
        let timed_out = |url: &Url| {
            let ms = deadline.saturating_duration_since(started).as_millis();
            if own <= limit {
                format!("request to {} timed out after {ms} ms", shown(url))
            } else {
                format!(
                    "request to {} was stopped by the step's time limit ({ms} ms were left when it started)",
                    shown(url)
                )
            }
        };
        let mut hop = 0u32;
        loop {
            let client = self.guard.client_for(&url)?;
            budget.take()?;
            let span = tracing::info_span!(
                "execute_tool",
                otel.name = "execute_tool http",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "http",
                gen_ai.tool.type = "extension",
                droidmesh.task.id = task_id,
                http.request.method = %method,
                server.address = url.host_str().unwrap_or_default(),
                server.port = url.port_or_known_default().unwrap_or_default(),
                http.response.status_code = tracing::field::Empty,
                error.type = tracing::field::Empty,
            );
            let mut builder = client.request(method.clone(), url.clone());
            for (k, v) in &headers {
                builder = builder.header(k, v);
            }
            if let Some(b) = &body {
                builder = builder.body(b.clone());
            }
            let sent = tokio::time::timeout_at(deadline, builder.send())
                .instrument(span.clone())
                .await;
            let mut resp = match sent {
                Err(_) => {
                    span.record("error.type", "timeout");
                    return Err(timed_out(&url));
                }
                Ok(Err(e)) => {
                    span.record(
                        "error.type",
                        if e.is_connect() { "connect" } else { "request" },
                    );
                    return Err(self.guard.describe(&url, &e));
                }
                Ok(Ok(r)) => r,
            };
            let status = resp.status();
            span.record("http.response.status_code", status.as_u16());
            let location = resp.headers().get(LOCATION).and_then(|l| l.to_str().ok());
            if let (true, Some(location)) = (is_followed(status), location) {
                let next = url.join(location).map_err(|e| {
                    format!("{} redirected to an invalid location: {e}", shown(&url))
                })?;
                if hop >= self.cfg.max_redirects {
                    return Err(format!(
                        "request to {} was redirected more than {} times; the last hop pointed to {}",
                        shown(&url),
                        self.cfg.max_redirects,
                        shown(&next)
                    ));
                }
                check_scheme(&next).map_err(|e| format!("{} redirected to {e}", shown(&url)))?;
                let to_get = status == StatusCode::SEE_OTHER
                    || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                        && method == Method::POST);
                if to_get && method != Method::HEAD {
                    method = Method::GET;
                    body = None;
                    headers.retain(|(k, _)| k != CONTENT_TYPE && k != CONTENT_LENGTH);
                }
                if next.origin() != url.origin() {
                    headers.retain(|(k, _)| k != AUTHORIZATION && k != COOKIE);
                }
                url = next;
                hop += 1;
                continue;
            }
            let response_headers = header_map(resp.headers());
            let bytes = if method == Method::HEAD {
                Vec::new()
            } else {
                let read = read_capped(&mut resp, &url, self.cfg.max_response_bytes);
                match tokio::time::timeout_at(deadline, read).await {
                    Ok(r) => r?,
                    Err(_) => return Err(timed_out(&url)),
                }
            };
            let mut out = json!({
                "status": status.as_u16(),
                "status_text": status.canonical_reason().unwrap_or(""),
                "ok": status.is_success(),
                "url": url.as_str(),
                "redirected": hop > 0,
                "headers": response_headers,
            });
            if binary {
                out["body_base64"] = base64::engine::general_purpose::STANDARD
                    .encode(&bytes)
                    .into();
            } else {
                out["body"] = String::from_utf8_lossy(&bytes).into_owned().into();
            }
            return Ok(out);
        }
    }
}

/// Redirect statuses that are followed when they carry a Location.
fn is_followed(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// Response headers as an object of lower-case names; repeated headers joined with ", ".
fn header_map(headers: &reqwest::header::HeaderMap) -> Value {
    let mut map = Map::new();
    for (k, v) in headers {
        let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
        match map.get_mut(k.as_str()) {
            Some(Value::String(s)) => {
                s.push_str(", ");
                s.push_str(&v);
            }
            _ => {
                map.insert(k.as_str().to_owned(), Value::String(v));
            }
        }
    }
    Value::Object(map)
}
