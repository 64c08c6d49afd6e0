//! Tasks over HTTP: created, followed as Server-Sent Events, a follower that disconnects and
//! resumes with `Last-Event-ID` (no gaps, no repeats), `wait=true`, steering, cancelling and
//! keep-alives on an idle stream.
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::*;
use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_that_reconnects_with_last_event_id_gets_every_event_once() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    // 40 steps of 20 ms: still running when the first follower goes away.
    let id = submit(
        http,
        json!({"goal": "count:40", "device": shared.serials[0]}),
    )
    .await;
    let url = format!("{http}/v1/tasks/{id}/events");
    let mut first = SseReader::new(client().get(&url).send().await.unwrap());
    let mut seen = Vec::new();
    while seen.len() < 6 {
        seen.push(first.next_event().await.unwrap());
    }
    drop(first);
    wait_for_state(http, &id, "TASK_STATE_RUNNING").await;
    let last = seen.last().unwrap().id.unwrap();
    // An EventSource reconnects to the same URL with Last-Event-ID; it wins over fromSeq.
    let resumed = client()
        .get(format!("{url}?fromSeq=1"))
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .unwrap();
    seen.extend(SseReader::new(resumed).rest().await);
    let got = seqs(&seen);
    assert_eq!(
        got,
        (1..=seen.len() as u64).collect::<Vec<_>>(),
        "gaps or repeats"
    );
    let done = seen.last().unwrap();
    assert_eq!(done.event, "completed");
    assert_eq!(done.data["completed"]["success"], true);
    assert_eq!(done.data["completed"]["answer"], "counted to 40");
    assert_eq!(done.data["taskId"], id.as_str());

    // The whole log again with from_seq, and nothing more (204) after the last event.
    let all = SseReader::new(
        client()
            .get(format!("{url}?from_seq=1"))
            .send()
            .await
            .unwrap(),
    )
    .rest()
    .await;
    assert_eq!(seqs(&all), got);
    let end = client()
        .get(&url)
        .header("Last-Event-ID", got.len().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(end.status(), StatusCode::NO_CONTENT);

    let task = wait_for_state(http, &id, "TASK_STATE_SUCCEEDED").await;
    assert_eq!(task["lastSeq"], got.len().to_string());
    assert_eq!(task["request"]["goal"], "count:40");
    let (status, page) = get_json(&format!(
        "{http}/v1/tasks?states=TASK_STATE_SUCCEEDED&states=TASK_STATE_FAILED&pageSize=10"
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["summaries"][0]["id"], id.as_str());
    assert_eq!(page["summaries"][0]["success"], true);
    let (_, running) = get_json(&format!("{http}/v1/tasks?states=TASK_STATE_RUNNING")).await;
    assert_eq!(
        running,
        json!({}),
        "no running task: the fields at their defaults are left out"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_true_streams_the_run_and_a_client_that_leaves_cancels_it() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    let resp = client()
        .post(format!("{http}/v1/tasks?wait=true"))
        .json(&json!({"goal": "answer: 42", "device": shared.serials[1]}))
        .send()
        .await
        .unwrap();
    let events = SseReader::new(resp).rest().await;
    assert_eq!(seqs(&events), (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0].event, "status");
    assert_eq!(events.last().unwrap().data["completed"]["answer"], "42");

    let resp = client()
        .post(format!("{http}/v1/tasks?wait=true"))
        .json(&json!({"goal": "slow", "device": shared.serials[1]}))
        .send()
        .await
        .unwrap();
    let mut reader = SseReader::new(resp);
    let first = reader.next_event().await.unwrap();
    let id = first.data["taskId"].as_str().unwrap().to_owned();
    while reader.next_event().await.unwrap().event != "stepStarted" {}
    drop(reader);
    let task = wait_for_state(http, &id, "TASK_STATE_CANCELLED").await;
    assert!(
        task["error"].as_str().unwrap().contains("disconnected"),
        "{task}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_steered_and_cancelled_and_idle_streams_keep_alive() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    let c = client();
    // The task asks for a human and waits: its stream is idle but for keep-alive comments.
    let id = submit(http, json!({"goal": "help", "device": shared.serials[2]})).await;
    let mut reader = SseReader::new(
        c.get(format!("{http}/v1/tasks/{id}/events"))
            .send()
            .await
            .unwrap(),
    );
    while reader.next_event().await.unwrap().event != "humanHelp" {}
    let comment = reader.next().await.unwrap();
    assert!(comment.comment, "expected a keep-alive, got {comment:?}");
    let msg = |body: Value| {
        c.post(format!("{http}/v1/tasks/{id}/messages"))
            .json(&body)
            .send()
    };
    let resp = msg(json!({"taskId": "task-other", "humanReply": "x"}))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = msg(json!({"humanReply": "acct-7"})).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let reply: Value = resp.json().await.unwrap();
    assert_eq!(reply["accepted"], true, "{reply}");
    let rest = reader.rest().await;
    assert_eq!(
        rest.last().unwrap().data["completed"]["answer"],
        "used acct-7"
    );

    let id = submit(http, json!({"goal": "slow", "device": shared.serials[2]})).await;
    wait_for_state(http, &id, "TASK_STATE_RUNNING").await;
    let resp = c
        .post(format!("{http}/v1/tasks/{id}:cancel"))
        .json(&json!({"reason": "enough"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let task: Value = resp.json().await.unwrap();
    assert_eq!(task["state"], "TASK_STATE_CANCELLED", "{task}");
    // Cancelling again, without a body, answers the ended task.
    let resp = c
        .post(format!("{http}/v1/tasks/{id}:cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = msg(json!({"note": "too late"})).await.unwrap();
    let reply: Value = resp.json().await.unwrap();
    assert_eq!(reply["accepted"], Value::Null, "false is left out: {reply}");
}
