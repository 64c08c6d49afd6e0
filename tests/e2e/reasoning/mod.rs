//! Reasoning mode across processes: the gateway, manager, executor, scripter, text manipulator
//! and device service each a `droidmesh serve` process, simulators through Debian's adb, one
//! scripted model double on loopback answering every agent in call order. Assertions read the
//! phone the way one reads a phone (`adb shell`), the HTTP servers' own logs, and the prompts
//! the model double received.
mod human;
mod loops;
mod plans;
mod scripter;
mod text;

use droidmesh_llm::testkit::{MockLlmServer, ReceivedRequest};
use droidmesh_proto::v1::Mode;

use super::*;

pub(super) fn reasoning(goal: &str, device: &str) -> TaskRequest {
    TaskRequest {
        goal: goal.into(),
        device: device.into(),
        mode: Mode::Reasoning as i32,
        ..TaskRequest::default()
    }
}

/// The text the model was sent (every message's text, in order).
fn prompt(r: &ReceivedRequest) -> String {
    r.json()["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| match &m["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Which agent sent a request, from its prompt's first words.
fn agent_of(text: &str) -> &'static str {
    if text.starts_with("You are the planner") {
        "manager"
    } else if text.starts_with("You carry out one step") {
        "executor"
    } else if text.starts_with("You complete one task that needs no phone screen") {
        "scripter"
    } else if text.starts_with("You rewrite the content of one text field") {
        "text_manipulator"
    } else {
        "other"
    }
}

/// The prompts each agent sent, in order: `(agent, prompt)`.
pub(super) fn prompts(llm: &MockLlmServer) -> Vec<(&'static str, String)> {
    llm.requests()
        .iter()
        .map(|r| {
            let p = prompt(r);
            (agent_of(&p), p)
        })
        .collect()
}

pub(super) fn of(prompts: &[(&'static str, String)], agent: &str) -> Vec<String> {
    prompts
        .iter()
        .filter(|(a, _)| *a == agent)
        .map(|(_, p)| p.clone())
        .collect()
}

pub(super) fn act(action: &str) -> MockResponse {
    reply(&format!(
        "### Thought\nThis is the subgoal's action.\n\n### Action\n{action}\n\n### Description\nThe action."
    ))
}

pub(super) fn plan_reply(items: &str) -> MockResponse {
    reply(&format!(
        "<thought>\nNext step.\n</thought>\n<plan>\n{items}\n</plan>"
    ))
}

pub(super) fn done(success: bool, answer: &str) -> MockResponse {
    reply(&format!(
        "<thought>\nFinished.\n</thought>\n<request_accomplished success=\"{success}\">\n{answer}\n</request_accomplished>"
    ))
}

fn handoffs(events: &[TaskEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Handoff(h)) => Some((h.from_agent.clone(), h.to_agent.clone())),
            _ => None,
        })
        .collect()
}
