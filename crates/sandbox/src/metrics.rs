//! `droidmesh.sandbox.sessions`: sandbox sessions alive in this process (an up-down counter,
//! a gauge in Prometheus), one up when a session starts and one down when it is dropped.
use opentelemetry::metrics::UpDownCounter;
use std::sync::OnceLock;

/// Made on first use from the global meter provider, which the process installs first.
fn sessions() -> &'static UpDownCounter<i64> {
    static SESSIONS: OnceLock<UpDownCounter<i64>> = OnceLock::new();
    SESSIONS.get_or_init(|| {
        opentelemetry::global::meter("droidmesh")
            .i64_up_down_counter("droidmesh.sandbox.sessions")
            .with_unit("{session}")
            .with_description("Sandbox sessions alive")
            .build()
    })
}

/// Counts one live session until dropped.
#[derive(Debug)]
pub(crate) struct LiveSession(());

impl LiveSession {
    pub(crate) fn start() -> Self {
        sessions().add(1, &[]);
        Self(())
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        sessions().add(-1, &[]);
    }
}
