//! The entry point: `LlmClient` built from config, chat by profile name or explicit target, and
//! the `ChatModel` trait agents hold as `Arc<dyn ChatModel>`. One `chat {model}` span per call,
//! labelled with the request's [`crate::CallTags`]; prompt and completion on it only when the
//! client's [`ContentCapture`] is on.
use crate::capture::ContentCapture;
use crate::config::{LlmConfig, ProfileConfig, ProviderConfig, Secret, WireFormat};
use crate::error::{LlmError, Result};
use crate::message::{ChatRequest, ChatResponse};
use crate::replay::{Recorder, ReplayModel};
use crate::transport::HttpBackend;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tracing::Instrument;

/// A boxed, sendable future (the shape of `futures::future::BoxFuture`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Anything that answers chat requests: a configured provider and model, a replay cassette, a
/// recording wrapper, a test double.
pub trait ChatModel: Send + Sync {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse>>;
}

/// What to talk to: a profile by name (falling back to `default`), or an explicit provider and
/// model.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatTarget {
    Profile(String),
    Direct(ProfileConfig),
    /// An agent's profile as one task changed it ([`LlmClient::target_for`]); the agent's name
    /// still labels the call (replay cassettes are matched by it).
    Agent {
        agent: String,
        profile: ProfileConfig,
    },
}

impl From<&str> for ChatTarget {
    fn from(name: &str) -> Self {
        Self::Profile(name.to_owned())
    }
}

impl From<String> for ChatTarget {
    fn from(name: String) -> Self {
        Self::Profile(name)
    }
}

impl From<&String> for ChatTarget {
    fn from(name: &String) -> Self {
        Self::Profile(name.clone())
    }
}

impl From<ProfileConfig> for ChatTarget {
    fn from(p: ProfileConfig) -> Self {
        Self::Direct(p)
    }
}

enum Engine {
    Http(HttpBackend),
    Replay(ReplayModel),
}

/// A provider ready to call, with its optional recorder.
struct Backend {
    /// `gen_ai.provider.name` and `ChatResponse::provider`.
    label: String,
    engine: Engine,
    recorder: Option<Arc<Recorder>>,
}

impl Backend {
    fn build(config: &ProviderConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let engine = match config.wire {
            WireFormat::Replay => {
                let path = config.cassette.as_ref().ok_or_else(|| {
                    LlmError::Config(format!(
                        "provider `{}`: expected a cassette file for wire `replay`, found none",
                        config.name
                    ))
                })?;
                let mut cassette = crate::replay::Cassette::load(path)?;
                if cassette.provider_label.is_empty() {
                    cassette.provider_label = config.name.clone();
                }
                Engine::Replay(ReplayModel::new(cassette))
            }
            _ => {
                let var = config.api_key_env.as_deref();
                let key = var
                    .and_then(env)
                    .filter(|k| !k.trim().is_empty())
                    .map(Secret::new);
                let missing = var.filter(|_| key.is_none());
                Engine::Http(HttpBackend::new(config, key, missing)?)
            }
        };
        let label = match &engine {
            Engine::Replay(r) => r.provider_name(),
            Engine::Http(_) => config.name.clone(),
        };
        let recorder = match &config.record_to {
            Some(path) => Some(Recorder::shared(path, &config.name, env("CI").as_deref())?),
            None => None,
        };
        Ok(Self {
            label,
            engine,
            recorder,
        })
    }
}

struct Inner {
    backends: BTreeMap<String, Arc<Backend>>,
    profiles: BTreeMap<String, ProfileConfig>,
}

/// Chat with any configured provider. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct LlmClient {
    inner: Arc<Inner>,
    capture: Arc<ContentCapture>,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("providers", &self.inner.backends.keys().collect::<Vec<_>>())
            .field("profiles", &self.inner.profiles)
            .finish()
    }
}

