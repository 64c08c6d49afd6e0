//! Direct tasks across processes: Wi-Fi turned on and read back from the phone, structured
//! output, two devices at once with a busy one refused, and an executor killed mid-task that
//! leaves the device free.
use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn tasks_run_across_processes_and_a_killed_executor_frees_the_device() {
    if !require_adb("cross-process tests") {
        return;
    }
    let mut mesh = start(vec![
        reply("Settings first.\n```javascript\nopen_app('Settings')\n```"),
        reply("```javascript\nconst w = ui_state.find(e => e.text === 'Wi-Fi');\ntap(w.index);\ncomplete(true, 'Wi-Fi is on')\n```"),
        reply("```javascript\nopen_app('Contacts')\n```"),
        reply("```javascript\nconst names = ui_state.filter(e => e.resource_id === 'android:id/title' && e.text !== 'Create new contact').map(e => e.text);\ncomplete(true, names[2])\n```"),
        reply("```json\n{\"name\": \"Barbara Liskov\"}\n```"),
        reply("```javascript\nwait(1500);\ncomplete(true, 'waited')\n```"),
        reply("```javascript\nwait(1500);\ncomplete(true, 'waited')\n```"),
        reply("```javascript\nwait(10000)\n```"),
    ])
    .await;

    // Open Settings and turn on Wi-Fi: the phone's own setting flips.
    let (a, b) = (mesh.serials[0].clone(), mesh.serials[1].clone());
    assert_eq!(
        mesh.adb
            .shell(&a, "settings get global wifi_on")
            .unwrap()
            .trim(),
        "0"
    );
    let events = run(
        &mesh,
        TaskRequest {
            goal: "Open Settings and turn on Wi-Fi".into(),
            device: a.clone(),
            ..TaskRequest::default()
        },
    )
    .await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(
        mesh.adb
            .shell(&a, "settings get global wifi_on")
            .unwrap()
            .trim(),
        "1"
    );
    let code = events
        .iter()
        .filter(|e| matches!(e.kind, Some(task_event::Kind::Code(_))))
        .count();
    let tools: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::ToolResult(r)) => Some(r.tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(code, 2);
    assert_eq!(tools, ["open_app", "tap", "complete"]);
    assert_eq!(lease_holder(&mesh, &a).await, None);

    // Structured output: the 3rd contact, read from the simulator, as schema-valid JSON.
    let schema = r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#;
    let events = run(
        &mesh,
        TaskRequest {
            goal: "What is the name of the 3rd contact?".into(),
            device: b.clone(),
            output_schema: Some(schema.into()),
            ..TaskRequest::default()
        },
    )
    .await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.answer, "Barbara Liskov");
    let json: serde_json::Value =
        serde_json::from_str(done.structured_output.as_deref().unwrap()).unwrap();
    assert_eq!(json["name"], "Barbara Liskov");

    // Two tasks on two devices at once both succeed; a third for a busy device is refused
    // with the documented answer (FAILED_PRECONDITION naming the holder).
    let both = |serial: String| {
        let mut g = mesh.gateway.clone();
        async move {
            let req = TaskRequest {
                goal: "Wait a moment".into(),
                device: serial,
                ..TaskRequest::default()
            };
            let s = g.run_task(req).await.unwrap().into_inner();
            s.filter_map(Result::ok).collect::<Vec<_>>().await
        }
    };
    let (ta, tb) = (tokio::spawn(both(a.clone())), tokio::spawn(both(b.clone())));
    // Once the device service reports `a` leased, a third task for it must be refused.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while lease_holder(&mesh, &a).await.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{a} was never leased"
        );
        tokio::task::yield_now().await;
    }
    let mut g = mesh.gateway.clone();
    let busy = g
        .submit_task(TaskRequest {
            goal: "Me too".into(),
            device: a.clone(),
            ..TaskRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(busy.code(), tonic::Code::FailedPrecondition, "{busy:?}");
    assert!(
        busy.message().contains("leased by task-"),
        "{}",
        busy.message()
    );
    for t in [ta, tb] {
        let events = t.await.unwrap();
        let done = completed(&events);
        assert!(done.success && done.answer == "waited", "{done:?}");
    }

    // The executor process dies mid-task: the task fails with a reason, the device is free.
    let mut g = mesh.gateway.clone();
    let id = g
        .submit_task(TaskRequest {
            goal: "Wait around".into(),
            device: a.clone(),
            ..TaskRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let mut watch = g
        .watch_task(WatchTaskRequest {
            task_id: id.clone(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    // Kill once the model's `wait` is running on the executor.
    while let Some(ev) = watch.next().await {
        if matches!(ev.unwrap().kind, Some(task_event::Kind::Code(_))) {
            break;
        }
    }
    mesh.executor.kill();
    let mut rest = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), watch.next()).await {
        rest.push(ev.unwrap());
    }
    let done = completed(&rest);
    assert!(!done.success);
    // The reason names the agent and where it was, not the transport's words.
    assert!(
        done.error.contains("executor at http://127.0.0.1:") && done.error.contains("went away"),
        "{}",
        done.error
    );
    assert!(!done.error.contains("h2 protocol"), "{}", done.error);
    let task = g
        .get_task(GetTaskRequest { task_id: id })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state, TaskState::Failed as i32);
    assert_eq!(
        lease_holder(&mesh, &a).await,
        None,
        "the lease survived the executor"
    );
}
