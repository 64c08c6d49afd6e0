//! Several gateway replicas on one PostgreSQL task store, each its own process beside the
//! device service and the agents: a task submitted on one is watched live on the other (its
//! events arrive while it runs, in order, to the completed event) and listed there; a replica
//! killed with SIGKILL while it runs a task is noticed by the survivor within the replica
//! timeout, which fails the task naming the lost replica and gives its phone's lease back long
//! before the lease would expire.
use super::*;
use droidmesh_gateway::persist::pg_testkit::{PgServer, require_postgres};
use droidmesh_proto::v1::ListTasksRequest;
use std::time::Instant;

/// The replica timeout the mesh runs with.
const REPLICA_TIMEOUT_MS: u64 = 3_000;

/// A mesh whose gateway keeps tasks in `pg`, and a second gateway replica on the same
/// database (its own port); returns the second one's process and client.
async fn two_replicas(
    pg: &PgServer,
    script: Vec<MockResponse>,
) -> (Mesh, Proc, GatewayClient<Channel>) {
    let gateway = format!(
        "store = \"{}\"\nreplica_timeout_ms = {REPLICA_TIMEOUT_MS}",
        pg.url()
    );
    // Leases that outlive the test unless someone gives them back.
    let env = [("DROIDMESH_GATEWAY__LEASE_TTL_MS", "120000")];
    let mesh = start_with(
        script,
        Extra {
            env: &env,
            gateway: &gateway,
            ..Extra::default()
        },
    )
    .await;
    let port = droidmesh_e2e::free_port().to_string();
    let cfg = mesh.dir.join("droidmesh.toml");
    let second = Proc::spawn_env(
        "gateway-2",
        &["--config", cfg.to_str().unwrap(), "serve", "gateway"],
        &[
            env[0],
            ("DROIDMESH_LISTEN__GATEWAY", &port),
            ("DROIDMESH_LISTEN__ADMIN", "0"),
        ],
    )
    .unwrap();
    let endpoint = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        if let Ok(mut g) = GatewayClient::connect(endpoint.clone()).await
            && g.list_tasks(ListTasksRequest::default()).await.is_ok()
        {
            break g;
        }
        assert!(
            Instant::now() < deadline,
            "the second gateway never answered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    (mesh, second, client)
}

fn watch_request(id: &str) -> WatchTaskRequest {
    WatchTaskRequest {
        task_id: id.into(),
        from_seq: 1,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_on_one_replica_is_watched_live_and_listed_on_the_other() {
    let test = "a_task_on_one_replica_is_watched_live_and_listed_on_the_other";
    if !require_adb(test) || !require_postgres(test) {
        return;
    }
    let pg = PgServer::start().unwrap();
    let (mesh, _second, mut b) = two_replicas(
        &pg,
        vec![
            reply("```javascript\nopen_app('Settings')\n```"),
            // The task is still running for a while after its first events.
            reply("```javascript\ncomplete(true, 'opened on one, watched on the other')\n```")
                .delay(Duration::from_secs(2)),
        ],
    )
    .await;
    let mut a = mesh.gateway.clone();
    let id = a
        .submit_task(TaskRequest {
            goal: "open settings".into(),
            device: mesh.serials[0].clone(),
            ..TaskRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let mut on_b = b.watch_task(watch_request(&id)).await.unwrap().into_inner();
    let mut seen = Vec::new();
    let mut running_when_seen = 0;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), on_b.next()).await {
        let ev = ev.unwrap();
        let state = a
            .get_task(GetTaskRequest {
                task_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .state();
        if state == TaskState::Running {
            running_when_seen += 1;
        }
        seen.push(ev);
    }
    let end = completed(&seen);
    assert!(end.success, "{end:?}");
    assert_eq!(end.answer, "opened on one, watched on the other");
    let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(
        running_when_seen >= 3,
        "only {running_when_seen} of {} events reached the other replica while the task ran",
        seen.len()
    );
    // The same log as the replica that ran it has.
    let mut on_a = a.watch_task(watch_request(&id)).await.unwrap().into_inner();
    let mut from_a = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), on_a.next()).await {
        from_a.push(ev.unwrap());
    }
    assert_eq!(from_a, seen);

    let task = b
        .get_task(GetTaskRequest {
            task_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state(), TaskState::Succeeded);
    assert_eq!(task.answer, "opened on one, watched on the other");
    let listed = b
        .list_tasks(ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .summaries;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].id.as_str(), listed[0].success),
        (id.as_str(), true)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_replica_s_task_fails_on_the_survivor_and_frees_its_phone() {
    let test = "a_killed_replica_s_task_fails_on_the_survivor_and_frees_its_phone";
    if !require_adb(test) || !require_postgres(test) {
        return;
    }
    let pg = PgServer::start().unwrap();
    let (mut mesh, _second, mut b) = two_replicas(
        &pg,
        // The model never answers while the replica that runs the task lives.
        vec![reply("```javascript\ncomplete(true, 'never')\n```").delay(Duration::from_secs(120))],
    )
    .await;
    let serial = mesh.serials[0].clone();
    let mut a = mesh.gateway.clone();
    let id = a
        .submit_task(TaskRequest {
            goal: "wait for the model".into(),
            device: serial.clone(),
            ..TaskRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .task_id;
    // Running, as the other replica sees it in the store.
    let mut on_b = b.watch_task(watch_request(&id)).await.unwrap().into_inner();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), on_b.next())
            .await
            .expect("the task never started")
            .unwrap()
            .unwrap();
        if matches!(ev.kind, Some(task_event::Kind::StepStarted(_))) {
            break;
        }
    }
    assert_eq!(
        lease_holder(&mesh, &serial).await.as_deref(),
        Some(id.as_str())
    );

    let pid = mesh.proc("gateway").id();
    mesh.proc("gateway").kill();
    let killed = Instant::now();

    // The watcher on the survivor sees the task end, with the reason.
    let mut rest = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), on_b.next()).await {
        rest.push(ev.unwrap());
    }
    let end = completed(&rest);
    let lost = format!("gateway replica gateway-{pid}-");
    assert!(!end.success && end.error.contains(&lost), "{end:?}");
    assert!(end.error.contains("stopped"), "{}", end.error);
    let failed_after = killed.elapsed();
    assert!(
        failed_after < Duration::from_millis(REPLICA_TIMEOUT_MS * 4),
        "the task failed {failed_after:?} after its replica was killed"
    );
    let task = b
        .get_task(GetTaskRequest {
            task_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state(), TaskState::Failed);
    assert!(task.error.contains(&lost), "{}", task.error);

    // Its phone is free again, long before the lease's two minutes.
    loop {
        let devices = b
            .list_devices(ListDevicesRequest {})
            .await
            .unwrap()
            .into_inner()
            .devices;
        let d = devices.iter().find(|d| d.serial == serial).unwrap();
        if d.lease.is_none() {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the lease of {id} was not given back: {:?}",
            d.lease
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