impl LlmClient {
    /// Validates `config`, reads API keys from the process environment and builds every
    /// provider. A key that is unset fails the calls to its provider, not the build.
    pub fn from_config(config: &LlmConfig) -> Result<Self> {
        Self::from_config_with_env(config, |name| std::env::var(name).ok())
    }

    /// As [`LlmClient::from_config`], with environment lookups (`api_key_env` variables and
    /// `CI`) answered by `env`.
    pub fn from_config_with_env(
        config: &LlmConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        config
            .validate()
            .map_err(|problems| LlmError::Config(problems.join("; ")))?;
        let mut backends = BTreeMap::new();
        for (key, provider) in &config.providers {
            let mut provider = provider.clone();
            if provider.name.is_empty() {
                provider.name = key.clone();
            }
            backends.insert(key.clone(), Arc::new(Backend::build(&provider, &env)?));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                backends,
                profiles: config.profiles.clone(),
            }),
            capture: Arc::default(),
        })
    }

    /// Whether (and with which secrets redacted) chat spans record prompts and completions.
    pub fn with_content_capture(mut self, capture: ContentCapture) -> Self {
        self.capture = Arc::new(capture);
        self
    }

    /// One chat call to `target` (a profile name, or a [`ProfileConfig`]).
    pub async fn chat(
        &self,
        target: impl Into<ChatTarget>,
        req: ChatRequest,
    ) -> Result<ChatResponse> {
        self.bind(target)?.run(req).await
    }

    /// A model bound to `target`, for agents that take `Arc<dyn ChatModel>`. Unknown profiles
    /// and providers fail here, not at the first call.
    pub fn model(&self, target: impl Into<ChatTarget>) -> Result<Arc<dyn ChatModel>> {
        Ok(Arc::new(self.bind(target)?))
    }

    /// The named profile, or `default` when it is not configured. Callers that override the
    /// model for one task change the copy and pass it as a target.
    pub fn profile(&self, name: &str) -> Result<ProfileConfig> {
        self.inner
            .profiles
            .get(name)
            .or_else(|| self.inner.profiles.get(crate::config::DEFAULT_PROFILE))
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.inner.profiles.keys().map(String::as_str).collect();
                LlmError::Config(format!(
                    "expected profile `{name}` or a `default` profile, found only: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ))
            })
    }

    /// The profile `target` resolves to: the named profile (or `default`), or the one the
    /// target carries (a task's override merged in). Its [`ProfileConfig::limits`] are what a
    /// call to `target` is sent with.
    pub fn resolve(&self, target: &ChatTarget) -> Result<ProfileConfig> {
        match target {
            ChatTarget::Profile(name) => self.profile(name),
            ChatTarget::Direct(p) | ChatTarget::Agent { profile: p, .. } => Ok(p.clone()),
        }
    }

    /// The token limits of `target` (see [`LlmClient::resolve`]): the `max_tokens` its calls
    /// send, the model's context window and history budget when configured.
    pub fn limits(&self, target: &ChatTarget) -> Result<crate::TokenLimits> {
        self.resolve(target).map(|p| p.limits())
    }

    /// As [`LlmClient::model`], returning the concrete type (it can name its provider and model).
    pub fn bind(&self, target: impl Into<ChatTarget>) -> Result<BoundModel> {
        let target = target.into();
        let profile = self.resolve(&target)?;
        let agent = match target {
            ChatTarget::Direct(_) => None,
            ChatTarget::Profile(name) => Some(name),
            ChatTarget::Agent { agent, .. } => Some(agent),
        };
        let backend = self
            .inner
            .backends
            .get(&profile.provider)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.inner.backends.keys().map(String::as_str).collect();
                LlmError::Config(format!(
                    "expected one of the configured providers ({}), found `{}`",
                    known.join(", "),
                    profile.provider
                ))
            })?;
        Ok(BoundModel {
            backend,
            profile,
            agent,
            capture: self.capture.clone(),
        })
    }
}

