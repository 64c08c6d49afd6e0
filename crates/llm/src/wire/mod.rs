//! The three HTTP wire formats behind one shape: where to POST, what JSON to send, how to read
//! the answer and the provider's error message.
mod anthropic;
mod gemini;
mod openai;

use crate::config::{Secret, WireFormat};
use crate::error::{LlmError, Result};
use crate::message::{ChatRequest, Usage};
use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue};

/// The `anthropic-version` header value sent with every Anthropic request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Anthropic requires `max_tokens`; this is used when neither request nor profile sets it.
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 4096;

/// What a successful response says, before timing and provider labels are added.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub text: String,
    pub usage: Usage,
    pub model: Option<String>,
    pub finish_reason: String,
}

/// The URL to POST a chat request to.
pub fn url(wire: WireFormat, base_url: &str, model: &str) -> String {
    let base = base_url.trim_end_matches('/');
    match wire {
        WireFormat::Openai => format!("{base}/chat/completions"),
        WireFormat::Anthropic => format!("{base}/v1/messages"),
        WireFormat::Gemini if model.contains('/') => {
            format!("{base}/v1beta/{model}:generateContent")
        }
        WireFormat::Gemini => format!("{base}/v1beta/models/{model}:generateContent"),
        WireFormat::Replay => String::new(),
    }
}

/// The headers that carry the key (marked sensitive, so they never print) plus the wire
/// format's fixed ones.
pub fn auth_headers(wire: WireFormat, key: Option<&Secret>) -> Result<HeaderMap> {
    let mut h = HeaderMap::new();
    let secret = |value: String| {
        HeaderValue::from_str(&value)
            .map(|mut v| {
                v.set_sensitive(true);
                v
            })
            .map_err(|_| {
                LlmError::Config("api key contains characters not allowed in a header".to_owned())
            })
    };
    match (wire, key) {
        (WireFormat::Openai, Some(k)) => {
            h.insert(
                http::header::AUTHORIZATION,
                secret(format!("Bearer {}", k.expose()))?,
            );
        }
        (WireFormat::Anthropic, k) => {
            h.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            );
            if let Some(k) = k {
                h.insert(
                    HeaderName::from_static("x-api-key"),
                    secret(k.expose().to_owned())?,
                );
            }
        }
        (WireFormat::Gemini, Some(k)) => {
            h.insert(
                HeaderName::from_static("x-goog-api-key"),
                secret(k.expose().to_owned())?,
            );
        }
        _ => {}
    }
    Ok(h)
}

/// The JSON body of a chat request. Sampling options must already be resolved into `req`.
pub fn body(wire: WireFormat, model: &str, req: &ChatRequest) -> Result<Vec<u8>> {
    let mut images = Images::new();
    let value = match wire {
        WireFormat::Openai => openai::body(model, req, &mut images),
        WireFormat::Anthropic => anthropic::body(model, req, &mut images),
        WireFormat::Gemini => gemini::body(req, &mut images),
        WireFormat::Replay => {
            return Err(LlmError::Config(
                "the replay wire sends no http requests".to_owned(),
            ));
        }
    };
    let json = serde_json::to_vec(&value)
        .map_err(|e| LlmError::InvalidRequest(format!("cannot encode: {e}")))?;
    images.splice(json)
}

/// Images skip serde_json: the body is serialized with a placeholder per image and the base64
/// is written straight into the output there (base64 never needs JSON escaping). For a 200 KB
/// screenshot this saves the copy and the escape scan of the encoded string, about 0.4 ms.
pub(crate) struct Images<'a> {
    /// `dmimg<random>i`: unguessable, so prompt text cannot contain it; never JSON-escaped.
    tag: String,
    list: Vec<&'a [u8]>,
}

impl<'a> Images<'a> {
    fn new() -> Self {
        Self {
            tag: format!("dmimg{:016x}i", rand::random::<u64>()),
            list: Vec::new(),
        }
    }

    /// The placeholder that stands for `data` in base64.
    pub(crate) fn slot(&mut self, data: &'a [u8]) -> String {
        self.list.push(data);
        format!("{}{}z", self.tag, self.list.len() - 1)
    }

    fn splice(self, json: Vec<u8>) -> Result<Vec<u8>> {
        if self.list.is_empty() {
            return Ok(json);
        }
        let encoded: usize = self.list.iter().map(|d| d.len().div_ceil(3) * 4).sum();
        let mut out = Vec::with_capacity(json.len() + encoded);
        let tag = self.tag.as_bytes();
        let mut rest = json.as_slice();
        let mut found = 0;
        while let Some(pos) = rest.windows(tag.len()).position(|w| w == tag) {
            out.extend_from_slice(&rest[..pos]);
            let after = &rest[pos + tag.len()..];
            let end = after.iter().position(|b| *b == b'z').unwrap_or(after.len());
            let index: Option<usize> = std::str::from_utf8(&after[..end])
                .ok()
                .and_then(|n| n.parse().ok());
            let data = index.and_then(|i| self.list.get(i)).ok_or_else(|| {
                LlmError::InvalidRequest("image placeholder without an image".to_owned())
            })?;
            let start = out.len();
            out.resize(start + data.len().div_ceil(3) * 4, 0);
            base64::engine::general_purpose::STANDARD
                .encode_slice(data, &mut out[start..])
                .map_err(|e| LlmError::InvalidRequest(format!("cannot encode image: {e}")))?;
            found += 1;
            rest = after.get(end + 1..).unwrap_or_default();
        }
        out.extend_from_slice(rest);
        if found != self.list.len() {
            return Err(LlmError::InvalidRequest(format!(
                "expected {} image(s) in the body, placed {found}",
                self.list.len()
            )));
        }
        Ok(out)
    }
}

