//! Data the host sends on an open stream: a command's standard input (shell v2 packets
//! unpacked), acknowledged once the stream's bounded stdin queue took it; sync requests,
//! answered in order; and data for a stream that takes none, acknowledged and dropped.
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::run::unpack;
use super::{Conn, HOST_WINDOW, Kind};
use crate::wire::A_OKAY;

/// Host data on stream `local`. Returns false if the host stopped reading.
pub(super) fn host_data(conn: &Conn, host: u32, local: u32, payload: Vec<u8>) -> bool {
    let mut streams = conn.lock();
    let Some(entry) = streams.get_mut(&local).filter(|e| e.host == host) else {
        return true;
    };
    match &mut entry.kind {
        Kind::Stdin(feed) => {
            if feed.unacked.load(Ordering::Acquire) >= HOST_WINDOW {
                drop(streams);
                tracing::debug!(
                    "the host sent more than {HOST_WINDOW} WRTEs without waiting for OKAY; \
                     closing the stream"
                );
                conn.close(local);
                return true;
            }
            let (chunks, eof) = if feed.v2 {
                match unpack(&mut feed.partial, &payload) {
                    Some(parsed) => parsed,
                    None => {
                        drop(streams);
                        tracing::debug!("malformed shell v2 packet; closing the stream");
                        conn.close(local);
                        return true;
                    }
                }
            } else {
                (vec![payload], false)
            };
            let mut chunks: VecDeque<Vec<u8>> =
                chunks.into_iter().filter(|c| !c.is_empty()).collect();
            feed.fed |= !chunks.is_empty();
            let tx = feed.tx.clone();
            if eof {
                feed.tx = None;
            }
            let unacked = feed.unacked.clone();
            // The OKAY goes out once the stdin queue took the data: that is the backpressure.
            // With room in the queue (and no earlier data still waiting for it) that is now.
            if unacked.load(Ordering::Acquire) == 0 {
                while let Some(c) = chunks.pop_front() {
                    match tx.as_ref().map(|tx| tx.try_send(c)) {
                        Some(Ok(())) => {}
                        Some(Err(mpsc::error::TrySendError::Full(c))) => {
                            chunks.push_front(c);
                            break;
                        }
                        // Input closed, or the command no longer reads it: dropped.
                        Some(Err(mpsc::error::TrySendError::Closed(_))) | None => chunks.clear(),
                    }
                }
                if chunks.is_empty() {
                    drop(streams);
                    return conn.control(A_OKAY, local, host, &[]);
                }
            }
            unacked.fetch_add(1, Ordering::AcqRel);
            drop(streams);
            let conn = conn.clone();
            tokio::spawn(async move {
                if let Some(tx) = tx {
                    for c in chunks {
                        if tx.send(c).await.is_err() {
                            break;
                        }
                    }
                }
                unacked.fetch_sub(1, Ordering::AcqRel);
                if conn.lock().contains_key(&local) {
                    conn.control(A_OKAY, local, host, &[]);
                }
            });
            true
        }
        Kind::Sync(session, replies) => {
            let fed = session.feed(&payload, &conn.device);
            let queued = fed.reply.is_empty() && !fed.quit
                || replies.try_send((fed.reply, fed.quit)).is_ok();
            drop(streams);
            if !queued {
                tracing::debug!("the host pipelined more sync requests than are kept; closing");
                conn.close(local);
                return true;
            }
            conn.control(A_OKAY, local, host, &[])
        }
        Kind::Discard => {
            drop(streams);
            conn.control(A_OKAY, local, host, &[])
        }
    }
}
