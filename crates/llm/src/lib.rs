//! One chat interface over OpenAI-compatible, Anthropic and Gemini wire formats, with retries,
//! typed errors, GenAI tracing spans and metrics, and a replay provider.
//!
//! ```no_run
//! # async fn demo() -> droidmesh_llm::Result<()> {
//! use droidmesh_llm::{ChatRequest, LlmClient, LlmConfig, Message};
//! let client = LlmClient::from_config(&LlmConfig::defaults())?;
//! let resp = client
//!     .chat("executor", ChatRequest::new(vec![Message::user("hello")]))
//!     .await?;
//! println!("{} ({} tokens in)", resp.text, resp.usage.input_tokens);
//! # Ok(()) }
//! ```
mod capture;
mod client;
mod config;
mod error;
mod message;
pub mod metrics;
mod profile;
mod recorded;
mod refusal;
mod replay;
pub mod retry;
/// Model doubles for tests: built for this crate's tests and with the `testkit` feature only.
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
mod transport;
mod wire;

pub use capture::{
    CallTags, ContentCapture, DEFAULT_CAPTURE_BYTES, REDACTED, SecretSource, TRUNCATED,
};
pub use client::{BoundModel, BoxFuture, ChatModel, ChatTarget, LlmClient, ModelOverride};
pub use config::{
    AGENT_PROFILES, DEFAULT_MAX_TOKENS, DEFAULT_PROFILE, LlmConfig, ProfileConfig, ProviderConfig,
    RetryPolicy, Secret, TokenLimits, WireFormat,
};
pub use error::{LlmError, Result, format_elapsed};
pub use message::{
    ChatRequest, ChatResponse, ESTIMATED_IMAGE_TOKENS, ESTIMATED_MESSAGE_TOKENS, Message, Part,
    Role, Usage,
};
pub use replay::{
    Cassette, Interaction, RecordedError, RecordedResponse, RecordingModel, ReplayModel, is_ci,
    request_digest,
};
pub use wire::{ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_VERSION};

/// Installs rustls' ring crypto provider for the process (reqwest needs one); a provider that
/// is already installed is kept.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    });
}
