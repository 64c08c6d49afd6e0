//! What one tenant's refusals say about another: a secret id the key does not list is refused
//! before any task exists, in the same words whether another tenant has that secret or nobody
//! does; a device another tenant's task holds is "busy", with no task id, while the tenant
//! whose task holds it is told which of its tasks.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use droidmesh_gateway::auth::key_entry;
use droidmesh_proto::v1::executor_service_server::{ExecutorService, ExecutorServiceServer};
use droidmesh_proto::v1::{
    AcquireLeaseRequest, AgentEvent, AgentFinished, CodeActInput, ExecuteSubgoalRequest,
    ExecuteSubgoalResponse, GetTaskRequest, LeaseRef, ListDevicesRequest, ListTasksRequest,
    ReleaseLeaseRequest, TaskState, agent_event, code_act_input, task_event,
};
use tokio_stream::StreamExt;
use tonic::{Code, Request, Response, Status, Streaming};

use super::harness::*;
use super::tenants::{ACME, GLOBEX, cancel, entry, wait_running, with_key, write_keys};

/// An executor that records the secret ids of every run it is asked to start, and ends each
/// run at once.
#[derive(Clone, Default)]
struct Recording {
    starts: Arc<Mutex<Vec<Vec<String>>>>,
}

type Events =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<AgentEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ExecutorService for Recording {
    type RunCodeActStream = Events;

    async fn run_code_act(
        &self,
        r: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<Events>, Status> {
        let mut input = r.into_inner();
        let Some(Ok(CodeActInput {
            kind: Some(code_act_input::Kind::Start(start)),
        })) = input.next().await
        else {
            return Err(Status::invalid_argument("first message must be start"));
        };
        self.starts.lock().unwrap().push(start.secret_ids);
        let done = AgentEvent {
            kind: Some(agent_event::Kind::Finished(AgentFinished {
                agent: "codeact".into(),
                success: true,
                answer: "typed".into(),
                steps: 1,
                ..AgentFinished::default()
            })),
        };
        Ok(Response::new(Box::pin(tokio_stream::iter([Ok(done)]))))
    }

    async fn check_secrets(
        &self,
        _r: Request<droidmesh_proto::v1::CheckSecretsRequest>,
    ) -> Result<Response<droidmesh_proto::v1::CheckSecretsResponse>, Status> {
        Err(Status::unimplemented("not asked of this double"))
    }

    async fn execute_subgoal(
        &self,
        _r: Request<ExecuteSubgoalRequest>,
    ) -> Result<Response<ExecuteSubgoalResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

fn with_secrets(goal: &str, serial: &str, ids: &[&str]) -> droidmesh_proto::v1::TaskRequest {
    let mut r = request(goal, serial);
    r.secret_ids = ids.iter().map(|s| s.to_string()).collect();
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_id_the_key_does_not_list_is_refused_as_an_unknown_one_before_anything_runs() {
    let Some(shared) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    let acme = key_entry(ACME, "acme", &[], &["pin".into()], None).unwrap();
    write_keys(&path, &[acme, entry(GLOBEX, "globex", &[])]);
    let mut cfg = test_config();
    cfg.auth.keys_file = Some(path);
    // One task a minute: a refused request must not use it up.
    cfg.auth.tasks_per_minute_per_tenant = 1;
    let executor = Recording::default();
    let executor_ep = serve(
        tonic::transport::Server::builder()
            .add_service(ExecutorServiceServer::new(executor.clone())),
    )
    .await;
    let stack = stack_with(shared, Some(executor_ep), cfg).await;
    let mut g = stack.gateway.clone();
    let serial = &shared.serials[8];

    let refused = |key: &'static str, ids: &'static [&'static str]| {
        let mut g = stack.gateway.clone();
        let req = with_key(key, with_secrets("answer: typed", serial, ids));
        async move { g.submit_task(req).await.unwrap_err() }
    };
    let foreign = refused(GLOBEX, &["pin"]).await;
    let unknown = refused(GLOBEX, &["nope"]).await;
    for e in [&foreign, &unknown] {
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    }
    assert_eq!(
        foreign.message(),
        unknown.message().replace("nope", "pin"),
        "another tenant's secret must read as an unknown one"
    );
    assert!(
        foreign.message().contains("'pin'")
            && foreign.message().contains("not a secret this key may use"),
        "{}",
        foreign.message()
    );
    // Named as the caller wrote it, among ids it may use.
    let e = refused(ACME, &["PIN", "Mail_Password"]).await;
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("'Mail_Password'"), "{}", e.message());

    // Over HTTP: the same refusal, 400.
    let resp = super::http::client()
        .post(format!("{}/v1/tasks", stack.http))
        .header("authorization", format!("Bearer {GLOBEX}"))
        .json(&serde_json::json!({"goal": "answer: typed", "device": serial, "secretIds": ["pin"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "INVALID_ARGUMENT", "{body}");
    assert_eq!(body["message"], foreign.message(), "{body}");

    // Nothing was created or run, and nothing counted against the tenants' minute.
    let listed = g
        .list_tasks(with_key(GLOBEX, ListTasksRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .summaries;
    assert!(listed.is_empty(), "{listed:?}");
    assert!(executor.starts.lock().unwrap().is_empty());

    // The key's own secret, in any case, reaches the executor.
    let events = collect(
        g.run_task(with_key(
            ACME,
            with_secrets("answer: typed", serial, &["PIN"]),
        ))
        .await
        .unwrap()
        .into_inner(),
    )
    .await;
    assert!(completed(&events).success, "{events:?}");
    assert_eq!(*executor.starts.lock().unwrap(), [vec!["PIN".to_owned()]]);
    // GLOBEX's one task of the minute is still there to take.
    g.submit_task(with_key(
        GLOBEX,
        request("answer: mine", &shared.serials[10]),
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_another_tenant_holds_is_busy_and_the_holder_is_named_only_to_its_tenant() {
    let Some(shared) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    write_keys(
        &path,
        &[entry(ACME, "acme", &[]), entry(GLOBEX, "globex", &[])],
    );
    let mut cfg = test_config();
    cfg.auth.keys_file = Some(path);
    let stack = stack_with(shared, None, cfg).await;
    let mut g = stack.gateway.clone();
    let serial = shared.serials[9].clone();
    let held = g
        .submit_task(with_key(ACME, request("slow work", &serial)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_running(&stack, ACME, &held).await;

    let theirs = g
        .submit_task(with_key(GLOBEX, request("slow work", &serial)))
        .await
        .unwrap_err();
    assert_eq!(theirs.code(), Code::FailedPrecondition, "{theirs:?}");
    let m = theirs.message();
    assert!(m.contains(&serial) && m.contains("busy"), "{m}");
    assert!(!m.contains(&held) && !m.contains("task-"), "{m}");
    let ours = g
        .submit_task(with_key(ACME, request("slow work", &serial)))
        .await
        .unwrap_err();
    assert_eq!(ours.code(), Code::FailedPrecondition, "{ours:?}");
    assert!(ours.message().contains(&held), "{}", ours.message());

    // Over HTTP, the same words.
    let resp = super::http::client()
        .post(format!("{}/v1/tasks", stack.http))
        .header("authorization", format!("Bearer {GLOBEX}"))
        .json(&serde_json::json!({"goal": "slow work", "device": serial}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["message"], m, "{body}");

    // A task queued for the device says it waits, and for what, in the same terms.
    let mut queued = request("answer: later", &serial);
    queued.wait_for_device = true;
    let waiting = g
        .submit_task(with_key(GLOBEX, queued))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let detail = pending_detail(&stack, GLOBEX, &waiting).await;
    assert!(
        detail.contains("busy") && detail.contains(&serial),
        "{detail}"
    );
    assert!(
        !detail.contains(&held) && !detail.contains("task-"),
        "{detail}"
    );
    cancel(&mut g, GLOBEX, waiting).await;

    // The device list shows the device leased, and whose task only to that tenant.
    let lease_of = |key: &'static str| {
        let mut g = stack.gateway.clone();
        let serial = serial.clone();
        async move {
            g.list_devices(with_key(key, ListDevicesRequest {}))
                .await
                .unwrap()
                .into_inner()
                .devices
                .into_iter()
                .find(|d| d.serial == serial)
                .and_then(|d| d.lease)
        }
    };
    let seen = lease_of(GLOBEX)
        .await
        .expect("the device is listed as leased");
    assert_eq!(
        (seen.holder.as_str(), seen.expires_at_ms),
        ("", 0),
        "{seen:?}"
    );
    assert_eq!(lease_of(ACME).await.unwrap().holder, held);

    // Every other device leased by someone outside the gateway: a task for any device is
    // refused saying every one is busy, and names a holder only to the tenant it belongs to.
    let mut d = stack.device.clone();
    let mut others = Vec::new();
    for s in shared.serials.iter().filter(|s| **s != serial) {
        let lease = d
            .acquire_lease(AcquireLeaseRequest {
                serial: s.clone(),
                holder: "someone-else".into(),
                ttl_ms: 120_000,
            })
            .await
            .unwrap()
            .into_inner();
        others.push(lease);
    }
    let any = |key: &'static str| {
        let mut g = stack.gateway.clone();
        async move {
            g.submit_task(with_key(key, request("slow work", "")))
                .await
                .unwrap_err()
        }
    };
    let e = any(GLOBEX).await;
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().starts_with(&format!(
            "every device is busy (all {FLEET} leased); set wait_for_device"
        )),
        "{}",
        e.message()
    );
    let e = any(ACME).await;
    assert!(
        e.message().starts_with(&format!(
            "every device is busy (all {FLEET} leased); tasks of this tenant hold {serial} by {held};"
        )) && !e.message().contains("someone-else"),
        "{}",
        e.message()
    );
    for lease in others {
        d.release_lease(ReleaseLeaseRequest {
            lease: Some(LeaseRef {
                serial: lease.serial,
                lease_id: lease.lease_id,
            }),
        })
        .await
        .unwrap();
    }
    cancel(&mut g, ACME, held).await;
}

/// The detail of the first PENDING status after "created" in task `id`'s log (within 10 s).
async fn pending_detail(stack: &Stack, key: &str, id: &str) -> String {
    let mut g = stack.gateway.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let task = g
            .get_task(with_key(
                key,
                GetTaskRequest {
                    task_id: id.to_owned(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        if task.last_seq >= 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} never said why it waits"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut events = g
        .watch_task(with_key(
            key,
            droidmesh_proto::v1::WatchTaskRequest {
                task_id: id.to_owned(),
                from_seq: 1,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    while let Some(ev) = events.next().await {
        if let Some(task_event::Kind::Status(s)) = ev.unwrap().kind
            && s.state == TaskState::Pending as i32
            && s.detail != "created"
        {
            return s.detail;
        }
    }
    panic!("task {id} ended without saying why it waits");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_lost_to_another_tenant_s_task_ends_the_task_without_naming_that_task() {
    let Some(shared) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    write_keys(
        &path,
        &[entry(ACME, "acme", &[]), entry(GLOBEX, "globex", &[])],
    );
    let mut cfg = test_config();
    cfg.auth.keys_file = Some(path);
    let stack = stack_with(shared, None, cfg).await;
    let mut g = stack.gateway.clone();
    let serial = shared.serials[11].clone();
    // A task of GLOBEX's whose id will hold ACME's device.
    let theirs = g
        .submit_task(with_key(GLOBEX, request("slow work", &shared.serials[12])))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let ours = g
        .submit_task(with_key(ACME, request("slow work", &serial)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_running(&stack, ACME, &ours).await;
    // ACME's lease goes (its holder's own lease is handed back and let go) and GLOBEX's task
    // takes the device before ACME's gateway renews it.
    let mut d = stack.device.clone();
    let lease = d
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: ours.clone(),
            ttl_ms: 60_000,
        })
        .await
        .unwrap()
        .into_inner();
    d.release_lease(ReleaseLeaseRequest {
        lease: Some(LeaseRef {
            serial: serial.clone(),
            lease_id: lease.lease_id,
        }),
    })
    .await
    .unwrap();
    let taken = d
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: theirs.clone(),
            ttl_ms: 60_000,
        })
        .await
        .unwrap()
        .into_inner();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let task = loop {
        let t = g
            .get_task(with_key(
                ACME,
                GetTaskRequest {
                    task_id: ours.clone(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        if t.state == TaskState::Failed as i32 {
            break t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task did not fail on losing its lease: {t:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(
        task.error,
        format!("lost the lease on {serial}: device {serial} is busy"),
        "{task:?}"
    );
    d.release_lease(ReleaseLeaseRequest {
        lease: Some(LeaseRef {
            serial,
            lease_id: taken.lease_id,
        }),
    })
    .await
    .unwrap();
    cancel(&mut g, GLOBEX, theirs).await;
}

/// Figures, not a check: how long a busy refusal takes on a gateway with keys, for a foreign
/// holder and the tenant's own, against the device service's refusal alone (run with
/// `--ignored --nocapture`).
#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn busy_refusal_figures() {
    let Some(shared) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    write_keys(
        &path,
        &[entry(ACME, "acme", &[]), entry(GLOBEX, "globex", &[])],
    );
    let mut cfg = test_config();
    cfg.auth.keys_file = Some(path);
    let stack = stack_with(shared, None, cfg).await;
    let mut g = stack.gateway.clone();
    let serial = shared.serials[13].clone();
    let held = g
        .submit_task(with_key(ACME, request("slow work", &serial)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_running(&stack, ACME, &held).await;
    let percentiles = |mut v: Vec<Duration>| {
        v.sort();
        let at = |p: usize| v[(v.len() - 1) * p / 100].as_micros();
        format!("p10 {} µs, p50 {} µs, p90 {} µs", at(10), at(50), at(90))
    };
    let mut d = stack.device.clone();
    for round in 0..3 {
        let (mut device, mut foreign, mut own) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..200 {
            let t = std::time::Instant::now();
            d.acquire_lease(AcquireLeaseRequest {
                serial: serial.clone(),
                holder: "figures".into(),
                ttl_ms: 1_000,
            })
            .await
            .unwrap_err();
            device.push(t.elapsed());
            let t = std::time::Instant::now();
            g.submit_task(with_key(GLOBEX, request("x", &serial)))
                .await
                .unwrap_err();
            foreign.push(t.elapsed());
            let t = std::time::Instant::now();
            g.submit_task(with_key(ACME, request("x", &serial)))
                .await
                .unwrap_err();
            own.push(t.elapsed());
        }
        println!(
            "round {round}: device service alone {}; gateway, another tenant's task {}; gateway, own task {}",
            percentiles(device),
            percentiles(foreign),
            percentiles(own)
        );
    }
    cancel(&mut g, ACME, held).await;
}
