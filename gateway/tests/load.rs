//! Load: a thousand concurrent streams against one gateway (RunTask for four tasks and
//! WatchTask for the rest, over ten client connections). None is lost, none hangs: each
//! stream ends with the task's completed event and sees every event once, in order, the same
//! as every other stream of its task.
use std::time::Duration;

use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::{TaskEvent, WatchTaskRequest, task_event};
use tokio_stream::StreamExt;

use super::harness::*;

const STREAMS: usize = 1000;
const TASKS: usize = 4;
const CONNECTIONS: usize = 10;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

async fn drain(mut s: tonic::Streaming<TaskEvent>) -> Vec<TaskEvent> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        match tokio::time::timeout_at(deadline, s.next()).await {
            Ok(Some(ev)) => out.push(ev.unwrap()),
            Ok(None) => return out,
            Err(_) => panic!("a stream hung after {} events", out.len()),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_concurrent_streams_each_see_their_whole_task() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let endpoint = stack.gateway_endpoint.clone();
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        clients.push(GatewayClient::connect(endpoint.clone()).await.unwrap());
    }
    let before = rss_kb();
    // Four tasks of 50 steps (20 ms apart), each streamed by its RunTask caller...
    let mut runs = Vec::new();
    for i in 0..TASKS {
        let mut g = clients[i % CONNECTIONS].clone();
        let req = request("count:50", &shared.serials[20 + i]);
        runs.push(g.run_task(req).await.unwrap().into_inner());
    }
    // ...whose first event names the task, which the watchers then follow from the start.
    let mut ids = Vec::new();
    let mut firsts = Vec::new();
    for run in &mut runs {
        let first = run.next().await.unwrap().unwrap();
        ids.push(first.task_id.clone());
        firsts.push(first);
    }
    let mut handles = Vec::new();
    for (i, (run, first)) in runs.into_iter().zip(firsts).enumerate() {
        handles.push((
            i,
            tokio::spawn(async move {
                let mut all = vec![first];
                all.extend(drain(run).await);
                all
            }),
        ));
    }
    for w in 0..STREAMS - TASKS {
        let i = w % TASKS;
        let mut g = clients[w % CONNECTIONS].clone();
        let task_id = ids[i].clone();
        handles.push((
            i,
            tokio::spawn(async move {
                let s = g
                    .watch_task(WatchTaskRequest {
                        task_id,
                        from_seq: 1,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                drain(s).await
            }),
        ));
    }
    let during = rss_kb();
    let mut per_task: Vec<Option<Vec<TaskEvent>>> = vec![None; TASKS];
    let mut ended = 0;
    for (i, h) in handles {
        let events = h.await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "a stream of task {i} skipped or repeated events"
        );
        match events.last().and_then(|e| e.kind.as_ref()) {
            Some(task_event::Kind::Completed(c)) => assert!(c.success, "{c:?}"),
            other => panic!("a stream of task {i} did not end with completed: {other:?}"),
        }
        match &per_task[i] {
            None => per_task[i] = Some(events),
            Some(seen) => assert_eq!(seen, &events, "two streams of task {i} differ"),
        }
        ended += 1;
    }
    assert_eq!(ended, STREAMS);
    let after = rss_kb();
    eprintln!(
        "{STREAMS} streams over {CONNECTIONS} connections: RSS of this test process (gateway, \
         device service, scripted executor and every stream's collected events) before {before} kB, \
         once all streams were open {during} kB, after all ended {after} kB"
    );
}