/// One task's choice of model for one agent, over the agent's configured profile: empty or
/// absent fields keep the profile's values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOverride {
    /// A configured provider's name; empty keeps the profile's provider.
    pub provider: String,
    /// Model name; empty keeps the profile's model.
    pub model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
}

impl ModelOverride {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.provider.trim().is_empty()
            && self.model.trim().is_empty()
            && self.temperature.is_none()
            && self.max_tokens.is_none()
    }

    /// `profile` with this override applied.
    pub fn apply(&self, mut profile: ProfileConfig) -> ProfileConfig {
        if !self.provider.trim().is_empty() {
            self.provider.trim().clone_into(&mut profile.provider);
        }
        if !self.model.trim().is_empty() {
            self.model.trim().clone_into(&mut profile.model);
        }
        if let Some(t) = self.temperature {
            profile.temperature = Some(t as f32);
        }
        if let Some(m) = self.max_tokens {
            profile.max_tokens = Some(m);
        }
        profile
    }
}

impl From<&droidmesh_proto::v1::LlmOverride> for ModelOverride {
    fn from(o: &droidmesh_proto::v1::LlmOverride) -> Self {
        Self {
            provider: o.provider.clone(),
            model: o.model.clone(),
            temperature: o.temperature,
            max_tokens: o.max_tokens,
        }
    }
}

impl LlmClient {
    /// The target for agent `profile` given a request's optional proto override (see
    /// [`LlmClient::target_for`]).
    pub fn target_for_request(
        &self,
        profile: &str,
        ov: Option<&droidmesh_proto::v1::LlmOverride>,
    ) -> Result<ChatTarget> {
        self.target_for(profile, ov.map(ModelOverride::from).as_ref())
    }

    /// What agent `profile` talks to for one task: its configured profile (or `default`), with
    /// the task's override merged in. A provider the override names that is not configured, a
    /// temperature outside 0–2, a `max_tokens` of 0, or one not below the profile's
    /// context_tokens is refused here, before any call.
    pub fn target_for(&self, profile: &str, ov: Option<&ModelOverride>) -> Result<ChatTarget> {
        let Some(ov) = ov.filter(|o| !o.is_empty()) else {
            return Ok(ChatTarget::from(profile));
        };
        if let Some(t) = ov.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(LlmError::Config(format!(
                "expected a temperature between 0 and 2 for `{profile}`, found {t}"
            )));
        }
        if ov.max_tokens == Some(0) {
            return Err(LlmError::Config(format!(
                "expected max_tokens of at least 1 for `{profile}`, found 0"
            )));
        }
        let merged = ov.apply(self.profile(profile)?);
        if let (Some(max), Some(ctx)) = (ov.max_tokens, merged.context_tokens)
            && max >= ctx
        {
            return Err(LlmError::Config(format!(
                "expected max_tokens below the context of `{profile}` ({ctx} tokens), found {max}"
            )));
        }
        // Fails now when the provider is unknown.
        self.bind(merged.clone())?;
        Ok(ChatTarget::Agent {
            agent: profile.to_owned(),
            profile: merged,
        })
    }
}

/// A provider, a model and the profile's sampling defaults.
#[derive(Clone)]
pub struct BoundModel {
    backend: Arc<Backend>,
    profile: ProfileConfig,
    /// The agent profile named by the target, when it named one.
    agent: Option<String>,
    capture: Arc<ContentCapture>,
}

impl fmt::Debug for BoundModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundModel")
            .field("provider", &self.backend.label)
            .field("profile", &self.profile)
            .finish()
    }
}

impl BoundModel {
    /// `gen_ai.provider.name` of this model (`replay:<label>` for a cassette).
    pub fn provider(&self) -> &str {
        &self.backend.label
    }

    pub fn model_name(&self) -> &str {
        &self.profile.model
    }

    /// The token limits of this model's profile.
    pub fn limits(&self) -> crate::TokenLimits {
        self.profile.limits()
    }

