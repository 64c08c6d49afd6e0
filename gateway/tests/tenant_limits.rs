//! Per-tenant limits through the public API: running tasks and tasks per minute, refused
//! RESOURCE_EXHAUSTED with `retry-after` on gRPC and 429 with `Retry-After` over HTTP.
use std::time::Duration;

use tonic::Code;

use super::harness::*;
use super::tenants::{ACME, GLOBEX, cancel, entry, with_key, write_keys};

/// A gateway config whose keys file (in the returned directory) holds ACME's and GLOBEX's keys.
fn two_tenants() -> (tempfile::TempDir, droidmesh_gateway::GatewayConfig) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    write_keys(
        &path,
        &[entry(ACME, "acme", &[]), entry(GLOBEX, "globex", &[])],
    );
    let mut cfg = test_config();
    cfg.auth.keys_file = Some(path);
    (dir, cfg)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_over_its_limits_is_told_when_to_retry() {
    let Some(shared) = shared() else { return };
    let (_keys, mut cfg) = two_tenants();
    cfg.auth.max_running_per_tenant = 1;
    cfg.auth.tasks_per_minute_per_tenant = 2;
    let stack = stack_with(shared, None, cfg).await;
    let mut g = stack.gateway.clone();
    let first = g
        .submit_task(with_key(ACME, request("slow work", &shared.serials[4])))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let e = g
        .submit_task(with_key(ACME, request("slow work", &shared.serials[5])))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("1 tasks running"), "{}", e.message());
    assert_eq!(e.metadata().get("retry-after").unwrap(), "5");
    // Another tenant is not held back.
    let theirs = g
        .submit_task(with_key(GLOBEX, request("slow work", &shared.serials[5])))
        .await
        .unwrap()
        .into_inner()
        .task_id;

    cancel(&mut g, ACME, first).await;
    // Once the run is over its place is given back: the second of the minute is admitted.
    let mut second = None;
    for _ in 0..200 {
        match g
            .submit_task(with_key(ACME, request("answer: two", &shared.serials[6])))
            .await
        {
            Ok(r) => {
                second = Some(r.into_inner().task_id);
                break;
            }
            Err(e) => assert!(e.message().contains("tasks running"), "{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = second.expect("the cancelled task's place was not given back within 10 s");
    // The third task of the minute is refused however few run, with the wait in seconds.
    let mut refused = None;
    for _ in 0..200 {
        let e = g
            .submit_task(with_key(ACME, request("answer: three", &shared.serials[6])))
            .await
            .unwrap_err();
        if e.message().contains("tasks in the last minute") {
            refused = Some(e);
            break;
        }
        assert!(e.message().contains("tasks running"), "{e:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = refused.expect("the per-minute limit was never reached");
    assert_eq!(e.code(), Code::ResourceExhausted);
    let after: u64 = e
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&after), "{after}");
    // The HTTP face says the same with a 429 and Retry-After.
    let resp = super::http::client()
        .post(format!("{}/v1/tasks", stack.http))
        .header("authorization", format!("Bearer {ACME}"))
        .json(&serde_json::json!({"goal": "answer: four"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&after), "{after}");
    assert!(second.starts_with("task-"), "{second}");
    cancel(&mut g, GLOBEX, theirs).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_refused_for_a_busy_device_does_not_use_one_of_the_minutes_tasks() {
    let Some(shared) = shared() else { return };
    let (_keys, mut cfg) = two_tenants();
    cfg.auth.tasks_per_minute_per_tenant = 1;
    let stack = stack_with(shared, None, cfg).await;
    let mut g = stack.gateway.clone();
    let (busy, free) = (&shared.serials[25], &shared.serials[26]);
    let theirs = g
        .submit_task(with_key(GLOBEX, request("slow work", busy)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let e = g
        .submit_task(with_key(ACME, request("answer: one", busy)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    // Nothing was created: the minute's one task is still to be had. Once it has run, it
    // still counts.
    let events = collect(
        g.run_task(with_key(ACME, request("answer: one", free)))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert!(!events.is_empty());
    let e = g
        .submit_task(with_key(ACME, request("answer: two", free)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(
        e.message().contains("1 tasks in the last minute"),
        "{}",
        e.message()
    );
    cancel(&mut g, GLOBEX, theirs).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_whose_tasks_used_the_days_model_tokens_is_refused_until_tomorrow() {
    let Some(shared) = shared() else { return };
    let (_keys, mut cfg) = two_tenants();
    cfg.auth.model_tokens_per_day_per_tenant = 200;
    let stack = stack_with(shared, None, cfg).await;
    let mut g = stack.gateway.clone();
    // Each "answer" task of the scripted executor reports 100 input + 20 output tokens.
    for goal in ["answer: one", "answer: two"] {
        let events = collect(
            g.run_task(with_key(ACME, request(goal, &shared.serials[7])))
                .await
                .unwrap()
                .into_inner(),
        )
        .await;
        assert!(!events.is_empty());
    }
    // The count is read from the task store at most a second old: tasks that use no tokens
    // are admitted until it catches up, then the tenant is refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "240 tokens of a 200-token day were never refused"
        );
        match g
            .submit_task(with_key(ACME, request("count: 1", &shared.serials[7])))
            .await
        {
            Err(e) if e.code() == Code::ResourceExhausted => break e,
            Err(e) if e.code() == Code::FailedPrecondition => {}
            Err(e) => panic!("{e:?}"),
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        refused.message().contains("used 240 model tokens"),
        "{}",
        refused.message()
    );
    assert!(
        refused.message().contains("00:00 UTC"),
        "{}",
        refused.message()
    );
    let after: u64 = refused
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&after), "{after}");
    let resp = super::http::client()
        .post(format!("{}/v1/tasks", stack.http))
        .header("authorization", format!("Bearer {ACME}"))
        .json(&serde_json::json!({"goal": "answer: three"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    // Another tenant has its own day.
    collect(
        g.run_task(with_key(
            GLOBEX,
            request("answer: theirs", &shared.serials[7]),
        ))
        .await
        .unwrap()
        .into_inner(),
    )
    .await;
}

/// Two gateway replicas on one PostgreSQL store count a tenant's tasks together: a task
/// running on one takes the tenant's only place on the other, and the minute's tasks are
/// counted across both.
#[tokio::test(flavor = "multi_thread")]
async fn limits_hold_across_gateway_replicas_sharing_a_postgresql_store() {
    use droidmesh_gateway::persist::pg_testkit::{PgServer, require_postgres};
    let Some(shared) = shared() else { return };
    if !require_postgres("limits_hold_across_gateway_replicas_sharing_a_postgresql_store") {
        return;
    }
    let pg = PgServer::start().unwrap();
    let (_keys, mut cfg) = two_tenants();
    cfg.store = pg.url();
    cfg.auth.max_running_per_tenant = 1;
    cfg.auth.tasks_per_minute_per_tenant = 2;
    let a = stack_with(shared, None, cfg.clone()).await;
    let b = stack_with(shared, None, cfg).await;
    let (mut a, mut b) = (a.gateway.clone(), b.gateway.clone());
    let (on_a, on_b) = (&shared.serials[27], &shared.serials[28]);
    let first = a
        .submit_task(with_key(ACME, request("slow work", on_a)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let e = b
        .submit_task(with_key(ACME, request("slow work", on_b)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("1 tasks running"), "{}", e.message());
    assert_eq!(e.metadata().get("retry-after").unwrap(), "5");
    // Refused before anything was created: the phone leased for it was given back.
    let theirs = b
        .submit_task(with_key(GLOBEX, request("slow work", on_b)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    cancel(&mut b, GLOBEX, theirs).await;

    cancel(&mut a, ACME, first).await;
    // Once the first has ended (in the store), the other replica admits the tenant's second.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match b
            .submit_task(with_key(ACME, request("answer: two", on_b)))
            .await
        {
            Ok(_) => break,
            Err(e) => assert!(
                e.message().contains("tasks running") || e.code() == Code::FailedPrecondition,
                "{e:?}"
            ),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled task's place was not given back across replicas within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The third of the minute is refused on the first replica, which created only one.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let e = loop {
        let e = a
            .submit_task(with_key(ACME, request("answer: three", on_a)))
            .await
            .unwrap_err();
        if e.message().contains("tasks in the last minute") {
            break e;
        }
        assert!(e.message().contains("tasks running"), "{e:?}");
        assert!(
            std::time::Instant::now() < deadline,
            "the per-minute limit was never reached across replicas"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(
        e.message().contains("2 tasks in the last minute"),
        "{}",
        e.message()
    );
}
