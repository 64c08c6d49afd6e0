//! Streams a task's events to a client: the log from a sequence number, then live events,
//! ending after the completed event.
use std::pin::Pin;
use std::sync::Arc;

use droidmesh_proto::v1::{Task, TaskEvent, task_event};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::error::GatewayError;
use crate::persist::TaskStore;
use crate::store::{TaskEntry, is_final};

pub type EventStream = Pin<Box<dyn Stream<Item = Result<TaskEvent, Status>> + Send>>;

/// Events sent to one watcher ahead of its reading.
const WATCH_BUFFER: usize = 64;
/// Events read from a task store at a time.
const STORE_READ: usize = 256;
/// How often a watcher of a task run by another process asks the store for new events.
const STORE_POLL: std::time::Duration = std::time::Duration::from_millis(200);
/// How long such a watcher keeps asking a store that fails (a database restarting) before
/// its stream ends with the error.
const STORE_OUTAGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Refuses a `from` past one after the last event.
fn check_from(id: &str, from: u64, last_seq: u64) -> Result<(), GatewayError> {
    if from > last_seq + 1 {
        return Err(GatewayError::OutOfRange(format!(
            "from_seq {from} is past the end of task {id}'s log: its last event is seq {last_seq}; pass at most {} (last + 1 to wait for the next event)",
            last_seq + 1
        )));
    }
    Ok(())
}

/// Streams the events of a task read from the task store (not run by this process) from
/// `from`: for an ended task its log, for one run elsewhere its log and then new events as
/// they are stored, until the completed event.
pub fn watch_stored(
    backend: Arc<dyn TaskStore>,
    task: Task,
    from: u64,
) -> Result<EventStream, GatewayError> {
    let from = from.max(1);
    check_from(&task.id, from, task.last_seq)?;
    let ended = is_final(task.state());
    if ended && from > task.last_seq {
        return Ok(Box::pin(tokio_stream::empty()));
    }
    let (tx, rx) = mpsc::channel::<Result<TaskEvent, Status>>(WATCH_BUFFER);
    tokio::spawn(async move {
        let mut next = from;
        let mut failing_since = None;
        loop {
            let events = match backend.events(&task.id, next, STORE_READ).await {
                Ok(events) => {
                    failing_since = None;
                    events
                }
                Err(e @ crate::persist::StoreError::Failed { .. })
                    if failing_since
                        .get_or_insert_with(std::time::Instant::now)
                        .elapsed()
                        < STORE_OUTAGE =>
                {
                    tracing::debug!(task = %task.id, error = %e, "a watcher waits for the task store");
                    Vec::new()
                }
                Err(e) => {
                    let _ = tx.send(Err(GatewayError::from(e).into_status())).await;
                    return;
                }
            };
            if events.is_empty() && ended && failing_since.is_none() {
                return; // the log was cut by retention meanwhile
            }
            let read = events.len();
            for ev in events {
                next = ev.seq + 1;
                let done = matches!(ev.kind, Some(task_event::Kind::Completed(_)));
                if tx.send(Ok(ev)).await.is_err() || done {
                    return;
                }
            }
            if read < STORE_READ {
                tokio::select! {
                    () = tokio::time::sleep(STORE_POLL) => {}
                    () = tx.closed() => return,
                }
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// Streams `entry`'s events from `from` (0 reads as 1). `from` may be at most one past the
/// last event; for an ended task that is an empty stream. When the client goes away and
/// `cancel_on_drop` is set, the task is cancelled.
pub fn watch(
    entry: Arc<TaskEntry>,
    from: u64,
    cancel_on_drop: bool,
) -> Result<EventStream, GatewayError> {
    let from = from.max(1);
    let end = entry.log_end();
    check_from(&entry.id, from, end.last_seq)?;
    if end.ended && from > end.last_seq {
        return Ok(Box::pin(tokio_stream::empty()));
    }
    let (tx, rx) = mpsc::channel::<Result<TaskEvent, Status>>(WATCH_BUFFER);
    tokio::spawn(async move {
        let gone = || {
            if cancel_on_drop && !is_final(entry.state()) {
                entry.cancel("the client that ran the task disconnected".into());
            }
        };
        let mut seq_rx = entry.subscribe();
        let mut next = from;
        loop {
            for ev in entry.events_from(next, 256) {
                next = ev.seq + 1;
                let done = matches!(ev.kind, Some(task_event::Kind::Completed(_)));
                if tx.send(Ok(ev)).await.is_err() {
                    return gone();
                }
                if done {
                    return;
                }
            }
            if *seq_rx.borrow_and_update() >= next {
                continue;
            }
            tokio::select! {
                changed = seq_rx.changed() => if changed.is_err() { return },
                _ = tx.closed() => return gone(),
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}
