//! What a `chat {model}` span says beyond the model and the token counts: the task, device
//! and step the call serves ([`CallTags`]), and, only when switched on, the prompt and the
//! completion as the GenAI conventions' `gen_ai.input.messages` / `gen_ai.output.messages`
//! ([`ContentCapture`]), every configured secret value redacted and the text bounded.
use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::message::{ChatRequest, ChatResponse, Part};

/// Put in place of every secret value in captured content.
pub const REDACTED: &str = "[REDACTED]";

/// Appended to a text part cut short by the capture's byte budget.
pub const TRUNCATED: &str = "…[truncated]";

/// Secret values that may change while the process runs (a renewed secret file), asked for
/// at each capture.
pub type SecretSource = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Default budget of captured text per attribute: 16 KiB.
pub const DEFAULT_CAPTURE_BYTES: usize = 16 * 1024;

/// Which task, device and step a chat call serves; recorded on its `chat` span as
/// `droidmesh.task.id`, `droidmesh.device.serial` and `droidmesh.step` (empty and `None`
/// leave them out). Not part of what is sent or of a replay cassette's digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallTags {
    pub task_id: String,
    pub device_serial: String,
    pub step: Option<u32>,
}

impl CallTags {
    pub fn new(task_id: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            ..Self::default()
        }
    }

    pub fn device(mut self, serial: impl Into<String>) -> Self {
        self.device_serial = serial.into();
        self
    }

    pub fn step(mut self, step: u32) -> Self {
        self.step = Some(step);
        self
    }
}

/// Whether chat spans carry the prompt and the completion, and what they never carry.
///
/// Off by default. When on, every text is redacted of every secret value before it is cut to
/// the byte budget (so no part of a secret survives a cut), and the whole capture of one
/// attribute holds at most `max_bytes` of text. Images are described (type and size), never
/// included.
#[derive(Clone)]
pub struct ContentCapture {
    enabled: bool,
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
    /// More values, asked for at each redaction.
    source: Option<SecretSource>,
    max_bytes: usize,
}

impl Default for ContentCapture {
    fn default() -> Self {
        Self::off()
    }
}

