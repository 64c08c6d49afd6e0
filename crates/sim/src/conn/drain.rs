//! Commands the host closed while they still worked on input it had sent them. `adb exec-in
//! 'cat > f'` closes its stream as soon as its input is sent and returns; the command is still
//! reading and writing on the phone. So that the host's next command sees what that input did
//! (`wc -c f` finds the bytes), a stream the host opens afterwards on the connection is
//! accepted (its OPEN answered with OKAY) only once those commands have finished, at most
//! [`DRAIN_WAIT`] later. Streams already open and the connection's reading are not held up.
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

/// Longest a new stream waits for closed commands to finish.
pub(super) const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// Closed commands tracked at once; beyond, a new one is not waited for (and logged).
const MAX_DRAINING: usize = 64;

/// Whether a command has finished: the sender is set (or dropped) when it has.
pub(super) fn done_signal() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(false)
}

fn finished(rx: &watch::Receiver<bool>) -> bool {
    *rx.borrow() || rx.has_changed().is_err()
}

/// The connection's closed, still running commands.
#[derive(Default)]
pub(super) struct Draining(Mutex<Vec<watch::Receiver<bool>>>);

impl Draining {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<watch::Receiver<bool>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A command the host closed before it finished, after sending it input.
    pub(super) fn add(&self, done: watch::Receiver<bool>) {
        if finished(&done) {
            return;
        }
        let mut running = self.lock();
        running.retain(|r| !finished(r));
        if running.len() >= MAX_DRAINING {
            tracing::warn!(
                "{MAX_DRAINING} closed commands still run on this connection; \
                 the next stream will not wait for this one"
            );
            return;
        }
        running.push(done);
    }

    /// The closed commands a stream opened now must wait for.
    pub(super) fn pending(&self) -> Vec<watch::Receiver<bool>> {
        let mut running = self.lock();
        running.retain(|r| !finished(r));
        running.clone()
    }
}

/// Waits until every command of `pending` has finished, or [`DRAIN_WAIT`] has passed.
pub(super) async fn wait(pending: Vec<watch::Receiver<bool>>) {
    let all = async {
        for mut rx in pending {
            // An error means the sender is gone: the command's task has ended.
            let _ = rx.wait_for(|done| *done).await;
        }
    };
    if tokio::time::timeout(DRAIN_WAIT, all).await.is_err() {
        tracing::debug!(
            "a closed command still runs after {DRAIN_WAIT:?}; the new stream goes ahead"
        );
    }
}
