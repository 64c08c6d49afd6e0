//! Streams a task's events to a client: the log from a sequence number, then live events,
//! ending after the completed event.
use std::pin::Pin;
use std::sync::Arc;

use droidmesh_proto::v1::{TaskEvent, task_event};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::error::GatewayError;
use crate::store::{TaskEntry, is_final};

pub type EventStream = Pin<Box<dyn Stream<Item = Result<TaskEvent, Status>> + Send>>;

/// Events sent to one watcher ahead of its reading.
const WATCH_BUFFER: usize = 64;

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
    if from > end.last_seq + 1 {
        return Err(GatewayError::OutOfRange(format!(
            "from_seq {from} is past the end of task {}'s log: its last event is seq {}; pass at most {} (last + 1 to wait for the next event)",
            entry.id,
            end.last_seq,
            end.last_seq + 1
        )));
    }
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
