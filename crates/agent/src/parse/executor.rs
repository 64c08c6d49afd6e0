//! Reads the Executor's reply: one atomic action as JSON under an `Action` heading.
//!
//! The reply is split into sections at headings: markdown (`### Action ###`, `## Action:`),
//! bold (`**Action:**`) or plain labels at a line start (`Action: {...}`). `Thought` (or
//! `Reasoning`) and `Description` sections are kept as text. The action is the first JSON
//! object in the `Action` section that names an action; without such a section, the first one
//! anywhere in the reply. The JSON is read leniently (see [`super::json`]): code fences around
//! it, comments, trailing commas, single quotes and prose around it are all fine.
//!
//! The action's name is read from `action` (or `action_type`, `name`, `tool`, `function`);
//! arguments nested under `args`, `arguments`, `params`, `parameters` or `action_input` are
//! flattened; `thought`/`reasoning`/`description` keys inside the JSON fill those fields when
//! the reply has no such section. The name is returned as written; [`crate::tools::find`]
//! resolves aliases such as `click`.

use serde_json::{Map, Value};

use super::json::{JsonError, find_json_values, parse_at};
use crate::tools::json_type;

const NAME_KEYS: &[&str] = &["action", "action_type", "name", "tool", "function"];
const NESTED_KEYS: &[&str] = &["args", "arguments", "params", "parameters", "action_input"];

/// One atomic action chosen by the Executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorAction {
    /// The action's name, trimmed, as written (`tap`, or an alias like `click`).
    pub action: String,
    /// The other fields of the JSON object.
    pub args: Map<String, Value>,
    /// The reply's reasoning, if it gave any.
    pub thought: Option<String>,
    /// The reply's one-line description of the action, if it gave one.
    pub description: Option<String>,
}

/// An Executor reply without a usable action; the message is written to be shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorError {
    /// No JSON object anywhere.
    #[error(
        "expected a JSON object such as {{\"action\": \"tap\", \"index\": 3}} under \"### Action\", \
         found no JSON object"
    )]
    NoJson,
    /// JSON was started under the heading but could not be read.
    #[error("the JSON under \"### Action\" could not be read: expected {0}")]
    BadJson(JsonError),
    /// JSON objects were found but none names an action.
    #[error("expected an \"action\" field naming the action, found an object with keys: {keys}")]
    NoActionField {
        /// The keys of the first object found.
        keys: String,
    },
    /// The action field is not a non-empty string.
    #[error("expected \"action\" to be the action's name as a string, found {found}")]
    BadActionField {
        /// What the field held.
        found: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Preamble,
    Thought,
    Action,
    Description,
    Other,
}

/// Parses an Executor reply.
pub fn parse_executor(text: &str) -> Result<ExecutorAction, ExecutorError> {
    let sections = split_sections(text);
    let joined = |kind: Section| -> Option<String> {
        let parts: Vec<&str> = sections
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, s)| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    };
    let action_text = joined(Section::Action);
    let mut candidates: Vec<Map<String, Value>> = Vec::new();
    if let Some(section) = &action_text {
        candidates.extend(objects(section));
    }
    let chosen = candidates
        .iter()
        .find(|o| name_field(o).is_some())
        .cloned()
        .or_else(|| objects(text).into_iter().find(|o| name_field(o).is_some()));
    let Some(mut object) = chosen else {
        if let Some(section) = &action_text
            && let Some(start) = section.find('{')
            && let Err(e) = parse_at(section, start)
        {
            return Err(ExecutorError::BadJson(e));
        }
        let first = candidates
            .into_iter()
            .next()
            .or_else(|| objects(text).into_iter().next());
        return Err(match first {
            Some(o) => ExecutorError::NoActionField {
                keys: o.keys().cloned().collect::<Vec<_>>().join(", "),
            },
            None => ExecutorError::NoJson,
        });
    };
    let (key, value) = name_field(&object)
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .ok_or(ExecutorError::NoJson)?;
    object.remove(&key);
    let action = match value {
        Value::String(s) if !s.trim().is_empty() => s.trim().to_owned(),
        other => {
            return Err(ExecutorError::BadActionField {
                found: match &other {
                    Value::String(_) => "an empty string".to_owned(),
                    v => format!("{} {v}", json_type(v)),
                },
            });
        }
    };
    for nested in NESTED_KEYS {
        if let Some(Value::Object(inner)) = object.get(*nested).cloned() {
            object.remove(*nested);
            for (k, v) in inner {
                object.entry(k).or_insert(v);
            }
        }
    }
    let mut take_text = |keys: &[&str]| {
        keys.iter().find_map(|k| match object.get(*k) {
            Some(Value::String(s)) => {
                let s = s.clone();
                object.remove(*k);
                Some(s)
            }
            _ => None,
        })
    };
    let inner_thought = take_text(&["thought", "reasoning"]);
    let inner_description = take_text(&["description"]);
    Ok(ExecutorAction {
        action,
        args: object,
        thought: joined(Section::Thought).or(inner_thought),
        description: joined(Section::Description).or(inner_description),
    })
}

fn objects(text: &str) -> Vec<Map<String, Value>> {
    find_json_values(text)
        .into_iter()
        .filter_map(|(v, _)| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .collect()
}

fn name_field(object: &Map<String, Value>) -> Option<(&str, &Value)> {
    NAME_KEYS
        .iter()
        .find_map(|k| object.get_key_value(*k).map(|(k, v)| (k.as_str(), v)))
}

/// Splits the reply into (section, text) at heading lines.
fn split_sections(text: &str) -> Vec<(Section, String)> {
    let mut sections = vec![(Section::Preamble, String::new())];
    for line in text.lines() {
        match heading(line) {
            Some((kind, rest)) => sections.push((kind, format!("{rest}\n"))),
            None => {
                if let Some((_, body)) = sections.last_mut() {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    sections
}

fn label(word: &str) -> Option<Section> {
    match word.trim().to_ascii_lowercase().as_str() {
        "thought" | "thoughts" | "reasoning" | "thinking" => Some(Section::Thought),
        "action" | "next action" | "atomic action" => Some(Section::Action),
        "description" | "action description" => Some(Section::Description),
        _ => None,
    }
}

/// Whether a line is a heading: its section and the text after the label on the same line.
fn heading(line: &str) -> Option<(Section, &str)> {
    let s = line.trim();
    if let Some(hashes) = s.strip_prefix('#') {
        let title = hashes.trim_start_matches('#').trim();
        let title = title.trim_end_matches('#').trim();
        let (word, rest) = match title.split_once(':') {
            Some((w, r)) => (w, r.trim()),
            None => (title, ""),
        };
        let word = word.trim_matches(['*', '_', ' ']);
        return Some((label(word).unwrap_or(Section::Other), rest));
    }
    // "**Action**" alone on its line.
    if let Some(word) = s.strip_prefix("**").and_then(|w| w.strip_suffix("**"))
        && let Some(kind) = label(word.trim_end_matches(':'))
    {
        return Some((kind, ""));
    }
    // "**Action:** ...", "**Action**: ...", "Action: ..."
    let unbold = s.strip_prefix("**").unwrap_or(s);
    let colon = unbold.find(':')?;
    let word = unbold[..colon].trim_end_matches(['*', ' ']);
    let kind = label(word)?;
    let rest = unbold[colon + 1..].trim_start_matches(['*', ' ']);
    Some((kind, rest))
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
