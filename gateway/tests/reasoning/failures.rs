//! What goes wrong: agents that are down, die or do not answer in time, unusable manager
//! replies, the step limit, a dead manager, subgoals no agent takes, and refused requests.
use droidmesh_proto::v1::subgoal::Kind;
use tonic::Code;

use super::*;
use crate::minds::{self, Act, Minds, Script, accomplished, ok, plan};

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_is_down_or_dies_is_an_observation_for_the_manager() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), true).await;
    minds.plan(plan(&[(Kind::Script, "Fetch the rate")]));
    minds.plan(accomplished(false, "the scripter is down"));
    let events = run_to_end(&stack, reasoning("Get the rate", &shared.serials[18])).await;
    assert_eq!(completed(&events).error, "the scripter is down");
    let plans = minds.plan_requests();
    let seen = &plans[1].action_history[0];
    assert!(!seen.success);
    assert_eq!(seen.agent, "scripter");
    assert!(
        seen.feedback.contains("scripter at http://127.0.0.1:")
            && seen.feedback.contains("could not be reached"),
        "{}",
        seen.feedback
    );
    assert!(plans[1].last_handoff_result.contains("scripter failed"));

    // A scripter killed mid-run: its stream breaks; the manager is told.
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(Kind::Script, "Fetch the rate")]));
    minds.script(Script::Die);
    minds.plan(accomplished(false, "gave up"));
    let events = run_to_end(&stack, reasoning("Get the rate", &shared.serials[18])).await;
    assert!(!completed(&events).success);
    let plans = minds.plan_requests();
    let seen = &plans[1].action_history[0];
    assert!(
        seen.feedback.contains("broke off") && seen.feedback.contains("went away"),
        "{}",
        seen.feedback
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_runs_out_of_steps_names_the_failure_of_its_last_subgoal() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), true).await;
    let req = |goal: &str| TaskRequest {
        max_steps: Some(2),
        ..reasoning(goal, &shared.serials[29])
    };
    // Every subgoal goes to a scripter that is down.
    *minds.plan_fallback.lock().unwrap() = Some(plan(&[(Kind::Script, "Fetch the rate")]));
    let events = run_to_end(&stack, req("Get the rate")).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error.starts_with("reached the step limit (2) before the goal was completed; every one of the 2 subgoals failed; the last (scripter, \"Fetch the rate\"): ")
            && done.error.contains("scripter at http://127.0.0.1:")
            && done.error.contains("could not be reached"),
        "{}",
        done.error
    );
    // One subgoal done, the last one failed: the last failure is named, not "every one".
    minds.plan(plan(&[(Kind::Action, "Scroll down")]));
    minds.act(Act::Result(ok("scrolled")));
    let events = run_to_end(&stack, req("Scroll, then get the rate")).await;
    let error = &completed(&events).error;
    assert!(
        error.contains("step limit (2) before the goal was completed; the last subgoal failed (scripter, \"Fetch the rate\"): scripter at"),
        "{error}"
    );
    // A last subgoal that succeeded: the limit alone is the cause.
    *minds.plan_fallback.lock().unwrap() = Some(plan(&[(Kind::Action, "Scroll down")]));
    for _ in 0..2 {
        minds.act(Act::Result(ok("scrolled")));
    }
    let events = run_to_end(&stack, req("Find the end")).await;
    assert_eq!(
        completed(&events).error,
        "reached the step limit (2) before the goal was completed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unusable_manager_replies_are_shown_to_it_then_fail_the_task() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    for _ in 0..3 {
        minds.plan(minds::unusable());
    }
    let events = run_to_end(&stack, reasoning("Do it", &shared.serials[19])).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error.contains("could not be used 3 times in a row"),
        "{}",
        done.error
    );
    let plans = minds.plan_requests();
    assert_eq!(plans.len(), 3);
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("could not be used") && n.contains("no tags"))
    );
    assert!(minds.act_requests().is_empty());
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "observation")
            .count(),
        3
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_step_limit_bounds_the_loop_and_a_dead_manager_fails_the_task() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    *minds.plan_fallback.lock().unwrap() = Some(plan(&[(Kind::Action, "Scroll down")]));
    for _ in 0..3 {
        minds.act(Act::Result(ok("scrolled")));
    }
    let req = TaskRequest {
        max_steps: Some(2),
        ..reasoning("Find the end", &shared.serials[20])
    };
    let events = run_to_end(&stack, req).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(done.error.contains("step limit (2)"), "{}", done.error);
    assert_eq!(minds.act_requests().len(), 2);

    // A manager with nothing to say (INTERNAL) fails the task, naming it.
    *minds.plan_fallback.lock().unwrap() = None;
    let events = run_to_end(&stack, reasoning("Anything", &shared.serials[20])).await;
    let done = completed(&events);
    assert!(
        done.error
            .starts_with("the manager could not plan: manager failed"),
        "{}",
        done.error
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_reasoning_requests_are_refused() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let mut g = stack.gateway.clone();
    let long = TaskRequest {
        conversation_id: "c".repeat(200),
        ..reasoning("Hi", &shared.serials[21])
    };
    let e = g.submit_task(long).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("conversation_id"), "{}", e.message());
    let e = g
        .submit_task(TaskRequest {
            mode: 7,
            ..reasoning("Hi", &shared.serials[21])
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(minds.plan_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subgoal_no_agent_takes_is_sent_back_to_the_manager() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(Kind::Unspecified, "Think about it")]));
    minds.plan(plan(&[(Kind::Done, "DONE")]));
    minds.plan(accomplished(true, "nothing needed doing"));
    let events = run_to_end(&stack, reasoning("Relax", &shared.serials[22])).await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.steps, 0);
    assert!(minds.act_requests().is_empty());
    let plans = minds.plan_requests();
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("Think about it") && n.contains("no kind")),
        "{:?}",
        plans[1].notes
    );
    assert!(
        plans[2]
            .notes
            .iter()
            .any(|n| n.contains("DONE") && n.contains("<request_accomplished>")),
        "{:?}",
        plans[2].notes
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_does_not_answer_in_time_is_a_failed_subgoal() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let cfg = droidmesh_gateway::GatewayConfig {
        agent_call_timeout_ms: 300,
        ..test_config()
    };
    let stack = reasoning_stack(shared, &minds, cfg, false).await;
    minds.plan(plan(&[(Kind::Action, "Open Settings")]));
    // Held and never released: the executor never answers.
    minds.act(Act::Hold(ok("too late")));
    minds.plan(accomplished(false, "the executor is stuck"));
    let events = run_to_end(&stack, reasoning("Open Settings", &shared.serials[23])).await;
    assert_eq!(completed(&events).error, "the executor is stuck");
    let seen = &minds.plan_requests()[1].action_history[0];
    assert!(!seen.success);
    assert_eq!(
        seen.feedback,
        "executor did not answer in time: no answer within 300 ms"
    );
    assert!(holder(&stack, &shared.serials[23]).await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_naming_a_secret_the_executor_lacks_fails_before_its_first_plan() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    *minds.held_secrets.lock().unwrap() = vec!["pin".into()];
    let stack = reasoning_stack(shared, &minds, test_config(), true).await;
    let req = |ids: &[&str]| TaskRequest {
        secret_ids: ids.iter().map(|s| s.to_string()).collect(),
        ..reasoning("Type the PIN", &shared.serials[30])
    };
    let events = run_to_end(&stack, req(&["PIN", "Card"])).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error
            .contains("secret 'Card' is not held by this executor"),
        "{}",
        done.error
    );
    assert!(minds.plan_requests().is_empty(), "the manager was asked");
    // Every id held: the task goes on to plan.
    minds.plan(accomplished(true, "typed"));
    let events = run_to_end(&stack, req(&["PIN"])).await;
    assert!(completed(&events).success, "{:?}", completed(&events));
    assert_eq!(minds.plan_requests().len(), 1);
    assert_eq!(
        *minds.secret_checks.lock().unwrap(),
        [
            vec!["PIN".to_owned(), "Card".to_owned()],
            vec!["PIN".to_owned()]
        ]
    );

    // An executor that never answers the check is not waited for past agent_call_timeout_ms
    // (the same phone, after the tasks above: one test, so they do not contend for it).
    let minds = Minds::new();
    *minds.secret_checks_hang.lock().unwrap() = true;
    let cfg = droidmesh_gateway::GatewayConfig {
        agent_call_timeout_ms: 300,
        ..test_config()
    };
    let stack = reasoning_stack(shared, &minds, cfg, true).await;
    minds.plan(accomplished(true, "typed"));
    let req = TaskRequest {
        secret_ids: vec!["pin".into()],
        ..reasoning("Type the PIN", &shared.serials[30])
    };
    let events = run_to_end(&stack, req).await;
    assert!(completed(&events).success, "{:?}", completed(&events));
    assert_eq!(minds.plan_requests().len(), 1);
}
