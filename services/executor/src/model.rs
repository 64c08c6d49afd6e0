//! What CodeAct and `ExecuteSubgoal` share about model calls: which failures no retry can fix,
//! and the usage report of one call.
use droidmesh_llm::{ChatResponse, ChatTarget, LlmClient, LlmError};
use droidmesh_proto::v1::{TokenUsage, UsageReport};

/// Errors another call cannot fix: a missing or refused key, a bad configuration, a replay with
/// no answers left.
pub fn is_unusable(e: &LlmError) -> bool {
    matches!(
        e,
        LlmError::Auth { .. }
            | LlmError::Config(_)
            | LlmError::ReplayExhausted { .. }
            | LlmError::Cassette(_)
    )
}

/// The usage of one call, as the `Usage` event and `ExecuteSubgoalResponse.usage` carry it.
pub fn usage_report(agent: &str, r: &ChatResponse) -> UsageReport {
    UsageReport {
        agent: agent.into(),
        provider: r.provider.clone(),
        model: r.model.clone(),
        usage: Some(TokenUsage {
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cached_input_tokens: r.usage.cached_input_tokens.unwrap_or(0),
            calls: 1,
        }),
        latency_ms: u64::try_from(r.latency.as_millis()).unwrap_or(u64::MAX),
        finish_reason: r.finish_reason.clone(),
        replay: r.replay,
    }
}

/// The model a target names, as `provider/model`, for error messages.
pub fn describe_target(llm: &LlmClient, target: &ChatTarget) -> String {
    let profile = match target {
        ChatTarget::Direct(p) => Some(p.clone()),
        ChatTarget::Profile(name) => llm.profile(name).ok(),
    };
    match (profile, target) {
        (Some(p), _) => format!("{}/{}", p.provider, p.model),
        (None, ChatTarget::Profile(name)) => format!("profile `{name}`"),
        (None, ChatTarget::Direct(_)) => "an unknown model".into(),
    }
}
