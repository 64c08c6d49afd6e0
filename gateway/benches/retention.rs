//! Memory the gateway keeps per ended task: N tasks with a typical record and event log are
//! run through the task store (created, logged, ended and made compact), and the process's
//! resident memory grows by the figure printed per task. Also prints the encoded size of the
//! record and the log, and of the largest record an ended task can keep.
//! Run with `cargo bench -p droidmesh-gateway --bench retention`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use droidmesh_gateway::entry::Limits;
use droidmesh_gateway::limits::Retention;
use droidmesh_gateway::store::Store;
use droidmesh_proto::v1::{
    CodeBlock, FileDetail, Mode, StepStarted, Subgoal, Task, TaskCompleted, TaskRequest, TaskState,
    TaskStatus, Thought, ToolResult, task_event,
};
use prost::Message as _;

const TASKS: usize = 10_000;
/// Steps per task; each logs a step, a thought, a code block and a tool result.
const STEPS: u32 = 8;

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn text(n: usize) -> String {
    "The Wi-Fi switch is on the Network & internet page; ".repeat(n / 50 + 1)[..n].to_owned()
}

fn task(i: usize) -> Task {
    Task {
        id: format!("task-{i:032x}"),
        request: Some(TaskRequest {
            goal: text(200),
            mode: Mode::Reasoning as i32,
            device: "emulator-5554".into(),
            ..TaskRequest::default()
        }),
        state: TaskState::Running as i32,
        plan: (1..=5)
            .map(|n| Subgoal {
                number: n,
                kind: 1,
                text: text(80),
            })
            .collect(),
        memory: text(600),
        ..Task::default()
    }
}

/// Runs task `i` through `store`: created, `steps` steps logged, ended.
fn log(store: &Store, i: usize, steps: u32) {
    let (entry, _control) = store.insert(task(i));
    let push = |k| {
        entry.push(k);
    };
    push(task_event::Kind::Status(TaskStatus {
        state: TaskState::Running as i32,
        detail: "running on emulator-5554".into(),
    }));
    for step in 1..=steps {
        entry.set_step(step);
        push(task_event::Kind::StepStarted(StepStarted {
            agent: "manager".into(),
            step,
        }));
        push(task_event::Kind::Thought(Thought {
            agent: "manager".into(),
            text: text(300),
        }));
        push(task_event::Kind::Code(CodeBlock {
            agent: "executor".into(),
            language: "json".into(),
            code: text(120),
        }));
        push(task_event::Kind::ToolResult(ToolResult {
            agent: "executor".into(),
            tool: "tap".into(),
            call_id: step,
            result: None,
        }));
    }
    entry.update(|t| {
        t.state = TaskState::Succeeded as i32;
        t.answer = text(400);
        t.files = vec![FileDetail {
            name: "rates.csv".into(),
            path: "/workspace/rates.csv".into(),
            size_bytes: 2_048,
            ..FileDetail::default()
        }];
    });
    push(task_event::Kind::Completed(TaskCompleted {
        success: true,
        answer: text(400),
        steps,
        ..TaskCompleted::default()
    }));
    store.ended(&entry);
}

fn store() -> Store {
    Store::new(
        Retention {
            keep: TASKS + 1,
            keep_for_ms: u64::MAX,
        },
        Limits {
            max_events: 2_000,
            max_event_bytes: 2 * 1024 * 1024,
            max_queued: 32,
        },
    )
}

/// Resident bytes per ended task of `TASKS` tasks of `steps` steps each, and one of them.
fn measure(steps: u32) -> (f64, Store) {
    let store = store();
    // Warm the allocator with one task, then measure the rest.
    log(&store, usize::MAX, steps);
    let before = rss_bytes();
    for i in 0..TASKS {
        log(&store, i, steps);
    }
    let after = rss_bytes();
    assert_eq!(store.len(), TASKS + 1);
    (after.saturating_sub(before) as f64 / TASKS as f64, store)
}

fn main() {
    let (bare, bare_store) = measure(0);
    let entry = bare_store.get(&format!("task-{:032x}", 0)).unwrap();
    let (bare_events, bare_log) = entry.log_size();
    // Kept alive: memory it freed would be reused by the next measure without growing RSS.
    let (full, store) = measure(STEPS);
    let entry = store.get(&format!("task-{:032x}", 0)).unwrap();
    let record = entry.snapshot().encoded_len();
    let (events, log_bytes) = entry.log_size();
    println!(
        "ended task, record and {bare_events} events ({bare_log} B encoded): {:.1} KiB resident each over {TASKS} tasks",
        bare / 1024.0
    );
    println!(
        "ended task, record and {events} events ({log_bytes} B encoded, {STEPS} steps): {:.1} KiB resident each; record {record} B encoded",
        full / 1024.0
    );
}