    async fn run(&self, mut req: ChatRequest) -> Result<ChatResponse> {
        req.temperature = req.temperature.or(self.profile.temperature);
        req.max_tokens = req.max_tokens.or(Some(self.profile.limits().max_tokens));
        let model = self.profile.model.as_str();
        let tags = &req.tags;
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {model}"),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %self.backend.label,
            gen_ai.request.model = %model,
            gen_ai.request.temperature = req.temperature.map(crate::wire::float_f64),
            gen_ai.request.max_tokens = req.max_tokens,
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            droidmesh.llm.replay = matches!(self.backend.engine, Engine::Replay(_)),
            droidmesh.llm.attempts = tracing::field::Empty,
            droidmesh.llm.elapsed_ms = tracing::field::Empty,
            error.type = tracing::field::Empty,
            droidmesh.task.id = (!tags.task_id.is_empty()).then_some(tags.task_id.as_str()),
            droidmesh.device.serial =
                (!tags.device_serial.is_empty()).then_some(tags.device_serial.as_str()),
            droidmesh.step = tags.step,
            gen_ai.input.messages = tracing::field::Empty,
            gen_ai.output.messages = tracing::field::Empty,
        );
        let started = std::time::Instant::now();
        let input = self
            .capture
            .enabled()
            .then(|| self.capture.input_messages(&req));
        let result = self.call(model, req).instrument(span.clone()).await;
        crate::metrics::record(
            &self.backend.label,
            model,
            self.agent.as_deref(),
            &result,
            started.elapsed(),
        );
        match &result {
            Ok(resp) => {
                span.record("gen_ai.response.model", resp.model.as_str());
                span.record(
                    "gen_ai.response.finish_reasons",
                    resp.finish_reason.as_str(),
                );
                span.record("gen_ai.usage.input_tokens", resp.usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", resp.usage.output_tokens);
                span.record("droidmesh.llm.attempts", resp.attempts);
                span.record(
                    "droidmesh.llm.elapsed_ms",
                    crate::message::millis(resp.elapsed),
                );
            }
            Err(e) => {
                span.record("error.type", e.kind());
                span.record("droidmesh.llm.attempts", e.attempts());
                if let Some(elapsed) = e.elapsed() {
                    span.record("droidmesh.llm.elapsed_ms", crate::message::millis(elapsed));
                }
                tracing::warn!(parent: &span, error.type = e.kind(), status = e.status(), "llm call failed");
            }
        }
        // Last, so that no event of this span carries the content into a log.
        if let Some(input) = input {
            span.record("gen_ai.input.messages", input);
            if let Ok(resp) = &result {
                span.record("gen_ai.output.messages", self.capture.output_messages(resp));
            }
        }
        result
    }

    async fn call(&self, model: &str, req: ChatRequest) -> Result<ChatResponse> {
        req.check().map_err(LlmError::InvalidRequest)?;
        let result = match &self.backend.engine {
            Engine::Replay(r) => r.play_for(&req, model, self.agent.as_deref()),
            Engine::Http(h) => h.chat(model, &req).await.map(|a| ChatResponse {
                truncated: a.parsed.finish_reason == "length",
                text: a.parsed.text,
                usage: a.parsed.usage,
                model: a
                    .parsed
                    .model
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| model.to_owned()),
                finish_reason: a.parsed.finish_reason,
                latency: a.latency,
                elapsed: a.elapsed,
                attempts: a.attempts,
                provider: self.backend.label.clone(),
                replay: false,
            }),
        };
        // Failures are recorded too, so that a replay fails where the recorded run failed.
        if let Some(recorder) = &self.backend.recorder {
            recorder.record(&req, &result, self.agent.as_deref())?;
        }
        result
    }
}

impl ChatModel for BoundModel {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse>> {
        Box::pin(self.run(req))
    }
}

impl<T: ChatModel + ?Sized> ChatModel for Arc<T> {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse>> {
        (**self).chat(req)
    }
}
