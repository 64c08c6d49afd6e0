//! Reasoning mode under a person's control, with scripted agents: human help with the lease
//! kept, the human timeout, goal changes, stops, and follow-up questions answered from the
//! conversation.
use droidmesh_proto::v1::{TaskRequest, TaskState, send_message_request, subgoal::Kind};

use super::harness::*;
use super::minds::{Act, Minds, accomplished, human, ok, plan, until};
use super::reasoning::*;

#[tokio::test(flavor = "multi_thread")]
async fn human_help_waits_for_a_reply_with_the_lease_kept() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let serial = shared.serials[13].clone();
    minds.plan(human("a QR code must be scanned"));
    minds.plan(accomplished(true, "logged in"));
    let id = submit(&stack, reasoning("Log in", &serial)).await;
    let t = wait_state(&stack, &id, TaskState::WaitingForHuman).await;
    assert_eq!(t.state, TaskState::WaitingForHuman as i32);
    assert_eq!(holder(&stack, &serial).await.as_deref(), Some(id.as_str()));
    assert!(
        send(
            &stack,
            &id,
            send_message_request::Kind::HumanReply("scanned it".into())
        )
        .await
    );
    let t = wait_state(&stack, &id, TaskState::Succeeded).await;
    assert_eq!(t.answer, "logged in");
    let plans = minds.plan_requests();
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("scanned it") && n.contains("QR code")),
        "{:?}",
        plans[1].notes
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_reply_fails_the_task_at_the_human_timeout() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let cfg = droidmesh_gateway::GatewayConfig {
        human_wait_ms: 300,
        ..test_config()
    };
    let stack = reasoning_stack(shared, &minds, cfg, false).await;
    minds.plan(human("a CAPTCHA"));
    let events = run_to_end(&stack, reasoning("Sign up", &shared.serials[14])).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error.contains("no human answered within 1 s"),
        "{}",
        done.error
    );
    assert!(done.error.contains("a CAPTCHA"));
    assert!(kinds(&events).contains(&"human_help"));
    assert!(holder(&stack, &shared.serials[14]).await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_goal_reaches_the_next_plan() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(Kind::Action, "Open Settings")]));
    minds.act(Act::Hold(ok("opened Settings")));
    minds.plan(accomplished(true, "Bluetooth is on"));
    let id = submit(&stack, reasoning("Turn on Wi-Fi", &shared.serials[15])).await;
    until("the executor call", || minds.act_requests().len() == 1).await;
    assert!(
        send(
            &stack,
            &id,
            send_message_request::Kind::ChangeGoal("Turn on Bluetooth instead".into())
        )
        .await
    );
    assert!(
        send(
            &stack,
            &id,
            send_message_request::Kind::Note("it is in Settings".into())
        )
        .await
    );
    minds.release.notify_one();
    let t = wait_state(&stack, &id, TaskState::Succeeded).await;
    let plans = minds.plan_requests();
    assert_eq!(plans[0].instruction, "Turn on Wi-Fi");
    assert_eq!(plans[1].instruction, "Turn on Bluetooth instead");
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("changed the goal"))
    );
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("it is in Settings"))
    );
    // The history so far carries over; the task shows its new goal.
    assert_eq!(plans[1].action_history.len(), 1);
    assert_eq!(t.request.unwrap().goal, "Turn on Bluetooth instead");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_ends_the_task_after_the_subgoal_in_progress() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let serial = shared.serials[16].clone();
    minds.plan(plan(&[
        (Kind::Action, "Open Settings"),
        (Kind::Action, "Tap Wi-Fi"),
    ]));
    minds.act(Act::Hold(ok("opened Settings")));
    let id = submit(&stack, reasoning("Turn on Wi-Fi", &serial)).await;
    until("the executor call", || minds.act_requests().len() == 1).await;
    assert!(
        send(
            &stack,
            &id,
            send_message_request::Kind::Stop("enough".into())
        )
        .await
    );
    minds.release.notify_one();
    let t = wait_state(&stack, &id, TaskState::Cancelled).await;
    assert_eq!(t.error, "enough");
    // The subgoal in progress finished and was recorded; no further plan was asked for.
    assert_eq!(minds.plan_requests().len(), 1);
    assert_eq!(t.steps, 1);
    assert!(holder(&stack, &serial).await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_question_is_answered_from_the_conversation() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let serial = shared.serials[17].clone();
    minds.plan(plan(&[(Kind::Action, "Tap the Wi-Fi switch")]));
    minds.act(Act::Result(ok("tapped Wi-Fi")));
    minds.plan(accomplished(true, "I turned on Wi-Fi"));
    let first = TaskRequest {
        conversation_id: "conv-1".into(),
        ..reasoning("Turn on Wi-Fi", &serial)
    };
    assert!(completed(&run_to_end(&stack, first).await).success);
    assert_eq!(minds.act_requests().len(), 1);

    minds.plan(droidmesh_proto::v1::PlanResponse {
        thought: "the user asks about the last run".into(),
        direct_response: Some("I turned on Wi-Fi.".into()),
        ..Default::default()
    });
    let follow_up = TaskRequest {
        conversation_id: "conv-1".into(),
        ..reasoning("What did you just turn on?", &serial)
    };
    let events = run_to_end(&stack, follow_up).await;
    let done = completed(&events);
    assert!(done.success && done.answered_directly, "{done:?}");
    assert_eq!(done.answer, "I turned on Wi-Fi.");
    assert_eq!(done.steps, 0);
    // The manager was given the conversation; no agent acted on the device.
    let plans = minds.plan_requests();
    let conv = &plans.last().unwrap().conversation;
    assert_eq!(conv.len(), 1);
    assert_eq!(conv[0].goal, "Turn on Wi-Fi");
    assert_eq!(conv[0].answer, "I turned on Wi-Fi");
    assert!(conv[0].success);
    assert_eq!(minds.act_requests().len(), 1);
    assert!(!kinds(&events).contains(&"handoff"));
    assert!(task(&stack, &events[0].task_id).await.answered_directly);
    // Another conversation starts empty.
    minds.plan(accomplished(true, "nothing to do"));
    let other = TaskRequest {
        conversation_id: "conv-2".into(),
        ..reasoning("Hello", &serial)
    };
    run_to_end(&stack, other).await;
    assert!(
        minds
            .plan_requests()
            .last()
            .unwrap()
            .conversation
            .is_empty()
    );
}