impl fmt::Debug for ContentCapture {
    // The secrets' values never reach a log: only how many there are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentCapture")
            .field("enabled", &self.enabled)
            .field("secrets", &self.secrets.len())
            .field("source", &self.source.is_some())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl ContentCapture {
    /// Records no content.
    pub fn off() -> Self {
        Self {
            enabled: false,
            secrets: Vec::new(),
            source: None,
            max_bytes: DEFAULT_CAPTURE_BYTES,
        }
    }

    /// Records content, with every value of `secrets` (empty ones ignored) redacted.
    pub fn on(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self {
            enabled: true,
            secrets,
            source: None,
            max_bytes: DEFAULT_CAPTURE_BYTES,
        }
    }

    /// Content only when `enabled`; the secrets are kept either way.
    pub fn new(enabled: bool, secrets: impl IntoIterator<Item = String>) -> Self {
        let capture = Self::on(secrets);
        Self { enabled, ..capture }
    }

    /// Also redacts every value `source` gives, asked for at each redaction (secrets read
    /// again from files while the process runs).
    pub fn with_secret_source(mut self, source: SecretSource) -> Self {
        self.source = Some(source);
        self
    }

    /// Caps the text of one captured attribute at `max_bytes`.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `text` with every secret value replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let more = self.source.as_ref().map(|f| f()).unwrap_or_default();
        let mut all: Vec<&str> = self
            .secrets
            .iter()
            .chain(&more)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect();
        if !more.is_empty() {
            all.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
        let mut out = text.to_owned();
        for s in all {
            if out.contains(s) {
                out = out.replace(s, REDACTED);
            }
        }
        out
    }

    /// `gen_ai.input.messages`: the request's messages in order, as JSON text.
    pub fn input_messages(&self, req: &ChatRequest) -> String {
        let mut budget = self.max_bytes;
        let messages: Vec<Value> = req
            .messages
            .iter()
            .map(|m| {
                let parts: Vec<Value> = m.parts.iter().map(|p| self.part(p, &mut budget)).collect();
                json!({"role": m.role.as_str(), "parts": parts})
            })
            .collect();
        Value::Array(messages).to_string()
    }

    /// `gen_ai.output.messages`: the one choice the model answered, as JSON text.
    pub fn output_messages(&self, resp: &ChatResponse) -> String {
        let mut budget = self.max_bytes;
        let text = self.text(&resp.text, &mut budget);
        json!([{
            "role": "assistant",
            "parts": [{"type": "text", "content": text}],
            "finish_reason": resp.finish_reason,
        }])
        .to_string()
    }

    fn part(&self, part: &Part, budget: &mut usize) -> Value {
        match part {
            Part::Text(t) => json!({"type": "text", "content": self.text(t, budget)}),
            Part::Image { mime, data } => {
                json!({"type": "image", "mime_type": mime, "bytes": data.len()})
            }
        }
    }

    /// Redacts, then cuts to what is left of `budget` (at a character boundary).
    fn text(&self, text: &str, budget: &mut usize) -> String {
        let clean = self.redact(text);
        if clean.len() <= *budget {
            *budget -= clean.len();
            return clean;
        }
        let mut end = *budget;
        while !clean.is_char_boundary(end) {
            end -= 1;
        }
        *budget = 0;
        format!("{}{TRUNCATED}", &clean[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    const CANARY: &str = "zz-canary-4711";

    #[test]
    fn secrets_are_redacted_in_every_message_and_the_reply() {
        let capture = ContentCapture::on(vec![CANARY.to_owned(), String::new()]);
        let req = ChatRequest::new(vec![
            Message::system("be brief"),
            Message::user(format!("the code is {CANARY}, twice: {CANARY}")),
        ]);
        let input = capture.input_messages(&req);
        assert!(!input.contains(CANARY), "{input}");
        assert!(
            input.contains("the code is [REDACTED], twice: [REDACTED]"),
            "{input}"
        );
        assert!(input.contains("be brief"), "{input}");
        let parsed: Value = serde_json::from_str(&input).unwrap();
        assert_eq!(parsed[1]["role"], "user");
        let resp = ChatResponse::new(format!("typed {CANARY}"), "stop");
        let output = capture.output_messages(&resp);
        assert!(!output.contains(CANARY), "{output}");
        assert!(output.contains("typed [REDACTED]"), "{output}");
        assert!(!format!("{capture:?}").contains(CANARY));
    }

    #[test]
    fn a_longer_secret_holding_a_shorter_one_goes_whole() {
        let capture = ContentCapture::on(vec!["abc".to_owned(), "xxabcxx".to_owned()]);
        assert_eq!(
            capture.redact("1 xxabcxx 2 abc"),
            "1 [REDACTED] 2 [REDACTED]"
        );
    }

    #[test]
    fn values_from_a_source_are_redacted_as_they_are_at_each_capture() {
        let now = Arc::new(std::sync::Mutex::new(vec!["first-4711".to_owned()]));
        let read = now.clone();
        let capture = ContentCapture::on(vec!["abc".to_owned()])
            .with_secret_source(Arc::new(move || read.lock().unwrap().clone()));
        assert_eq!(
            capture.redact("first-4711 abc second-0815"),
            "[REDACTED] [REDACTED] second-0815"
        );
        *now.lock().unwrap() = vec!["second-0815".to_owned(), "xxabcxx".to_owned()];
        assert_eq!(
            capture.redact("first-4711 xxabcxx second-0815"),
            "first-4711 [REDACTED] [REDACTED]"
        );
        assert!(format!("{capture:?}").contains("source: true"));
    }

    #[test]
    fn captured_text_is_bounded_and_cut_after_redaction() {
        let capture = ContentCapture::on(vec![CANARY.to_owned()]).with_max_bytes(40);
        // The secret straddles the cut: redacted first, so no prefix of it survives.
        let text = format!("{}{CANARY}{}", "a".repeat(30), "b".repeat(5000));
        let req = ChatRequest::new(vec![Message::user(text), Message::user("later")]);
        let input = capture.input_messages(&req);
        assert!(!input.contains("zz-can"), "{input}");
        assert!(input.contains(TRUNCATED), "{input}");
        assert!(input.len() < 200, "{} bytes: {input}", input.len());
        let parsed: Value = serde_json::from_str(&input).unwrap();
        assert_eq!(parsed[1]["parts"][0]["content"], format!("{TRUNCATED}"));
        // Multi-byte text is cut at a character boundary.
        let capture = ContentCapture::on(Vec::new()).with_max_bytes(3);
        let req = ChatRequest::new(vec![Message::user("ééé")]);
        assert!(
            capture
                .input_messages(&req)
                .contains(&format!("é{TRUNCATED}"))
        );
    }

    #[test]
    fn images_are_described_not_included() {
        let capture = ContentCapture::on(Vec::new());
        let req = ChatRequest::new(vec![Message::user("look").with_image_png(vec![7u8; 300])]);
        let input = capture.input_messages(&req);
        assert!(input.contains(r#""bytes":300"#), "{input}");
        assert!(input.contains("image/png"), "{input}");
    }
}
