//! A task's scripts across two scripter replicas behind one balanced endpoint (real servers on
//! loopback, the runtime's client-side balancer): the task's scripts meet on one replica, so a
//! later script sees an earlier one's files; when that replica goes, the task's next script
//! runs on the other, which says plainly that the earlier files are not there.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use droidmesh_llm::testkit::MockLlmServer;
use droidmesh_proto::v1::scripter_service_client::ScripterServiceClient;
use droidmesh_proto::v1::{AgentEvent, RunScriptRequest, agent_event};
use droidmesh_runtime::balance::{Discovery, MeshChannel};
use droidmesh_runtime::{ClientOptions, ServeOptions, TracedChannel, connect_mesh, serve, traced};
use droidmesh_scripter::scripter_service;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::service::Routes;

use crate::common::*;

struct Replica {
    name: &'static str,
    addr: SocketAddr,
    workspace: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<droidmesh_runtime::Result<()>>,
}

impl Replica {
    /// Whether `path` is in this replica's workspace folder.
    fn holds(&self, path: &str) -> bool {
        std::path::Path::new(path).starts_with(self.workspace.path().canonicalize().unwrap())
    }
}

/// A scripter served as in production (health and load report beside it), asking `llm`.
async fn start(name: &'static str, llm: &MockLlmServer) -> Replica {
    let workspace = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.workspace_dir = Some(workspace.path().to_path_buf());
    cfg.replica = Some(name.to_owned());
    let service = scripter_service(cfg, llm_client(llm)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let opts = ServeOptions::new("scripter", &[droidmesh_proto::service_names::SCRIPTER]);
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(serve(listener, Routes::new(service), opts, async {
        let _ = stopped.await;
    }));
    Replica {
        name,
        addr,
        workspace,
        stop: Some(stop),
        handle,
    }
}

fn balanced(replicas: &[Replica]) -> MeshChannel {
    let opts = ClientOptions {
        discovery: Discovery {
            probe_every: Duration::from_millis(50),
            probe_timeout: Duration::from_millis(500),
            pick_timeout: Duration::from_secs(2),
            capacity_wait: Duration::from_secs(2),
            ..Discovery::default()
        },
        ..ClientOptions::default()
    };
    let endpoints: Vec<String> = replicas
        .iter()
        .map(|r| format!("http://{}", r.addr))
        .collect();
    connect_mesh(&endpoints.join(","), &opts).unwrap()
}

/// Waits (up to 10 s) until the channel's healthy replicas are exactly `healthy`.
async fn until_healthy(channel: &MeshChannel, healthy: &[SocketAddr]) {
    let mut want = healthy.to_vec();
    want.sort();
    let seen = until(Duration::from_secs(10), || {
        let mut now: Vec<SocketAddr> = channel
            .replicas()
            .into_iter()
            .filter(|r| r.1)
            .map(|r| r.0)
            .collect();
        now.sort();
        now == want
    })
    .await;
    assert!(
        seen,
        "healthy replicas {:?}, expected {want:?}",
        channel.replicas()
    );
}

/// Runs one script of `task_id` through the balanced channel, with the task as the affinity
/// key, as the gateway calls it; every event, `AgentFinished` last.
async fn script(channel: &TracedChannel, task_id: &str, task: &str) -> Vec<AgentEvent> {
    let mut client = ScripterServiceClient::new(channel.clone());
    let mut call = tonic::Request::new(RunScriptRequest {
        task_id: task_id.into(),
        task: task.into(),
        ..RunScriptRequest::default()
    });
    droidmesh_runtime::balance::set_affinity(&mut call, task_id);
    let mut stream = client.run_script(call).await.unwrap().into_inner();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.message())
        .await
        .unwrap()
    {
        let done = matches!(ev.kind, Some(agent_event::Kind::Finished(_)));
        events.push(ev);
        if done {
            break;
        }
    }
    events
}

/// What the scripter said of earlier scripts' files (a thought of its own, not the model's).
fn notices(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::Thought(t))
                if t.agent == "scripter" && t.text.contains("earlier scripts") =>
            {
                Some(t.text.clone())
            }
            _ => None,
        })
        .collect()
}

