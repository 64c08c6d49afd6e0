//! Keeps a balancer's replicas current: resolves each target now, every `resolve_every` and
//! whenever a connection fails; inserts replicas that appear, removes those that disappear
//! (their streams in progress go on), and probes each replica's health and reported work.
use super::replica::{Replica, ReplicaState};
use super::{Discovery, MakeChannel, Target};
use droidmesh_proto::v1::GetLoadRequest;
use droidmesh_proto::v1::replica_service_client::ReplicaServiceClient;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tower::discover::Change;

/// One replica as the pool last saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) addr: SocketAddr,
    pub(crate) healthy: bool,
    /// Why it is not healthy.
    pub(crate) why: String,
    pub(crate) state: Arc<ReplicaState>,
    /// Its channel, for calls that choose their replica themselves (affinity).
    pub(crate) channel: Channel,
}

/// What the pool knows now, for callers waiting on a ready replica and for their errors.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// Resolved replicas.
    pub(crate) replicas: Vec<Seen>,
    /// Why the last resolution of a target failed, if it did.
    pub(crate) resolve_errors: Vec<String>,
}

pub(crate) type Changes =
    mpsc::Receiver<Result<Change<SocketAddr, Replica>, std::convert::Infallible>>;

pub(crate) struct Pool {
    targets: Vec<Target>,
    discovery: Discovery,
    make_channel: MakeChannel,
    tx: mpsc::Sender<Result<Change<SocketAddr, Replica>, std::convert::Infallible>>,
    snapshot: watch::Sender<Snapshot>,
    replicas: BTreeMap<SocketAddr, Replica>,
    poke: Arc<Notify>,
    changed: Arc<Notify>,
}

/// Most replicas one balanced channel keeps (each has a connection and a probe); addresses
/// beyond are left out, with a warning.
const MAX_REPLICAS: usize = 256;

/// The least time between two resolutions a failing connection asks for.
const MIN_RESOLVE_GAP: Duration = Duration::from_millis(200);

impl Pool {
    /// Starts the pool's task; returns the change stream for the balancer and the snapshot.
    pub(crate) fn spawn(
        targets: Vec<Target>,
        discovery: Discovery,
        make_channel: MakeChannel,
    ) -> (Changes, watch::Receiver<Snapshot>) {
        // Changes are bounded by the resolved set; the balancer reads them as it serves.
        let (tx, rx) = mpsc::channel(1024);
        let (snapshot, snapshot_rx) = watch::channel(Snapshot::default());
        let pool = Pool {
            targets,
            discovery,
            make_channel,
            tx,
            snapshot,
            replicas: BTreeMap::new(),
            poke: Arc::new(Notify::new()),
            changed: Arc::new(Notify::new()),
        };
        tokio::spawn(pool.run());
        (rx, snapshot_rx)
    }

    async fn run(mut self) {
        loop {
            let errors = self.resolve().await;
            if !self.apply_errors(errors) {
                break;
            }
            let every = self.discovery.resolve_every;
            let next = tokio::time::sleep(every);
            tokio::pin!(next);
            loop {
                tokio::select! {
                    () = &mut next => break,
                    () = self.poke.notified() => {
                        tokio::time::sleep(MIN_RESOLVE_GAP).await;
                        break;
                    }
                    () = self.changed.notified() => self.publish(None),
                    () = self.tx.closed() => {
                        self.stop_all();
                        return;
                    }
                }
            }
        }
        self.stop_all();
    }

