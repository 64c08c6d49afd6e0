//! Calls with an affinity key over replicas behind one name: real servers on 127.0.0.2-4, real
//! gRPC clients, a resolver table the test changes while the client runs. A key's calls meet on
//! one replica, a replica that joins takes no placed key, and when a replica goes only its keys
//! move, each call that moved saying where from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use droidmesh_proto::v1::agent_event::Kind;
use droidmesh_proto::v1::scripter_service_client::ScripterServiceClient;
use droidmesh_proto::v1::scripter_service_server::{ScripterService, ScripterServiceServer};
use droidmesh_proto::v1::{AgentEvent, RunScriptRequest, Thought};
use droidmesh_runtime::balance::{Discovery, MOVED_HEADER, MeshChannel, StaticResolver};
use droidmesh_runtime::{ClientOptions, ServeOptions, connect_mesh, serve, traced};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;

const NAME: &str = "scripter.test";

/// A scripter whose every stream says which replica it is on and the moved header it got
/// (empty when none), then ends, or (`task = "hold"`) stays open until the caller drops it.
struct Fake(String);

type EventStream = Pin<Box<dyn futures::Stream<Item = Result<AgentEvent, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl ScripterService for Fake {
    type RunScriptStream = EventStream;

    async fn run_script(
        &self,
        request: tonic::Request<RunScriptRequest>,
    ) -> Result<tonic::Response<EventStream>, tonic::Status> {
        let moved = request
            .metadata()
            .get(MOVED_HEADER)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let hello = AgentEvent {
            kind: Some(Kind::Thought(Thought {
                agent: self.0.clone(),
                text: moved,
            })),
        };
        let first = futures::stream::iter([Ok(hello)]);
        let stream: EventStream = if request.into_inner().task == "hold" {
            use futures::StreamExt as _;
            Box::pin(first.chain(futures::stream::pending()))
        } else {
            Box::pin(first)
        };
        Ok(tonic::Response::new(stream))
    }
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

type Stop = tokio::sync::oneshot::Sender<()>;

/// Replicas on 127.0.0.2, .3 and .4, on one port; each with the sender that stops it.
async fn three_replicas() -> (u16, Vec<Stop>) {
    'port: for _ in 0..20 {
        let probe = TcpListener::bind((ip(2), 0)).await.unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let mut stops = Vec::new();
        for last in [2, 3, 4] {
            let Ok(listener) = TcpListener::bind(SocketAddr::new(ip(last), port)).await else {
                continue 'port;
            };
            let opts = ServeOptions::new("scripter", &[droidmesh_proto::service_names::SCRIPTER]);
            let routes = Routes::new(ScripterServiceServer::new(Fake(ip(last).to_string())));
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(serve(listener, routes, opts, async {
                let _ = rx.await;
            }));
            stops.push(tx);
        }
        return (port, stops);
    }
    panic!("no port free on 127.0.0.2, .3 and .4 after 20 tries");
}

fn client(resolver: &StaticResolver, port: u16) -> MeshChannel {
    let opts = ClientOptions {
        discovery: Discovery {
            resolver: Arc::new(resolver.clone()),
            resolve_every: Duration::from_millis(200),
            probe_every: Duration::from_millis(50),
            probe_timeout: Duration::from_millis(500),
            pick_timeout: Duration::from_millis(800),
            capacity_wait: Duration::from_secs(2),
        },
        ..ClientOptions::default()
    };
    connect_mesh(&format!("http://{NAME}:{port}"), &opts).unwrap()
}

