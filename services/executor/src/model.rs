//! What CodeAct and `ExecuteSubgoal` share around a model call: which failures no retry can
//! fix, the usage report of one call, and how to name the model in errors.
use droidmesh_llm::{ChatResponse, LlmClient, LlmError};
use droidmesh_proto::v1::{LlmOverride, UsageReport};

/// Errors another call cannot fix (see [`LlmError::is_unusable`]).
pub fn is_unusable(e: &LlmError) -> bool {
    e.is_unusable()
}

/// The usage of one call, as the `Usage` event and `ExecuteSubgoalResponse.usage` carry it.
pub fn usage_report(agent: &str, r: &ChatResponse) -> UsageReport {
    r.usage_report(agent)
}

/// The model an agent uses for one request, as `provider/model`, for error messages: the
/// agent's profile with the request's override applied.
pub fn describe_model(llm: &LlmClient, profile: &str, ov: Option<&LlmOverride>) -> String {
    let chosen = |o: Option<&String>, p: &str| {
        o.filter(|s| !s.trim().is_empty())
            .cloned()
            .unwrap_or_else(|| p.to_owned())
    };
    match llm.profile(profile) {
        Ok(p) => format!(
            "{}/{}",
            chosen(ov.map(|o| &o.provider), &p.provider),
            chosen(ov.map(|o| &o.model), &p.model)
        ),
        Err(_) => format!("profile `{profile}`, not configured"),
    }
}
