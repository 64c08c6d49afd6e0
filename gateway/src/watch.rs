//! Streams a task's events to a client: the log from a sequence number, then live events,
//! ending after the completed event. A watcher never waits in silence on a task store that
//! fails: when the events it waits for cannot be stored (or read), its stream ends with
//! UNAVAILABLE naming the store and what failed, at once when the failure lasts until someone
//! acts (a damaged, read-only or full store), after [`STORE_OUTAGE`] when it may pass by
//! itself (a database restarting).
use std::pin::Pin;
use std::sync::Arc;

use droidmesh_proto::v1::{Task, TaskEvent, task_event};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::entry::TaskEntry;
use crate::error::GatewayError;
use crate::persist::{Fault, StoreError, TaskStore, WriteFailure};
use crate::record::is_final;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<TaskEvent, Status>> + Send>>;

/// Events sent to one watcher ahead of its reading.
const WATCH_BUFFER: usize = 64;
/// Events read from a task store at a time.
const STORE_READ: usize = 256;
/// How often a watcher of a task run by another process asks the store for new events.
const STORE_POLL: std::time::Duration = std::time::Duration::from_millis(200);
/// How long a watcher waits for a store whose failure may pass by itself (a database
/// restarting) before its stream ends with the error.
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
/// they are stored, until the completed event. The first read is made before the stream is
/// returned, so that a store that cannot answer refuses the call (HTTP 503) rather than
/// starting a stream.
pub async fn watch_stored(
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
    let mut first = match backend.events(&task.id, from, STORE_READ).await {
        Ok(events) => Some(events),
        Err(e) if e.fault() == Some(Fault::Passing) => None,
        Err(e) => return Err(e.into()),
    };
    let (tx, rx) = mpsc::channel::<Result<TaskEvent, Status>>(WATCH_BUFFER);
    tokio::spawn(async move {
        let mut next = from;
        let mut failing_since = None;
        loop {
            let read = match first.take() {
                Some(events) => Ok(events),
                None => backend.events(&task.id, next, STORE_READ).await,
            };
            let events = match read {
                Ok(events) => {
                    failing_since = None;
                    events
                }
                Err(e)
                    if e.fault() == Some(Fault::Passing)
                        && failing_since
                            .get_or_insert_with(std::time::Instant::now)
                            .elapsed()
                            < STORE_OUTAGE =>
                {
                    tracing::debug!(task = %task.id, error = %e, "a watcher waits for the task store");
                    Vec::new()
                }
                Err(e) => {
                    let _ = tx.send(Err(GatewayError::from(e).into())).await;
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

/// What a watcher of `entry` does about the task store's failure to write, `failing`: nothing
/// while none of the task's events wait for the store; else it gives up with the error (at
/// once when the failure lasts until someone acts), or waits until the time returned.
fn store_verdict(
    entry: &TaskEntry,
    failing: Option<&WriteFailure>,
) -> Result<Option<tokio::time::Instant>, StoreError> {
    let Some(f) = failing.filter(|_| entry.unshown()) else {
        return Ok(None);
    };
    let until = f.since + STORE_OUTAGE;
    if f.error.fault() == Some(Fault::Passing) && tokio::time::Instant::now() < until {
        return Ok(Some(until));
    }
    Err(f.error.clone())
}

/// The error a watcher of `entry` ends with when the store cannot take its events, `e`;
/// `next` is the first event the watcher has not had. With `cancel_on_drop` (RunTask) the
/// task ends with the call.
fn gave_up(entry: &TaskEntry, e: StoreError, next: u64, cancel_on_drop: bool) -> GatewayError {
    let ended = is_final(entry.state());
    let then = if cancel_on_drop && !ended {
        entry.cancel(format!("the task store cannot keep the task's events: {e}"));
        "the task is cancelled, as a RunTask's task ends with its call".to_owned()
    } else {
        let now = if ended { "has ended" } else { "runs on" };
        format!(
            "the task {now}: watch it again with from_seq {next} once the store takes its events"
        )
    };
    let (id, stored) = (&entry.id, entry.visible_seq());
    GatewayError::Store(match e {
        StoreError::Failed {
            store,
            message,
            fault,
        } => StoreError::Failed {
            store,
            message: format!(
                "{message}; task {id}'s events after seq {stored} are not stored, so they are \
                 not shown; {then}"
            ),
            fault,
        },
        other => other,
    })
}

/// The next failure the writer tells, when there is a writer (else never).
async fn failed_again(failures: &mut Option<tokio::sync::watch::Receiver<Option<WriteFailure>>>) {
    match failures {
        Some(rx) => {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Streams `entry`'s events from `from` (0 reads as 1). `from` may be at most one past the
/// last event; for an ended task that is an empty stream. When the client goes away and
/// `cancel_on_drop` is set, the task is cancelled; so it is when the stream ends because the
/// task store cannot keep the task's events (refused at once when that is known already).
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
    let mut failures = entry.store_failures();
    if let Some(rx) = &failures
        && let Err(e) = store_verdict(&entry, rx.borrow().as_ref())
    {
        // Refused now (HTTP 503), rather than a stream that shows nothing.
        return Err(gave_up(&entry, e, from, cancel_on_drop));
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
            let verdict = match failures.as_mut() {
                Some(rx) => store_verdict(&entry, rx.borrow_and_update().as_ref()),
                None => Ok(None),
            };
            let look_again = match verdict {
                Ok(at) => at,
                Err(e) => {
                    let e = gave_up(&entry, e, next, cancel_on_drop);
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            };
            tokio::select! {
                changed = seq_rx.changed() => if changed.is_err() { return },
                _ = tx.closed() => return gone(),
                () = failed_again(&mut failures) => {}
                () = async {
                    match look_again {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
