//! The admin port of a `serve` or `up` process: `/metrics` from the process's meter provider,
//! served until the process shuts down.
use anyhow::{Context, Result};
use droidmesh_runtime::metrics::{AdminOptions, serve_admin};
use std::net::SocketAddr;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running admin server.
pub struct Admin {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<droidmesh_runtime::Result<()>>,
}

/// Binds `addr` and serves the metrics of `telemetry` on it; `None` serves nothing. A port
/// that cannot be bound fails the process, as a service port does.
pub async fn start(
    addr: Option<SocketAddr>,
    telemetry: &droidmesh_runtime::Telemetry,
) -> Result<Option<Admin>> {
    let Some(addr) = addr else { return Ok(None) };
    let metrics = telemetry
        .metrics()
        .context("expected metrics to be installed for the admin port, found none")?;
    let listener = droidmesh_runtime::server::bind(addr).await.with_context(|| {
        format!(
            "cannot serve metrics on {addr} (the admin port: `[listen] admin = 0` turns it off, \
             `--admin HOST:PORT` moves it)"
        )
    })?;
    let addr = listener
        .local_addr()
        .context("bound socket has no address")?;
    let (stop, mut rx) = watch::channel(false);
    let task = tokio::spawn(serve_admin(
        listener,
        metrics,
        AdminOptions::default(),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    Ok(Some(Admin { addr, stop, task }))
}

impl Admin {
    /// Stops serving and closes its connections.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.task.await.context("the admin server failed")??;
        Ok(())
    }
}
