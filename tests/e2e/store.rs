//! The embedded task store as a user relies on it: the gateway (its own process, beside the
//! device service and the agents) keeps its tasks in SQLite in its data directory. Killed with
//! SIGKILL and started again on the same directory, it still has every finished task, its
//! result and its whole event log; the task it was running is FAILED "gateway restarted" and
//! its phone's lease is given back (long before the lease would expire by itself).
use super::*;
use droidmesh_proto::v1::ListTasksRequest;
use std::time::Instant;

async fn watch_all(g: &mut GatewayClient<Channel>, id: &str) -> Vec<TaskEvent> {
    let mut s = g
        .watch_task(WatchTaskRequest {
            task_id: id.into(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), s.next()).await {
        events.push(ev.unwrap());
    }
    events
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_tasks_and_their_logs_survive_a_killed_gateway() {
    if !require_adb("finished_tasks_and_their_logs_survive_a_killed_gateway") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let gateway_lines = format!("data_dir = \"{}\"", data.path().display());
    let mut mesh = start_with(
        vec![
            reply("```javascript\nopen_app('Settings')\n```"),
            reply("```javascript\ncomplete(true, 'opened')\n```"),
            reply("```javascript\ncomplete(true, 'second')\n```"),
            // The third task's model never answers while its gateway lives.
            reply("```javascript\ncomplete(true, 'never')\n```").delay(Duration::from_secs(120)),
        ],
        Extra {
            // A lease that outlives the test unless someone gives it back.
            env: &[("DROIDMESH_GATEWAY__LEASE_TTL_MS", "120000")],
            gateway: &gateway_lines,
            ..Extra::default()
        },
    )
    .await;
    let serial = mesh.serials[0].clone();
    let request = |goal: &str| TaskRequest {
        goal: goal.into(),
        device: serial.clone(),
        ..TaskRequest::default()
    };
    let first = run(&mesh, request("open settings")).await;
    assert!(completed(&first).success, "{first:?}");
    let second = run(&mesh, request("say second")).await;
    assert!(completed(&second).success, "{second:?}");
    let (a, b) = (first[0].task_id.clone(), second[0].task_id.clone());

    let mut g = mesh.gateway.clone();
    let c = g
        .submit_task(request("wait for the model"))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    // Running, as far as a watcher sees (and so as far as the store has it).
    let mut live = g
        .watch_task(WatchTaskRequest {
            task_id: c.clone(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), live.next())
            .await
            .expect("the third task never started")
            .unwrap()
            .unwrap();
        if matches!(ev.kind, Some(task_event::Kind::StepStarted(_))) {
            break;
        }
    }

    mesh.proc("gateway").kill();
    mesh.restart("gateway").await;
    let restarted = Instant::now();
    let endpoint = format!("http://127.0.0.1:{}", mesh.port("gateway"));
    let mut g = GatewayClient::connect(endpoint).await.unwrap();

    // Finished tasks: record, result and the whole log, replayed from seq 1.
    let task_a = g
        .get_task(GetTaskRequest { task_id: a.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task_a.state(), TaskState::Succeeded);
    assert_eq!(task_a.answer, "opened");
    assert_eq!(
        task_a.request.map(|r| r.goal).as_deref(),
        Some("open settings")
    );
    assert_eq!(watch_all(&mut g, &a).await, first);
    assert_eq!(watch_all(&mut g, &b).await, second);

    // The task that was running: FAILED with the reason, in its record and its log.
    let task_c = g
        .get_task(GetTaskRequest { task_id: c.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task_c.state(), TaskState::Failed, "{task_c:?}");
    // Its record was written without its request while it ran (the store kept the request
    // apart); recovered, it has it again.
    assert_eq!(
        task_c.request.as_ref().map(|r| r.goal.as_str()),
        Some("wait for the model"),
        "{task_c:?}"
    );
    assert!(
        task_c.error.contains("gateway restarted"),
        "{}",
        task_c.error
    );
    let log_c = watch_all(&mut g, &c).await;
    let seqs: Vec<u64> = log_c.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=task_c.last_seq).collect::<Vec<_>>());
    let end = completed(&log_c);
    assert!(
        !end.success && end.error.contains("gateway restarted"),
        "{end:?}"
    );

    let listed: Vec<String> = g
        .list_tasks(ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .summaries
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [c.clone(), b, a]);

    // Its phone is free again, well before the lease's two minutes.
    loop {
        let devices = g
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
            restarted.elapsed() < Duration::from_secs(20),
            "the lease of {c} was not given back: {:?}",
            d.lease
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
