//! The provider-neutral chat vocabulary: messages of text and image parts, a request, a response
//! with token usage.
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The lower-case name used by the OpenAI and Anthropic wire formats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// One piece of a message.
#[derive(Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// Raw image bytes (not base64) with their MIME type, e.g. a PNG screenshot.
    Image {
        mime: String,
        data: Vec<u8>,
    },
}

impl fmt::Debug for Part {
    // Contents stay out of logs: text by length, images by type and size.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(t) => write!(f, "Text({} bytes)", t.len()),
            Self::Image { mime, data } => write!(f, "Image({mime}, {} bytes)", data.len()),
        }
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    /// A message of one text part.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            parts: vec![Part::Text(text.into())],
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, text)
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, text)
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, text)
    }

    /// Appends a PNG image (raw bytes) after the existing parts.
    pub fn with_image_png(self, png: impl Into<Vec<u8>>) -> Self {
        self.with_image("image/png", png)
    }

    /// Appends an image of the given MIME type (raw bytes).
    pub fn with_image(mut self, mime: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        self.parts.push(Part::Image {
            mime: mime.into(),
            data: data.into(),
        });
        self
    }

    /// Appends a text part.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Text(text.into()));
        self
    }

    /// The text parts joined by blank lines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image { .. } => None,
            })
            .collect();
        texts.join("\n\n")
    }
}

/// Tokens [`ChatRequest::estimated_tokens`] counts for a message's role markers.
pub const ESTIMATED_MESSAGE_TOKENS: u64 = 4;
/// Tokens [`ChatRequest::estimated_tokens`] counts for one image (models take 256 to about 800
/// for a phone screenshot).
pub const ESTIMATED_IMAGE_TOKENS: u64 = 768;

/// What to ask the model. Unset sampling options fall back to the profile's, then the
/// provider's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub stop: Vec<String>,
    /// The task, device and step the call serves, for its span; never sent.
    pub tags: crate::capture::CallTags,
}

impl ChatRequest {
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    pub fn stop(mut self, s: impl Into<String>) -> Self {
        self.stop.push(s.into());
        self
    }

    /// Labels the call's `chat` span with the task, device and step it serves.
    pub fn tagged(mut self, tags: crate::capture::CallTags) -> Self {
        self.tags = tags;
        self
    }