    /// Resolves every target; inserts and removes replicas. Returns resolution errors.
    async fn resolve(&mut self) -> Vec<String> {
        // Each address with the target it was found for (the first, if several).
        let mut found: Vec<(SocketAddr, usize)> = Vec::new();
        let mut errors = Vec::new();
        let mut failed_any = false;
        for (i, target) in self.targets.iter().enumerate() {
            let resolving = self.discovery.resolver.resolve(&target.host, target.port);
            match tokio::time::timeout(self.discovery.probe_timeout * 5, resolving).await {
                Ok(Ok(addrs)) if !addrs.is_empty() => {
                    found.extend(addrs.into_iter().map(|a| (a, i)))
                }
                Ok(Ok(_)) => errors.push(format!("{} resolved to no address", target.host)),
                Ok(Err(e)) => {
                    failed_any = true;
                    errors.push(format!("cannot resolve {}: {e}", target.host));
                }
                Err(_) => {
                    failed_any = true;
                    errors.push(format!("resolving {} took too long", target.host));
                }
            }
        }
        found.sort();
        found.dedup_by_key(|(addr, _)| *addr);
        if found.len() > MAX_REPLICAS {
            tracing::warn!(
                resolved = found.len(),
                kept = MAX_REPLICAS,
                "more replicas resolved than one channel keeps; the rest are left out"
            );
            errors.push(format!(
                "{} addresses resolved; the first {MAX_REPLICAS} are used",
                found.len()
            ));
            found.truncate(MAX_REPLICAS);
        }
        // A resolver that failed keeps what it gave before (a DNS hiccup must not empty the
        // pool); a name that resolved to fewer addresses removes the others.
        if !failed_any {
            let gone: Vec<SocketAddr> = self
                .replicas
                .keys()
                .filter(|a| !found.iter().any(|(f, _)| f == *a))
                .copied()
                .collect();
            for addr in gone {
                if let Some(Replica { state, .. }) = self.replicas.remove(&addr) {
                    state
                        .removed
                        .store(true, std::sync::atomic::Ordering::Release);
                    tracing::info!(replica = %addr, "replica left the resolved set");
                    let _ = self.tx.send(Ok(Change::Remove(addr))).await;
                }
            }
        }
        for (addr, target) in found {
            if self.replicas.contains_key(&addr) {
                continue;
            }
            let Some(channel) = (self.make_channel)(addr, &self.targets[target]) else {
                continue;
            };
            let state = ReplicaState::new(addr, Arc::clone(&self.poke), Arc::clone(&self.changed));
            tokio::spawn(probe(
                channel.clone(),
                Arc::clone(&state),
                self.discovery.clone(),
            ));
            let replica = Replica { channel, state };
            self.replicas.insert(addr, replica.clone());
            tracing::info!(replica = %addr, "replica joined the resolved set");
            if self
                .tx
                .send(Ok(Change::Insert(addr, replica)))
                .await
                .is_err()
            {
                break;
            }
        }
        errors
    }

    /// Publishes the snapshot; false when the balancer is gone.
    fn apply_errors(&mut self, errors: Vec<String>) -> bool {
        self.publish(Some(errors));
        !self.tx.is_closed()
    }

    fn publish(&self, errors: Option<Vec<String>>) {
        let replicas = self
            .replicas
            .values()
            .map(|r| Seen {
                addr: r.state.addr,
                healthy: r.state.healthy(),
                why: r.state.why(),
                state: Arc::clone(&r.state),
                channel: r.channel.clone(),
            })
            .collect();
        self.snapshot.send_modify(|snap| {
            snap.replicas = replicas;
            if let Some(errors) = errors {
                snap.resolve_errors = errors;
            }
        });
    }

    fn stop_all(&mut self) {
        for Replica { state, .. } in self.replicas.values() {
            state
                .removed
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }
}

/// Asks the replica for its health and its work every `probe_every` until it is removed.
async fn probe(channel: Channel, state: Arc<ReplicaState>, discovery: Discovery) {
    let mut health = HealthClient::new(channel.clone());
    let mut load = ReplicaServiceClient::new(channel);
    while !state.removed.load(std::sync::atomic::Ordering::Acquire) {
        let local_then = state.local();
        let checked = tokio::time::timeout(discovery.probe_timeout, async {
            let status = health
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await?
                .into_inner()
                .status;
            let reported = match load.get_load(GetLoadRequest {}).await {
                Ok(r) => Some(r.into_inner()),
                // A server without the load report is balanced on this client's work alone.
                Err(s) if s.code() == tonic::Code::Unimplemented => None,
                Err(s) => return Err(s),
            };
            Ok::<_, tonic::Status>((status, reported))
        })
        .await;
        match checked {
            Ok(Ok((status, reported))) => {
                if reported.as_ref().is_some_and(|r| r.draining) {
                    state.set_unhealthy("it is draining".to_owned());
                } else if status != ServingStatus::Serving as i32 {
                    state.set_unhealthy("its health check says it is not serving".to_owned());
                } else {
                    let work = reported.map(|r| (r.in_flight as usize, r.capacity as usize));
                    state.probed_healthy(work, local_then);
                }
            }
            Ok(Err(s)) => state.set_unhealthy(format!("its health check failed: {}", s.message())),
            Err(_) => state.set_unhealthy(format!(
                "its health check got no answer within {:?}",
                discovery.probe_timeout
            )),
        }
        tokio::time::sleep(discovery.probe_every).await;
    }
}
