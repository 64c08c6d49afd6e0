//! Task metrics: `droidmesh.tasks` counts ended tasks by `outcome` (the proto's state name in
//! lower case: succeeded, failed, cancelled) and `droidmesh.task.steps` the steps each ended
//! task took, by the same outcome.
use droidmesh_proto::v1::TaskState;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};
use std::sync::OnceLock;

struct Instruments {
    tasks: Counter<u64>,
    steps: Histogram<u64>,
}

/// Made on first use from the global meter provider, which the process installs first.
fn instruments() -> &'static Instruments {
    static INST: OnceLock<Instruments> = OnceLock::new();
    INST.get_or_init(|| {
        let meter = opentelemetry::global::meter("droidmesh");
        Instruments {
            tasks: meter
                .u64_counter("droidmesh.tasks")
                .with_unit("{task}")
                .with_description("Tasks ended, by outcome")
                .build(),
            steps: meter
                .u64_histogram("droidmesh.task.steps")
                .with_unit("{step}")
                .with_description("Steps an ended task took")
                .with_boundaries(vec![
                    0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0, 89.0, 144.0,
                ])
                .build(),
        }
    })
}

/// `TASK_STATE_SUCCEEDED` → `succeeded`.
pub fn outcome(state: TaskState) -> String {
    let name = state.as_str_name();
    name.strip_prefix("TASK_STATE_")
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// Records a task that ended in `state` after `steps` steps.
pub fn task_ended(state: TaskState, steps: u32) {
    let inst = instruments();
    let attrs = [KeyValue::new("outcome", outcome(state))];
    inst.tasks.add(1, &attrs);
    inst.steps.record(u64::from(steps), &attrs);
}
