//! The relay of an agent's event stream into a task's log: direct mode relays the executor's
//! CodeAct run, reasoning mode the scripter's session of a subgoal.
use droidmesh_proto::v1::{AgentEvent, AgentFinished, TaskState, agent_event, task_event};

use crate::entry::TaskEntry;
use crate::task_state::{add_usage, set_state};

/// Turns an agent event into a task event; returns the agent's result when it finished. With
/// `task_steps`, the agent's steps are the task's steps (direct mode); otherwise they are steps
/// inside one subgoal (the scripter's session in reasoning mode).
pub fn relay(entry: &TaskEntry, ev: AgentEvent, task_steps: bool) -> Option<AgentFinished> {
    use task_event::Kind as K;
    let kind = match ev.kind? {
        agent_event::Kind::Step(s) => {
            if task_steps {
                entry.set_step(s.step);
            }
            K::StepStarted(s)
        }
        agent_event::Kind::Thought(t) => K::Thought(t),
        agent_event::Kind::Code(c) => K::Code(c),
        agent_event::Kind::ToolCall(c) => K::ToolCall(c),
        agent_event::Kind::ToolResult(r) => K::ToolResult(r),
        agent_event::Kind::Observation(o) => K::Observation(o),
        agent_event::Kind::Screenshot(s) => K::Screenshot(s),
        agent_event::Kind::Usage(u) => {
            if let Some(usage) = &u.usage {
                entry.update(|t| add_usage(&mut t.usage, usage));
            }
            K::Usage(u)
        }
        agent_event::Kind::HumanHelp(h) => {
            set_state(
                entry,
                TaskState::WaitingForHuman,
                &format!("waiting for a human: {}", h.reason),
            );
            K::HumanHelp(h)
        }
        agent_event::Kind::Finished(f) => {
            if task_steps {
                entry.update(|t| t.steps = t.steps.max(f.steps));
            }
            return Some(f);
        }
    };
    entry.push(kind);
    None
}
