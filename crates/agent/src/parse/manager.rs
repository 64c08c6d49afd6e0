//! Reads the Manager's reply: `<thought>`, `<plan>`, `<add_memory>`, `<request_accomplished>`.
//!
//! Tolerated: tags in any case, in any order, wrapped in a code fence or surrounded by prose;
//! a tag left open (it ends where the next top-level tag opens, or at the end); repeated tags
//! (thoughts are joined, every `<add_memory>` is kept, the last plan and the last
//! `<request_accomplished>` win, each repeat noted in [`ManagerOutput::warnings`]); a missing
//! `success` attribute (taken as true, with a warning). The plan's own rules are in
//! [`parse_plan`].

use super::{
    plan::{Subgoal, parse_plan},
    tags::{Tags, attribute},
};

const TOP_LEVEL: &[&str] = &["thought", "plan", "add_memory", "request_accomplished"];

/// The Manager's decision for this turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagerOutput {
    /// Its reasoning (several `<thought>`s joined by blank lines); may be empty.
    pub thought: String,
    /// The subgoals, in order; the first one is routed next.
    pub plan: Vec<Subgoal>,
    /// The plan as written, trimmed, for the next turn's prompt.
    pub plan_text: String,
    /// One entry per non-empty `<add_memory>`.
    pub memory: Vec<String>,
    /// Set when the Manager declared the request finished.
    pub accomplished: Option<Accomplished>,
    /// What was tolerated while reading the reply (missing tags, repeats, ...).
    pub warnings: Vec<String>,
}

impl ManagerOutput {
    /// The subgoal to route next, if any.
    pub fn next_subgoal(&self) -> Option<&Subgoal> {
        self.plan.first()
    }
}

/// `<request_accomplished success="...">answer</request_accomplished>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accomplished {
    /// Whether the request was fulfilled.
    pub success: bool,
    /// The answer for the user, or why the request failed.
    pub answer: String,
}

/// A Manager reply that cannot be acted on; the message is written to be shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    /// Neither a usable plan nor a completion.
    #[error(
        "expected a <plan> with at least one subgoal, or <request_accomplished success=\"true\"> \
         (or \"false\") with the answer, found {found}"
    )]
    NoDecision {
        /// What the reply held instead.
        found: String,
    },
    /// The success attribute holds something other than true or false.
    #[error(
        "expected success=\"true\" or success=\"false\" on <request_accomplished>, found \
         success=\"{found}\""
    )]
    BadSuccess {
        /// The attribute's value.
        found: String,
    },
}

/// Parses a Manager reply.
pub fn parse_manager(text: &str) -> Result<ManagerOutput, ManagerError> {
    let lower = text.to_ascii_lowercase();
    let mut out = ManagerOutput::default();
    let mut thoughts: Vec<&str> = Vec::new();
    let mut plans = 0usize;
    let mut completions = 0usize;
    let tags = Tags::new(&lower, TOP_LEVEL);
    let mut pos = 0;
    while let Some(element) = tags.next_element(pos) {
        pos = element.end.max(element.body.end).max(pos + 1);
        let body = text[element.body.clone()].trim();
        if !element.closed {
            out.warnings
                .push(format!("<{}> was not closed", element.name));
        }
        match element.name {
            "thought" => thoughts.push(body),
            "plan" => {
                plans += 1;
                let (plan, warnings) = parse_plan(body);
                out.plan = plan;
                out.plan_text = body.to_owned();
                out.warnings.extend(warnings);
            }
            "add_memory" if !body.is_empty() => out.memory.push(body.to_owned()),
            "request_accomplished" => {
                completions += 1;
                let success = match attribute(&text[element.attrs.clone()], "success") {
                    Some(value) => parse_success(value)?,
                    None => {
                        out.warnings.push(
                            "<request_accomplished> had no success attribute; taken as true"
                                .to_owned(),
                        );
                        true
                    }
                };
                out.accomplished = Some(Accomplished {
                    success,
                    answer: body.to_owned(),
                });
            }
            _ => {}
        }
    }
    out.thought = thoughts
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if out.thought.is_empty() {
        out.warnings.push("no <thought> given".to_owned());
    }
    if plans > 1 {
        out.warnings
            .push(format!("{plans} <plan> tags given; the last one is used"));
    }
    if completions > 1 {
        out.warnings.push(format!(
            "{completions} <request_accomplished> tags given; the last one is used"
        ));
    }
    if out.plan.is_empty() && out.accomplished.is_none() {
        let found = if plans > 0 {
            "a <plan> without subgoals".to_owned()
        } else if pos == 0 {
            "no tags at all".to_owned()
        } else {
            "neither tag".to_owned()
        };
        return Err(ManagerError::NoDecision { found });
    }
    Ok(out)
}

fn parse_success(value: &str) -> Result<bool, ManagerError> {
    let v = value.trim().to_ascii_lowercase();
    match v.as_str() {
        "true" | "yes" | "y" | "1" | "success" | "ok" => Ok(true),
        "false" | "no" | "n" | "0" | "failure" | "failed" | "fail" => Ok(false),
        _ => Err(ManagerError::BadSuccess {
            found: value.to_owned(),
        }),
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