/// The replica whose workspace holds the one file the run left.
fn ran_on<'a>(replicas: &'a [Replica], events: &[AgentEvent]) -> &'a Replica {
    let files = &finished(events).result.as_ref().unwrap().files;
    assert_eq!(files.len(), 1, "{files:?}");
    replicas
        .iter()
        .find(|r| r.holds(&files[0].path))
        .unwrap_or_else(|| panic!("{} is in no replica's workspace", files[0].path))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tasks_scripts_meet_on_one_replica_and_a_moved_task_is_told_its_files_are_lost() {
    let llm = Arc::new(MockLlmServer::start(Vec::new()).await.unwrap());
    let mut replicas = vec![
        start("scripter-a", &llm).await,
        start("scripter-b", &llm).await,
    ];
    let mesh = balanced(&replicas);
    until_healthy(&mesh, &[replicas[0].addr, replicas[1].addr]).await;
    let channel = traced(mesh.clone());

    // Tasks until each replica holds one (every task lands somewhere; 16 tasks all on one
    // replica would be a balancer that does not spread keys): each task's second script reads
    // the file its first wrote, on the replica that wrote it.
    let mut holder: Vec<(String, usize)> = Vec::new();
    for i in 0..16 {
        let task_id = format!("task-{i}");
        llm.push(step(&format!(
            "write_file('note.txt', 'written for {task_id}')"
        )));
        llm.push(reply("Saved note.txt."));
        let first = script(&channel, &task_id, "Save a note.").await;
        assert!(finished(&first).success, "{first:?}");
        let on = ran_on(&replicas, &first);
        let location = &finished(&first).result.as_ref().unwrap().files[0].location;
        assert_eq!(
            location,
            &format!("scripter://{}/{task_id}/note.txt", on.name)
        );

        llm.push(step("console.log(read_file('note.txt'))"));
        llm.push(reply("Read it."));
        let second = script(&channel, &task_id, "Read the note back.").await;
        assert_eq!(
            observations(&second)[0],
            (format!("written for {task_id}"), None),
            "{task_id}'s second script ran where its first did"
        );
        assert_eq!(ran_on(&replicas, &second).name, on.name, "{task_id}");
        assert!(notices(&second).is_empty(), "{:?}", notices(&second));
        let index = replicas.iter().position(|r| r.name == on.name).unwrap();
        holder.push((task_id, index));
        if holder.iter().any(|h| h.1 == 0) && holder.iter().any(|h| h.1 == 1) {
            break;
        }
    }
    assert!(
        holder.iter().any(|h| h.1 == 0) && holder.iter().any(|h| h.1 == 1),
        "16 tasks all went to one replica: {holder:?}"
    );

    // The replica of task-0 goes away.
    let (moved_task, gone) = holder[0].clone();
    let kept = 1 - gone;
    let _ = replicas[gone].stop.take().unwrap().send(());
    let handle = &mut replicas[gone].handle;
    let ended = tokio::time::timeout(Duration::from_secs(15), handle).await;
    assert!(ended.is_ok(), "the stopped replica exits");
    until_healthy(&mesh, &[replicas[kept].addr]).await;

    // task-0's next script runs on the other replica, which says the files are not there.
    llm.push(step(
        "write_file('again.txt', 'x'); list_files().map(f => f.name).join(',')",
    ));
    llm.push(reply("Only again.txt is here."));
    let third = script(&channel, &moved_task, "List the files.").await;
    assert_eq!(ran_on(&replicas, &third).name, replicas[kept].name);
    assert_eq!(
        observations(&third)[0],
        ("=> \"again.txt\"".to_string(), None)
    );
    let said = notices(&third);
    assert_eq!(said.len(), 1, "{said:?}");
    let gone_addr = replicas[gone].addr.to_string();
    for text in [
        &said[0],
        &finished(&third).result.as_ref().unwrap().action_taken,
    ] {
        assert!(
            text.contains("files of this task's earlier scripts are not on this replica"),
            "{text}"
        );
        assert!(
            text.contains(replicas[kept].name),
            "names this replica: {text}"
        );
        assert!(text.contains(&gone_addr), "names where they were: {text}");
    }
    let data = droidmesh_proto::struct_to_json(
        finished(&third)
            .result
            .as_ref()
            .unwrap()
            .data
            .as_ref()
            .unwrap(),
    );
    assert_eq!(data["files_lost"].as_str(), Some(said[0].as_str()));
    // The model is told too.
    let asked = llm.requests().last().unwrap().json();
    let system = asked["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("not on this replica"), "{system}");

    // A task of the replica that stayed keeps its files and hears nothing of the move.
    let (task_id, _) = holder.iter().find(|h| h.1 == kept).unwrap();
    llm.push(step("console.log(read_file('note.txt'))"));
    llm.push(reply("Read it."));
    let again = script(&channel, task_id, "Read the note back.").await;
    assert_eq!(
        observations(&again)[0],
        (format!("written for {task_id}"), None)
    );
    assert!(notices(&again).is_empty(), "{:?}", notices(&again));
}