/// Reads a 2xx body.
pub fn parse(wire: WireFormat, body: &[u8]) -> Result<Parsed> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| LlmError::Malformed {
            detail: format!("expected a JSON body, found {} ({e})", preview(body)),
        })?;
    match wire {
        WireFormat::Openai => openai::parse(value),
        WireFormat::Anthropic => anthropic::parse(value),
        WireFormat::Gemini => gemini::parse(value),
        WireFormat::Replay => Err(LlmError::Config(
            "the replay wire parses no http bodies".to_owned(),
        )),
    }
}

/// The provider's own message from an error body: `error.message` (OpenAI, Anthropic, Gemini),
/// `error` as a string (Ollama), `message` or `detail`; else the start of the body.
pub fn error_message(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let candidates = [
            v.pointer("/error/message"),
            v.get("error"),
            v.get("message"),
            v.get("detail"),
        ];
        if let Some(s) = candidates.into_iter().flatten().find_map(|c| c.as_str()) {
            return s.to_owned();
        }
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return "no error message in the response body".to_owned();
    }
    preview(body)
}

/// The message of an `{"error": ...}` object inside an otherwise successful body.
pub(crate) fn error_message_in(v: &serde_json::Value) -> Option<String> {
    let e = v.get("error")?;
    e.get("message")
        .and_then(serde_json::Value::as_str)
        .or_else(|| e.as_str())
        .map(str::to_owned)
}

/// The first 200 characters of a body, for error messages.
pub fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "an empty body".to_owned();
    }
    format!("`{}`", droidmesh_proto::text::shorten(text, 200))
}

/// Maps provider finish reasons onto the OpenAI vocabulary where one fits.
pub fn normalize_finish(raw: Option<&str>) -> String {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return "unknown".to_owned();
    };
    let lower = raw.to_ascii_lowercase();
    let mapped = match lower.as_str() {
        "stop" | "end_turn" | "stop_sequence" | "eos" | "finish_reason_unspecified" => "stop",
        "length" | "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" | "tool_calls" | "function_call" => "tool_calls",
        "content_filter" | "safety" | "recitation" | "blocklist" | "prohibited_content"
        | "spii" | "refusal" | "image_safety" => "content_filter",
        _ => return lower,
    };
    mapped.to_owned()
}

/// An f32 as the JSON number it was written as (0.2, not 0.20000000298023224).
pub(crate) fn float(x: f32) -> serde_json::Value {
    serde_json::Number::from_f64(float_f64(x))
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// An f32 widened to the f64 nearest its shortest decimal form.
pub(crate) fn float_f64(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

pub(crate) fn malformed(detail: impl Into<String>) -> LlmError {
    LlmError::Malformed {
        detail: detail.into(),
    }
}

/// A JSON number field as u64, 0 when absent.
pub(crate) fn count(v: &serde_json::Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            url(WireFormat::Openai, "http://h:1/v1/", "m"),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            url(WireFormat::Anthropic, "https://a", "m"),
            "https://a/v1/messages"
        );
        assert_eq!(
            url(WireFormat::Gemini, "https://g", "gemini-2.0-flash"),
            "https://g/v1beta/models/gemini-2.0-flash:generateContent"
        );
        assert_eq!(
            url(WireFormat::Gemini, "https://g", "tunedModels/x"),
            "https://g/v1beta/tunedModels/x:generateContent"
        );
    }

    #[test]
    fn error_messages_from_each_shape() {
        let openai = br#"{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}"#;
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let gemini =
            br#"{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}"#;
        let ollama = br#"{"error":"model \"x\" not found"}"#;
        assert_eq!(error_message(openai), "Incorrect API key");
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(error_message(gemini), "API key not valid");
        assert_eq!(error_message(ollama), "model \"x\" not found");
        assert_eq!(
            error_message(b"<html>bad gateway</html>"),
            "`<html>bad gateway</html>`"
        );
        assert_eq!(
            error_message(b"  "),
            "no error message in the response body"
        );
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(normalize_finish(Some("end_turn")), "stop");
        assert_eq!(normalize_finish(Some("MAX_TOKENS")), "length");
        assert_eq!(normalize_finish(Some("SAFETY")), "content_filter");
        assert_eq!(normalize_finish(Some("pause_turn")), "pause_turn");
        assert_eq!(normalize_finish(None), "unknown");
    }

    #[test]
    fn images_are_spliced_as_base64() {
        use crate::message::{ChatRequest, Message};
        let req = ChatRequest::new(vec![
            Message::user("a dmimg0000000000000000i0z b")
                .with_image_png(vec![1, 2, 3])
                .with_image("image/jpeg", vec![4, 5]),
        ]);
        for wire in [
            WireFormat::Openai,
            WireFormat::Anthropic,
            WireFormat::Gemini,
        ] {
            let body = body(wire, "m", &req).unwrap();
            let text = String::from_utf8(body.clone()).unwrap();
            assert!(text.contains("AQID") && text.contains("BAU="), "{text}");
            assert!(
                text.contains("a dmimg0000000000000000i0z b"),
                "prompt text untouched"
            );
            serde_json::from_slice::<serde_json::Value>(&body).unwrap();
        }
    }

    #[test]
    fn keys_are_sensitive_headers() {
        let h = auth_headers(WireFormat::Openai, Some(&Secret::new("sk-test"))).unwrap();
        let v = h.get("authorization").unwrap();
        assert!(v.is_sensitive());
        assert!(!format!("{h:?}").contains("sk-test"));
    }
}
