//! Reads the Manager's reply: `<thought>`, `<plan>`, `<add_memory>`, `<request_accomplished>`,
//! `<request_human_help>`, `<direct_response>`.
//!
//! A reply is a decision when it holds a plan with at least one subgoal, a completion, a request
//! for human help or a direct response; several may come together and all are returned.
//!
//! Tolerated: tags in any case, in any order, wrapped in a code fence or surrounded by prose;
//! a tag left open (it ends where the next top-level tag opens, or at the end); repeated tags
//! (thoughts are joined, every `<add_memory>` is kept, the last of any other tag wins, each
//! repeat noted in [`ManagerOutput::warnings`]); a missing `success` attribute (taken as true,
//! with a warning); a help request without a `reason` attribute (its first line is the reason).
//! An empty help request or direct response is ignored with a warning. The plan's own rules
//! are in [`parse_plan`].

use super::{
    plan::{Subgoal, parse_plan},
    tags::{Tags, attribute},
};

const TOP_LEVEL: &[&str] = &[
    "thought",
    "plan",
    "add_memory",
    "request_accomplished",
    "request_human_help",
    "direct_response",
];

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
    /// Set when the Manager asks a person to do or decide something.
    pub human_help: Option<HumanHelp>,
    /// An answer about earlier runs of the conversation, given without acting on the device.
    pub direct_response: Option<String>,
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

/// `<request_human_help reason="...">instructions</request_human_help>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanHelp {
    /// Why help is needed, in a line.
    pub reason: String,
    /// What the person should do; may be empty when the reason says it all.
    pub instructions: String,
}

/// A Manager reply that cannot be acted on; the message is written to be shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    /// No usable plan, completion, help request or direct response.
    #[error(
        "expected a <plan> with at least one subgoal, <request_accomplished success=\"true\"> \
         (or \"false\") with the answer, <direct_response> with an answer about earlier runs, \
         or <request_human_help reason=\"...\"> with instructions for the person; found {found}"
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
    let mut helps = 0usize;
    let mut responses = 0usize;
    let mut seen: Vec<String> = Vec::new();
    let tags = Tags::new(&lower, TOP_LEVEL);
    let mut pos = 0;
    while let Some(element) = tags.next_element(pos) {
        pos = element.end.max(element.body.end).max(pos + 1);
        let mut body = text[element.body.clone()].trim();
        if !element.closed {
            // A tag left open inside a code fence would otherwise keep the closing fence.
            body = without_closing_fence(body);
            out.warnings
                .push(format!("<{}> was not closed", element.name));
        }
        let name = format!("<{}>", element.name);
        let name = if body.is_empty() {
            format!("an empty {name}")
        } else {
            name
        };
        if !seen.contains(&name) {
            seen.push(name);
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
            "request_human_help" => {
                helps += 1;
                let reason = attribute(&text[element.attrs.clone()], "reason").map(str::trim);
                match human_help(reason, body) {
                    Some(help) => out.human_help = Some(help),
                    None => out.warnings.push(
                        "an empty <request_human_help> was ignored: give a reason and say what \
                         the person should do"
                            .to_owned(),
                    ),
                }
            }
            "direct_response" if body.is_empty() => out
                .warnings
                .push("an empty <direct_response> was ignored".to_owned()),
            "direct_response" => {
                responses += 1;
                out.direct_response = Some(body.to_owned());
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
    for (count, tag) in [
        (helps, "<request_human_help>"),
        (responses, "<direct_response>"),
    ] {
        if count > 1 {
            out.warnings
                .push(format!("{count} {tag} tags given; the last one is used"));
        }
    }
    if out.plan.is_empty()
        && out.accomplished.is_none()
        && out.human_help.is_none()
        && out.direct_response.is_none()
    {
        let found = if plans > 0 {
            "a <plan> without subgoals".to_owned()
        } else if seen.is_empty() {
            "no tags at all".to_owned()
        } else {
            format!("only {}", seen.join(", "))
        };
        return Err(ManagerError::NoDecision { found });
    }
    Ok(out)
}

/// The help request from its `reason` attribute and body; without the attribute, the body's
/// first non-empty line is the reason and the rest the instructions. `None` when both are empty.
fn human_help(reason: Option<&str>, body: &str) -> Option<HumanHelp> {
    let (reason, instructions) = match reason.filter(|r| !r.is_empty()) {
        Some(reason) => (reason, body),
        None => {
            let body = body.trim_start();
            let (first, rest) = body.split_once('\n').unwrap_or((body, ""));
            (strip_label(first, "reason"), rest.trim())
        }
    };
    let instructions = strip_label(instructions, "instructions");
    if reason.is_empty() && instructions.is_empty() {
        return None;
    }
    Some(HumanHelp {
        reason: reason.to_owned(),
        instructions: instructions.to_owned(),
    })
}

/// `body` without a last line made only of backticks or tildes (a code fence's end).
fn without_closing_fence(body: &str) -> &str {
    let (head, last) = body.rsplit_once('\n').unwrap_or(("", body));
    let last = last.trim();
    let fence =
        last.len() >= 3 && (last.bytes().all(|b| b == b'`') || last.bytes().all(|b| b == b'~'));
    if fence { head.trim_end() } else { body }
}

/// `text` without a leading `label:` (any case), trimmed.
fn strip_label<'a>(text: &'a str, label: &str) -> &'a str {
    let text = text.trim();
    match text.get(..label.len()) {
        Some(head) if head.eq_ignore_ascii_case(label) => {
            let rest = text[label.len()..].trim_start();
            rest.strip_prefix(':').map_or(text, str::trim)
        }
        _ => text,
    }
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
