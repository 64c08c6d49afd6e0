//! A task's scripts name the task as their affinity key, so a balanced channel keeps them on
//! the scripter replica that holds the task's files.
use droidmesh_proto::v1::subgoal::Kind;

use super::*;
use crate::minds::{Minds, Script, accomplished, ok, plan};

#[tokio::test(flavor = "multi_thread")]
async fn every_script_of_a_task_carries_the_task_id_as_its_affinity_key() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(
        Kind::Script,
        "Save the forecast to forecast.json",
    )]));
    minds.script(Script::Finish(ok("saved"), "Saved.".into()));
    minds.plan(plan(&[(Kind::Script, "Read forecast.json back")]));
    minds.script(Script::Finish(ok("read"), "Sunny.".into()));
    minds.plan(accomplished(true, "The forecast is saved"));

    let events = run_to_end(&stack, reasoning("Save the forecast", &shared.serials[26])).await;
    assert!(completed(&events).success);
    let task_id = events[0].task_id.clone();
    let keys = minds.script_affinity.lock().unwrap().clone();
    assert_eq!(keys, vec![Some(task_id.clone()), Some(task_id)]);
}
