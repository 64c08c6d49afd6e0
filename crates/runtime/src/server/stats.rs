//! What a gRPC port did with its connections, counted as it happens: shared with the owner of
//! the port (tests, figures) the way [`crate::LoadState`] is.
use std::sync::atomic::{AtomicU64, Ordering};

/// Connection counts of one port since it started serving.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    pub(crate) open: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) made_room: AtomicU64,
    pub(crate) no_preface: AtomicU64,
    pub(crate) idle_closed: AtomicU64,
    pub(crate) stalled: AtomicU64,
}

impl ConnectionStats {
    /// Connections the port holds now (the ones it is closing included).
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections accepted and held, in all.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Connections closed at once because the port was at its cap and none could make room.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections closed to make room for a new one at the cap.
    pub fn made_room(&self) -> u64 {
        self.made_room.load(Ordering::Relaxed)
    }

    /// Connections closed for not sending the HTTP/2 preface within the deadline.
    pub fn no_preface(&self) -> u64 {
        self.no_preface.load(Ordering::Relaxed)
    }

    /// Connections told to go away after the idle timeout.
    pub fn idle_closed(&self) -> u64 {
        self.idle_closed.load(Ordering::Relaxed)
    }

    /// Connections closed because the client took nothing for the write-stall limit.
    pub fn stalled(&self) -> u64 {
        self.stalled.load(Ordering::Relaxed)
    }

    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
