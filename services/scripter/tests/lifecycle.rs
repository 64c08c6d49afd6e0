//! Runaway scripts, callers that leave, and a full service: the service keeps serving.
use std::sync::atomic::Ordering;
use std::time::Duration;

use droidmesh_llm::testkit::MockResponse;
use droidmesh_proto::v1::agent_event;
use tokio_stream::StreamExt as _;
use tonic::Code;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn endless_loops_and_huge_allocations_are_stopped_and_the_service_keeps_serving() {
    let mut cfg = config();
    cfg.step_timeout_ms = 1_000;
    cfg.sandbox_memory_mb = 16;
    let rig = rig_with(
        cfg,
        vec![
            step("let kept = 'still here'; while (true) {}"),
            step("const hog = []; while (true) hog.push('x'.repeat(1 << 20))"),
            step("console.log(kept)"),
            reply("The session survived."),
            step("console.log(1 + 1)"),
            reply("Two."),
        ],
    )
    .await;
    let events = run(&rig, request("Misbehave.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].1.as_deref(),
        Some("timeout error: script stopped: it ran longer than 1s")
    );
    let memory = obs[1].1.as_deref().unwrap();
    assert!(
        memory.starts_with("memory error")
            && memory.ends_with("script stopped: out of memory (limit 16 MiB)"),
        "{memory}"
    );
    assert_eq!(obs[2], ("still here".to_string(), None));
    let (_, seen) = prompts(&rig, 1);
    assert!(
        seen.contains("timeout error: script stopped: it ran longer than 1s"),
        "{seen}"
    );
    assert!(finished(&events).success);

    let next = run(&rig, request("Add one and one.")).await;
    assert_eq!(observations(&next), vec![("2".to_string(), None)]);
    assert!(finished(&next).success);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_leaves_stops_the_run_and_its_requests() {
    let silent = silent().await;
    let mut cfg = config();
    cfg.step_timeout_ms = 60_000;
    cfg.http.timeout_ms = 60_000;
    cfg.max_concurrent_runs = 1;
    cfg.http.allow_hosts = vec![silent.addr.ip().to_string()];
    let rig = rig_with(
        cfg,
        vec![
            step(&format!("await fetch('http://{}/hang')", silent.addr)),
            step("while (true) {}"),
            step("console.log('after')"),
            reply("Done."),
        ],
    )
    .await;

    // First: a request that never gets an answer.
    let mut client = rig.client.clone();
    let mut stream = client
        .run_script(request("Wait."))
        .await
        .unwrap()
        .into_inner();
    while let Some(ev) = stream.next().await {
        if matches!(ev.unwrap().kind, Some(agent_event::Kind::Code(_))) {
            break;
        }
    }
    assert!(
        until(Duration::from_secs(10), || silent
            .accepted
            .load(Ordering::SeqCst)
            == 1)
        .await
    );
    // The slot is taken while the run lives.
    let busy = client
        .run_script(request("Again."))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(busy.code(), Code::ResourceExhausted);
    drop(stream);
    assert!(
        until(Duration::from_secs(10), || silent
            .closed
            .load(Ordering::SeqCst)
            == 1)
        .await,
        "the request in flight is cancelled when the caller leaves"
    );

    // Then: a script in an endless loop. The run's slot frees once it has stopped.
    let mut stream = free_slot(&rig).await;
    while let Some(ev) = stream.next().await {
        if matches!(ev.unwrap().kind, Some(agent_event::Kind::Code(_))) {
            break;
        }
    }
    drop(stream);
    let stream = free_slot(&rig).await;
    drop(stream);
}

/// Starts a run as soon as the service has a free slot (within 10 s).
async fn free_slot(rig: &Rig) -> tonic::Streaming<droidmesh_proto::v1::AgentEvent> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut client = rig.client.clone();
    loop {
        match client.run_script(request("Go.")).await {
            Ok(r) => return r.into_inner(),
            Err(s)
                if s.code() == Code::ResourceExhausted
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(s) => panic!("no free slot: {s}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_s_failures_are_shown_to_it_and_counted() {
    let rig = rig(vec![
        MockResponse::error(503, "overloaded"),
        reply(""),
        reply("Nothing to do."),
    ])
    .await;
    let events = run(&rig, request("Anything.")).await;
    let obs = observations(&events);
    assert!(
        obs[0]
            .1
            .as_deref()
            .unwrap()
            .starts_with("the model call failed: provider failed (http 503)")
    );
    assert!(
        obs[1]
            .1
            .as_deref()
            .unwrap()
            .starts_with("the reply was empty")
    );
    let f = finished(&events);
    assert!(f.success);
    assert_eq!(f.steps, 3);
}
