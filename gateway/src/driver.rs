//! What a mode plugs into the task runner: a [`Driver`] runs the agents of one task while the
//! runner holds its device lease, and returns how the run ended.
use std::future::Future;

use droidmesh_proto::v1::task_event;
use droidmesh_proto::v1::{DeviceBinding, Lease, LeaseRef, TaskRequest, TaskState, UserMessage};
use tokio::sync::mpsc;

use crate::deps::Deps;
use crate::entry::{Control, TaskEntry};
use crate::task_state::{Ending, set_state};

/// Everything a driver may use while the runner holds the task's lease.
pub struct TaskCtx<'a> {
    pub deps: &'a Deps,
    pub entry: &'a TaskEntry,
    pub req: &'a TaskRequest,
    pub lease: &'a Lease,
    /// Messages for the running task (SendMessage); a cancel ends the run in the runner.
    pub control: &'a mut mpsc::Receiver<Control>,
}

impl TaskCtx<'_> {
    pub fn lease_ref(&self) -> LeaseRef {
        lease_ref(self.lease)
    }

    /// Where agents reach the task's device, and under which lease.
    pub fn binding(&self) -> DeviceBinding {
        DeviceBinding {
            endpoint: self.deps.device_endpoint.clone(),
            lease: Some(self.lease_ref()),
        }
    }

    /// The step budget of the task.
    pub fn max_steps(&self) -> u32 {
        self.req
            .max_steps
            .unwrap_or(self.deps.cfg.default_max_steps)
    }

    /// Logs a user-visible message event.
    pub fn message(&self, text: &str) {
        self.entry.push(task_event::Kind::Message(UserMessage {
            text: text.to_owned(),
        }));
    }

    /// Shows in the task's log a message the user sent to its run (a new goal also in its
    /// record), the same in both modes; what the message does to the run is the steering
    /// contract's (`droidmesh_agent::steer`). `waiting`: the run waits for a person, so a
    /// reply ends the wait.
    pub fn steered(&self, message: &Control, waiting: bool) {
        match message {
            Control::NewGoal(goal) => {
                self.message(&format!("goal changed to: {goal}"));
                let g = goal.clone();
                self.entry.update(|t| {
                    if let Some(r) = t.request.as_mut() {
                        r.goal = g;
                    }
                });
            }
            Control::HumanReply(text) if waiting => {
                set_state(self.entry, TaskState::Running, "a human replied");
                self.message(&format!("human reply: {text}"));
            }
            Control::Note(text) | Control::HumanReply(text) => self.message(text),
            Control::Stop(_) => {}
        }
    }
}

pub fn lease_ref(lease: &Lease) -> LeaseRef {
    LeaseRef {
        serial: lease.serial.clone(),
        lease_id: lease.lease_id.clone(),
    }
}

/// One mode's way of running a task's agents.
pub trait Driver: Send + Sync + 'static {
    /// Runs the task until it ends; the runner releases the lease and records the ending.
    fn drive(&self, ctx: TaskCtx<'_>) -> impl Future<Output = Ending> + Send;
}

/// `reason` when it says something, `default` otherwise.
pub fn non_empty(reason: String, default: &str) -> String {
    if reason.trim().is_empty() {
        default.to_owned()
    } else {
        reason
    }
}
