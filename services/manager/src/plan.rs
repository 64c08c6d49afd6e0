//! `Plan`: one turn of the planner in reasoning mode. Read the device (and a screenshot when
//! the task has vision), render `manager/system.jinja` from the request, ask the task's model,
//! and return its decision: subgoals with the agent each goes to, memory to keep, a completion,
//! a request for a person's help, or a direct answer.
//!
//! A reply the parser cannot act on is not an RPC error: the response then carries no decision
//! and one parse warning, worded for the model, which the caller shows it at the next call.
use droidmesh_agent::parse::{self, ManagerOutput, SubgoalKind};
use droidmesh_llm::{CallTags, ChatRequest, Message};
use droidmesh_proto::v1::{
    Accomplished, HumanHelpRequest, PlanRequest, PlanResponse, Subgoal, subgoal,
};

use crate::error::ManagerError;
use crate::model::{Model, Tally};
use crate::prompt;
use crate::service::Manager;

/// The agent name and LLM profile of the planner.
pub const AGENT: &str = "manager";

pub(crate) async fn plan(m: &Manager, r: PlanRequest) -> Result<PlanResponse, ManagerError> {
    if r.instruction.trim().is_empty() {
        return Err(ManagerError::InvalidArgument(
            "instruction is empty: pass the user's request".into(),
        ));
    }
    // A bad override is refused before the device is touched.
    let model = Model::resolve(&m.llm, AGENT, r.llm.as_ref())?;
    let state = m.devices.read(r.device.as_ref(), r.vision).await?;
    let screenshot = state.screenshot.as_ref().filter(|_| r.vision);
    // The gateway tells the user, once per task, when the screenshot was withheld.
    let withheld = if r.vision {
        state.screenshot_withheld.clone()
    } else {
        String::new()
    };
    let mut ctx = prompt::context(&r, &state, screenshot.is_some());
    // The request's card, then the cards of the app in front and of apps the request names.
    let foreground = Some(ctx.phone.package.as_str()).filter(|p| !p.is_empty());
    ctx.app_card = m
        .cards
        .prompt_text(foreground, &r.instruction, ctx.app_card.as_deref())
        .await;
    let text = m.prompts.render(&ctx).map_err(|e| ManagerError::Prompt {
        template: "manager/system",
        detail: e.to_string(),
    })?;
    let mut message = Message::user(text);
    if let Some(shot) = screenshot {
        message = message.with_image_png(shot.png.clone());
    }
    let serial = r.device.as_ref().and_then(|d| d.lease.as_ref());
    let tags = CallTags::new(r.task_id.as_str())
        .device(serial.map(|l| l.serial.as_str()).unwrap_or_default())
        .step(r.step);
    let request = ChatRequest::new(vec![message]).tagged(tags);
    let reply = model.chat(&m.llm, request).await?;
    let mut tally = Tally::default();
    tally.add(&reply);
    let usage = Some(tally.report(AGENT));
    match parse::parse_manager(&reply.text) {
        Ok(out) => {
            tracing::info!(
                subgoals = out.plan.len(),
                accomplished = out.accomplished.is_some(),
                human_help = out.human_help.is_some(),
                direct_response = out.direct_response.is_some(),
                "plan ready"
            );
            Ok(PlanResponse {
                screenshot_withheld: withheld,
                ..response(out, usage)
            })
        }
        Err(e) => {
            tracing::warn!(error = %e, "the model's reply holds no decision");
            Ok(PlanResponse {
                usage,
                parse_warnings: vec![e.to_string()],
                screenshot_withheld: withheld,
                ..PlanResponse::default()
            })
        }
    }
}

fn response(out: ManagerOutput, usage: Option<droidmesh_proto::v1::UsageReport>) -> PlanResponse {
    let subgoals = out
        .plan
        .into_iter()
        .map(|s| {
            let (kind, text) = match s.kind {
                SubgoalKind::Action => (subgoal::Kind::Action, s.text),
                SubgoalKind::Script(task) => (subgoal::Kind::Script, task),
                SubgoalKind::TextTask(edit) => (subgoal::Kind::TextTask, edit),
            };
            Subgoal {
                number: u32::try_from(s.index).unwrap_or(u32::MAX),
                kind: kind as i32,
                text,
            }
        })
        .collect();
    PlanResponse {
        thought: out.thought,
        subgoals,
        plan_text: out.plan_text,
        add_memory: out.memory.join("\n"),
        accomplished: out.accomplished.map(|a| Accomplished {
            success: a.success,
            answer: a.answer,
        }),
        usage,
        parse_warnings: out.warnings,
        human_help: out.human_help.map(|h| HumanHelpRequest {
            agent: AGENT.into(),
            reason: h.reason,
            instructions: h.instructions,
        }),
        direct_response: out.direct_response,
        screenshot_withheld: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_subgoal_carries_what_its_agent_needs() {
        let out = parse::parse_manager(
            "<thought>t</thought><add_memory>a</add_memory><add_memory>b</add_memory><plan>\n1. Tap Notes\n<script>Fetch the weather</script>\nTEXT_TASK: Add a title\n</plan>",
        )
        .unwrap();
        let r = response(out, None);
        let got: Vec<(u32, i32, &str)> = r
            .subgoals
            .iter()
            .map(|s| (s.number, s.kind, s.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, subgoal::Kind::Action as i32, "Tap Notes"),
                (2, subgoal::Kind::Script as i32, "Fetch the weather"),
                (3, subgoal::Kind::TextTask as i32, "Add a title"),
            ]
        );
        assert_eq!(r.add_memory, "a\nb");
    }
}