async fn until_healthy(channel: &MeshChannel, healthy: &[IpAddr]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut now: Vec<IpAddr> = channel
            .replicas()
            .into_iter()
            .filter(|r| r.1)
            .map(|r| r.0.ip())
            .collect();
        now.sort();
        if now == healthy {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "healthy replicas are {now:?}, expected {healthy:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One call with `key` (none when empty); the replica it landed on and the moved header it
/// carried, and the stream, open while `task` is "hold".
async fn call(
    channel: &MeshChannel,
    key: &str,
    task: &str,
) -> (String, String, tonic::Streaming<AgentEvent>) {
    let mut client = ScripterServiceClient::new(traced(channel.clone()));
    let mut request = tonic::Request::new(RunScriptRequest {
        task: task.into(),
        ..Default::default()
    });
    droidmesh_runtime::balance::set_affinity(&mut request, key);
    let mut stream = client.run_script(request).await.unwrap().into_inner();
    let Some(AgentEvent {
        kind: Some(Kind::Thought(t)),
    }) = stream.message().await.unwrap()
    else {
        panic!("the fake's first event is a thought");
    };
    (t.agent, t.text, stream)
}

/// Calls with each key once: the replica each landed on and the moved header it carried.
async fn place(channel: &MeshChannel, keys: &[String]) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for key in keys {
        let (on, moved, _) = call(channel, key, "short").await;
        out.insert(key.clone(), (on, moved));
    }
    out
}

#[tokio::test]
async fn a_keys_calls_meet_on_one_replica_and_only_a_gone_replicas_keys_move() {
    let (port, mut stops) = three_replicas().await;
    let resolver = StaticResolver::default();
    resolver.set(NAME, &[ip(2), ip(3)]);
    let channel = client(&resolver, port);
    until_healthy(&channel, &[ip(2), ip(3)]).await;

    // Keys spread over both replicas; each key's calls stay on its replica, even while held
    // streams without a key make that replica the busier one.
    let keys: Vec<String> = (0..40).map(|i| format!("task-{i}")).collect();
    let first = place(&channel, &keys).await;
    let per = |placed: &BTreeMap<String, (String, String)>, on: IpAddr| {
        placed.values().filter(|p| p.0 == on.to_string()).count()
    };
    assert!(
        per(&first, ip(2)) >= 5 && per(&first, ip(3)) >= 5,
        "40 keys over two replicas: {} and {}",
        per(&first, ip(2)),
        per(&first, ip(3))
    );
    assert!(first.values().all(|p| p.1.is_empty()), "{first:?}");
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(call(&channel, "task-0", "hold").await);
    }
    assert!(held.iter().all(|h| h.0 == first["task-0"].0));
    let again = place(&channel, &keys).await;
    assert_eq!(
        again, first,
        "a key's second calls went where its first did"
    );
    drop(held);

    // A replica that joins takes new keys but no key already placed.
    resolver.set(NAME, &[ip(2), ip(3), ip(4)]);
    until_healthy(&channel, &[ip(2), ip(3), ip(4)]).await;
    assert_eq!(place(&channel, &keys).await, first);
    let fresh: Vec<String> = (0..30).map(|i| format!("later-{i}")).collect();
    let fresh = place(&channel, &fresh).await;
    // About 10 of 30 rank .4 highest; none would fail one run in 200,000.
    assert!(per(&fresh, ip(4)) >= 1, "30 new keys: {fresh:?}");

    // .2 goes: its keys move (each call saying where from, once), the others stay.
    let _ = stops.remove(0).send(());
    until_healthy(&channel, &[ip(3), ip(4)]).await;
    let after = place(&channel, &keys).await;
    let gone = format!("{}:{port} (", ip(2));
    for key in &keys {
        let (before, _) = &first[key];
        let (now, moved) = &after[key];
        if *before == ip(2).to_string() {
            assert_ne!(now, before, "{key}");
            assert!(moved.starts_with(&gone), "{key}: {moved}");
            assert!(moved.contains("it is out"), "{key}: {moved}");
        } else {
            assert_eq!((now, moved.as_str()), (before, ""), "{key} stayed");
        }
    }
    let settled = place(&channel, &keys).await;
    for key in &keys {
        assert_eq!(settled[key], (after[key].0.clone(), String::new()), "{key}");
    }
}

#[tokio::test]
async fn calls_without_a_key_still_spread_by_load() {
    let (port, _stops) = three_replicas().await;
    let resolver = StaticResolver::default();
    resolver.set(NAME, &[ip(2), ip(3)]);
    let channel = client(&resolver, port);
    until_healthy(&channel, &[ip(2), ip(3)]).await;
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(call(&channel, "", "hold").await);
    }
    let on2 = held.iter().filter(|h| h.0 == ip(2).to_string()).count();
    // Least loaded of two: held streams go to both replicas (the balance tests check how
    // evenly).
    assert!((2..=8).contains(&on2), "10 held streams, {on2} on .2");
    assert!(held.iter().all(|h| h.1.is_empty()));
}
