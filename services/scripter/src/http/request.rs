//! A script's HTTP request as the sandbox hands it over (JSON), checked and typed.
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde_json::Value;

/// Headers a request may carry.
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub url: Url,
    pub method: Method,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Option<Vec<u8>>,
    /// The script's own timeout, if it asked for one.
    pub timeout: Option<Duration>,
    /// Deliver the body as base64 instead of text.
    pub binary: bool,
}

pub use droidmesh_netguard::{check_scheme, shown};

impl HttpRequest {
    /// Reads `{ url, method?, headers?, body?, json?, timeout_ms?, binary? }`.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        let Some(obj) = v.as_object() else {
            return Err("the request must be an object { url, method, headers, body }".into());
        };
        let url_text = match obj.get("url") {
            Some(Value::String(s)) => s.trim(),
            _ => return Err("the request needs a `url` string".into()),
        };
        let url = Url::parse(url_text)
            .map_err(|e| format!("`{url_text}` is not an absolute URL: {e}"))?;
        check_scheme(&url)?;
        let method = match obj.get("method") {
            None | Some(Value::Null) => Method::GET,
            Some(Value::String(m)) => match m.to_ascii_uppercase().as_str() {
                "GET" => Method::GET,
                "POST" => Method::POST,
                "PUT" => Method::PUT,
                "PATCH" => Method::PATCH,
                "DELETE" => Method::DELETE,
                "HEAD" => Method::HEAD,
                other => {
                    return Err(format!(
                        "method {other} is not supported; use GET, POST, PUT, PATCH, DELETE or HEAD"
                    ));
                }
            },
            Some(_) => return Err("`method` must be a string such as \"POST\"".into()),
        };
        let mut headers = headers(obj.get("headers"))?;
        let body = match (obj.get("body"), obj.get("json")) {
            (Some(b), Some(j)) if !b.is_null() && !j.is_null() => {
                return Err("give either `body` or `json`, not both".into());
            }
            (_, Some(j)) if !j.is_null() => {
                if !headers.iter().any(|(k, _)| k == CONTENT_TYPE) {
                    headers.push((CONTENT_TYPE, HeaderValue::from_static("application/json")));
                }
                Some(serde_json::to_vec(j).map_err(|e| format!("`json` cannot be encoded: {e}"))?)
            }
            (Some(Value::String(s)), _) => Some(s.clone().into_bytes()),
            (None | Some(Value::Null), _) => None,
            (Some(_), _) => {
                return Err(
                    "`body` must be a string; send objects with `json` (or JSON.stringify them)"
                        .into(),
                );
            }
        };
        let timeout = match obj.get("timeout_ms") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_f64() {
                Some(ms) if ms.is_finite() && ms >= 1.0 => {
                    Some(Duration::from_millis(ms.min(86_400_000.0) as u64))
                }
                _ => return Err("`timeout_ms` must be a number of milliseconds, at least 1".into()),
            },
        };
        let binary = match obj.get("binary") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("`binary` must be true or false".into()),
        };
        Ok(Self {
            url,
            method,
            headers,
            body,
            timeout,
            binary,
        })
    }
}

fn headers(v: Option<&Value>) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let pairs: Vec<(String, String)> = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), scalar(k, v)?)))
            .collect::<Result<_, String>>()?,
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item.as_array().map(Vec::as_slice) {
                Some([Value::String(k), v]) => Ok((k.clone(), scalar(k, v)?)),
                _ => Err("`headers` as an array must hold [name, value] pairs".to_string()),
            })
            .collect::<Result<_, String>>()?,
        Some(_) => {
            return Err(
                "`headers` must be an object such as {\"accept\": \"application/json\"}".into(),
            );
        }
    };
    if pairs.len() > MAX_HEADERS {
        return Err(format!(
            "at most {MAX_HEADERS} headers may be sent, got {}",
            pairs.len()
        ));
    }
    pairs
        .into_iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.trim().as_bytes())
                .map_err(|_| format!("`{k}` is not a valid header name"))?;
            if name == reqwest::header::HOST {
                return Err("the Host header is set from the URL and cannot be changed".into());
            }
            let value = HeaderValue::from_str(&v).map_err(|_| {
                format!("the value of header `{k}` has characters a header cannot hold")
            })?;
            Ok((name, value))
        })
        .collect()
}

fn scalar(key: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(format!("header `{key}` must be a string")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_json_bodies_methods_and_headers() {
        let r = HttpRequest::from_json(&json!({
            "url": "http://example.com/a?key=secret", "method": "post",
            "headers": {"X-Count": 3}, "json": {"a": 1}
        }))
        .unwrap();
        assert_eq!(r.method, Method::POST);
        assert_eq!(r.body.as_deref(), Some(&br#"{"a":1}"#[..]));
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == CONTENT_TYPE && v == "application/json")
        );
        assert!(r.headers.iter().any(|(k, v)| k == "x-count" && v == "3"));
        assert_eq!(shown(&r.url), "http://example.com/a");
    }

    #[test]
    fn refuses_what_it_cannot_send() {
        let err = |v: Value| HttpRequest::from_json(&v).unwrap_err();
        assert!(err(json!({"url": "file:///etc/passwd"})).contains("only http and https"));
        assert!(err(json!({"url": "ftp://x/"})).contains("ftp: scheme is not allowed"));
        assert!(err(json!({"url": "/relative"})).contains("is not an absolute URL"));
        assert!(err(json!({"url": "http://x/", "method": "TRACE"})).contains("not supported"));
        assert!(err(json!({"url": "http://x/", "body": "a", "json": {}})).contains("either"));
        assert!(err(json!({"url": "http://x/", "body": {}})).contains("must be a string"));
        assert!(err(json!({"url": "http://x/", "headers": {"Host": "y"}})).contains("Host"));
        assert!(err(json!({"url": "http://x/", "headers": {"a b": "y"}})).contains("header name"));
        assert!(err(json!({"url": "http://x/", "timeout_ms": -1})).contains("timeout_ms"));
    }
}