    /// A rough upper estimate of the prompt's tokens, for fitting a prompt to
    /// [`crate::TokenLimits::prompt_budget`] without the model's tokenizer: one token per 3
    /// bytes of text (tokenizers average about 4 bytes per token on English and 3 on code),
    /// [`ESTIMATED_MESSAGE_TOKENS`] per message and [`ESTIMATED_IMAGE_TOKENS`] per image. It is
    /// a heuristic, not a count: leave a margin.
    pub fn estimated_tokens(&self) -> u64 {
        self.messages
            .iter()
            .map(|m| {
                let parts: u64 = m
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::Text(t) => (t.len() as u64).div_ceil(3),
                        Part::Image { .. } => ESTIMATED_IMAGE_TOKENS,
                    })
                    .sum();
                ESTIMATED_MESSAGE_TOKENS + parts
            })
            .sum()
    }

    /// Checks what every wire format needs: at least one non-system message, no empty message,
    /// images with an `image/*` type and some bytes.
    pub fn check(&self) -> Result<(), String> {
        if !self.messages.iter().any(|m| m.role != Role::System) {
            return Err(format!(
                "expected at least one user or assistant message, found {} system message(s) only",
                self.messages.len()
            ));
        }
        if let Some(t) = self.temperature
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(format!("expected a temperature of 0 or more, found {t}"));
        }
        for (i, m) in self.messages.iter().enumerate() {
            if m.parts.is_empty() {
                return Err(format!(
                    "message {i} has no parts; expected text or an image"
                ));
            }
            for p in &m.parts {
                if let Part::Image { mime, data } = p {
                    if !mime.starts_with("image/") {
                        return Err(format!(
                            "message {i}: expected an image/* mime type, found `{mime}`"
                        ));
                    }
                    if data.is_empty() {
                        return Err(format!("message {i}: image `{mime}` has no bytes"));
                    }
                    if m.role == Role::System {
                        return Err(format!(
                            "message {i}: images are accepted in user or assistant messages, \
                             found one in a system message"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Tokens a call consumed. `input_tokens` includes cached input tokens on every wire format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    /// Sums two usages (cached counts add when either is known).
    fn add(self, other: Usage) -> Usage {
        let cached = match (self.cached_input_tokens, other.cached_input_tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_input_tokens: cached,
        }
    }
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub usage: Usage,
    /// The model as reported by the provider, else the requested one.
    pub model: String,
    /// Normalised to the OpenAI vocabulary where a mapping exists: `stop`, `length`,
    /// `content_filter`, `tool_calls`; otherwise the provider's value in lower case.
    pub finish_reason: String,
    /// The reply was cut at the token limit (`finish_reason` is `length`: OpenAI's `length`,
    /// Anthropic's `max_tokens`, Gemini's `MAX_TOKENS`), so its end is missing.
    pub truncated: bool,
    /// Latency of the attempt that answered: request sent to reply read.
    pub latency: Duration,
    /// The whole call: every attempt, the waits between them, encoding and parsing.
    pub elapsed: Duration,
    /// Attempts the call made, the answering one included (1 when nothing was retried).
    pub attempts: u32,
    /// The provider's configured name, or `replay:<label>` for a cassette.
    pub provider: String,
    /// True when the answer came from a replay cassette, not a live model. A replayed answer
    /// reports the attempts and times recorded with it, when the cassette has them.
    pub replay: bool,
}

impl ChatResponse {
    /// A single-attempt answer of `text` that took no time, for tests and hand-made models;
    /// set the other fields as needed.
    pub fn new(text: impl Into<String>, finish_reason: impl Into<String>) -> Self {
        let finish_reason = finish_reason.into();
        Self {
            text: text.into(),
            usage: Usage::default(),
            model: String::new(),
            truncated: finish_reason == "length",
            finish_reason,
            latency: Duration::ZERO,
            elapsed: Duration::ZERO,
            attempts: 1,
            provider: String::new(),
            replay: false,
        }
    }

    /// This one call as an agent reports it in its `Usage` event: `latency_ms` is the answering
    /// attempt's, `elapsed_ms` the whole call's.
    pub fn usage_report(&self, agent: &str) -> droidmesh_proto::v1::UsageReport {
        droidmesh_proto::v1::UsageReport {
            agent: agent.into(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            usage: Some(droidmesh_proto::v1::TokenUsage {
                input_tokens: self.usage.input_tokens,
                output_tokens: self.usage.output_tokens,
                cached_input_tokens: self.usage.cached_input_tokens.unwrap_or(0),
                calls: 1,
            }),
            latency_ms: millis(self.latency),
            finish_reason: self.finish_reason.clone(),
            replay: self.replay,
            attempts: self.attempts,
            elapsed_ms: millis(self.elapsed),
        }
    }
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_image() {
        let m = Message::user("look").with_image_png(vec![1, 2, 3]);
        assert_eq!(m.role, Role::User);
        assert_eq!(m.parts.len(), 2);
        assert_eq!(m.text(), "look");
        assert_eq!(format!("{:?}", m.parts[1]), "Image(image/png, 3 bytes)");
        assert_eq!(format!("{:?}", m.parts[0]), "Text(4 bytes)");
    }

    #[test]
    fn check_rejects_what_no_wire_accepts() {
        let only_system = ChatRequest::new(vec![Message::system("s")]);
        assert!(
            only_system
                .check()
                .unwrap_err()
                .contains("system message(s) only")
        );
        let bad_mime = ChatRequest::new(vec![Message::user("x").with_image("text/plain", [1])]);
        assert!(bad_mime.check().unwrap_err().contains("`text/plain`"));
        let ok = ChatRequest::new(vec![Message::system("s"), Message::user("u")]);
        assert!(ok.check().is_ok());
    }

    #[test]
    fn usage_adds() {
        let a = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cached_input_tokens: None,
        };
        let b = Usage {
            input_tokens: 3,
            output_tokens: 4,
            cached_input_tokens: Some(1),
        };
        assert_eq!(
            a + b,
            Usage {
                input_tokens: 4,
                output_tokens: 6,
                cached_input_tokens: Some(1)
            }
        );
    }
}
