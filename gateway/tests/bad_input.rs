//! Bad input to every public Gateway RPC, case by case: the status code and the words of the
//! message a client gets, and that nothing was created.
use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskRequest,
    WatchTaskRequest, send_message_request::Kind,
};
use tonic::Code;

use super::harness::*;

/// One bad input: its name, the code expected and a phrase the message must contain.
struct Case<T> {
    name: &'static str,
    input: T,
    code: Code,
    says: String,
}

fn case<T>(name: &'static str, input: T, code: Code, says: impl Into<String>) -> Case<T> {
    Case {
        name,
        input,
        code,
        says: says.into(),
    }
}

fn check(name: &str, got: Result<(), tonic::Status>, code: Code, says: &str) {
    let err = match got {
        Ok(()) => panic!("{name}: accepted"),
        Err(e) => e,
    };
    assert_eq!(err.code(), code, "{name}: {err:?}");
    assert!(
        err.message().contains(says),
        "{name}: '{}' does not say '{says}'",
        err.message()
    );
}

fn task_requests(serial: &str) -> Vec<Case<TaskRequest>> {
    let with = |f: fn(&mut TaskRequest)| {
        let mut r = request("answer: x", serial);
        f(&mut r);
        r
    };
    let limit = droidmesh_gateway::GatewayConfig::default().max_goal_bytes;
    let too_long = "g".repeat(limit + 1);
    vec![
        case(
            "empty goal",
            request("", serial),
            Code::InvalidArgument,
            "goal is empty",
        ),
        case(
            "blank goal",
            request(" \n\t", serial),
            Code::InvalidArgument,
            "goal is empty",
        ),
        case(
            "oversized goal",
            request(&too_long, serial),
            Code::InvalidArgument,
            format!("goal is {} bytes; at most {limit}", limit + 1),
        ),
        case(
            "oversized request",
            with(|r| r.app_card = "c".repeat(300 * 1024)),
            Code::InvalidArgument,
            "gateway.max_request_bytes",
        ),
        case(
            "zero steps",
            with(|r| r.max_steps = Some(0)),
            Code::InvalidArgument,
            "max_steps must be between 1 and 500, got 0",
        ),
        case(
            "too many steps",
            with(|r| r.max_steps = Some(501)),
            Code::InvalidArgument,
            "got 501",
        ),
        case(
            "unknown mode",
            with(|r| r.mode = 7),
            Code::InvalidArgument,
            "mode 7 is not a known Mode",
        ),
        case(
            "schema not JSON",
            with(|r| r.output_schema = Some("{".into())),
            Code::InvalidArgument,
            "output_schema is not JSON",
        ),
        case(
            "schema not an object",
            with(|r| r.output_schema = Some("[1]".into())),
            Code::InvalidArgument,
            "must be a JSON Schema object",
        ),
        case(
            "long conversation id",
            with(|r| r.conversation_id = "c".repeat(129)),
            Code::InvalidArgument,
            "conversation_id is 129 characters long",
        ),
        case(
            "unknown device",
            request("answer: x", "no-such-phone-9"),
            Code::NotFound,
            "no-such-phone-9",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_rpc_refuses_bad_input_with_a_code_and_a_reason() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    let serial = &shared.serials[19];

    for c in task_requests(serial) {
        let got = g.submit_task(c.input.clone()).await.map(drop);
        check(&format!("SubmitTask: {}", c.name), got, c.code, &c.says);
        let got = g.run_task(c.input).await.map(drop);
        check(&format!("RunTask: {}", c.name), got, c.code, &c.says);
    }
    let listed = g
        .list_tasks(ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.summaries.is_empty(), "{listed:?}");

    // A task to point at: ended, so its log is complete.
    let events = collect(
        g.run_task(request("answer: here", serial))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let id = events[0].task_id.clone();
    let last = events.last().unwrap().seq;
    let long_id = "t".repeat(300);
    let ids = [
        ("empty id", "", Code::InvalidArgument, "task_id is empty"),
        (
            "unknown id",
            "task-nope",
            Code::NotFound,
            "no task with id 'task-nope'",
        ),
        (
            "oversized id",
            long_id.as_str(),
            Code::InvalidArgument,
            "task_id is 300 bytes",
        ),
    ];
    for (name, task_id, code, says) in ids {
        let got = g
            .get_task(GetTaskRequest {
                task_id: task_id.into(),
            })
            .await
            .map(drop);
        check(&format!("GetTask: {name}"), got, code, says);
        let got = g
            .cancel_task(CancelTaskRequest {
                task_id: task_id.into(),
                reason: String::new(),
            })
            .await
            .map(drop);
        check(&format!("CancelTask: {name}"), got, code, says);
        let got = g
            .watch_task(WatchTaskRequest {
                task_id: task_id.into(),
                from_seq: 1,
            })
            .await
            .map(drop);
        check(&format!("WatchTask: {name}"), got, code, says);
        let got = g
            .send_message(SendMessageRequest {
                task_id: task_id.into(),
                kind: Some(Kind::Note("hi".into())),
            })
            .await
            .map(drop);
        check(&format!("SendMessage: {name}"), got, code, says);
    }

    let too_long = "n".repeat(droidmesh_gateway::GatewayConfig::default().max_goal_bytes + 1);
    let messages = vec![
        case("no kind", None, Code::InvalidArgument, "message is empty"),
        case(
            "empty goal change",
            Some(Kind::ChangeGoal("  ".into())),
            Code::InvalidArgument,
            "change_goal is empty",
        ),
        case(
            "oversized note",
            Some(Kind::Note(too_long.clone())),
            Code::InvalidArgument,
            format!("note is {} bytes", too_long.len()),
        ),
        case(
            "oversized reply",
            Some(Kind::HumanReply(too_long.clone())),
            Code::InvalidArgument,
            "human_reply is",
        ),
    ];
    for c in messages {
        let got = g
            .send_message(SendMessageRequest {
                task_id: id.clone(),
                kind: c.input,
            })
            .await
            .map(drop);
        check(&format!("SendMessage: {}", c.name), got, c.code, &c.says);
    }
    let got = g
        .cancel_task(CancelTaskRequest {
            task_id: id.clone(),
            reason: too_long.clone(),
        })
        .await
        .map(drop);
    check(
        "CancelTask: oversized reason",
        got,
        Code::InvalidArgument,
        "reason is",
    );
    for from_seq in [last + 2, u64::MAX] {
        let got = g
            .watch_task(WatchTaskRequest {
                task_id: id.clone(),
                from_seq,
            })
            .await
            .map(drop);
        check(
            &format!("WatchTask: from_seq {from_seq}"),
            got,
            Code::OutOfRange,
            &format!("its last event is seq {last}"),
        );
    }

    let lists = vec![
        case(
            "unknown state",
            ListTasksRequest {
                states: vec![9],
                ..Default::default()
            },
            Code::InvalidArgument,
            "states: 9 is not a known TaskState",
        ),
        case(
            "forged page token",
            ListTasksRequest {
                page_token: "zz".into(),
                ..Default::default()
            },
            Code::InvalidArgument,
            "page_token 'zz' is not one this gateway gave",
        ),
    ];
    for c in lists {
        let got = g.list_tasks(c.input).await.map(drop);
        check(&format!("ListTasks: {}", c.name), got, c.code, &c.says);
    }
    // A page size beyond the most a page holds is read as that most, not refused.
    let page = g
        .list_tasks(ListTasksRequest {
            page_size: u32::MAX,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.summaries.len(), 1);
}
