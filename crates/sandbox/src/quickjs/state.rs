//! Per-instance state shared by the interrupt handler and the host closures: the run's control
//! and its console buffer.

use std::{
    cell::{Cell, RefCell},
    time::Duration,
};

use crate::{RunControl, StopReason};

/// State shared by the interrupt handler and the host closures of one instance.
pub(crate) struct Shared {
    /// The run in progress, if any.
    pub(crate) control: RefCell<Option<RunControl>>,
    /// Set once the run must stop; stays set until the run ends.
    pub(crate) tripped: Cell<Option<StopReason>>,
    /// Console output of the run in progress.
    pub(crate) console: RefCell<Console>,
}

impl Shared {
    pub(crate) fn new(console_cap: usize) -> Self {
        Self {
            control: RefCell::new(None),
            tripped: Cell::new(None),
            console: RefCell::new(Console::new(console_cap)),
        }
    }

    /// The reason the run must stop, latching it once seen.
    pub(crate) fn stop_reason(&self) -> Option<StopReason> {
        if let Some(reason) = self.tripped.get() {
            return Some(reason);
        }
        let reason = self.control.try_borrow().ok()?.as_ref()?.check();
        if reason.is_some() {
            self.tripped.set(reason);
        }
        reason
    }

    pub(crate) fn remaining(&self) -> Duration {
        self.control
            .try_borrow()
            .ok()
            .and_then(|c| c.as_ref().map(RunControl::remaining))
            .unwrap_or_default()
    }
}

/// Console output of one run, capped.
pub(crate) struct Console {
    text: String,
    cap: usize,
    dropped: usize,
}

impl Console {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            text: String::new(),
            cap,
            dropped: 0,
        }
    }

    pub(crate) fn push(&mut self, prefix: &str, line: &str) {
        let needed = prefix.len() + line.len() + 1;
        if self.dropped > 0 {
            self.dropped += needed;
            return;
        }
        let room = self.cap.saturating_sub(self.text.len());
        if needed <= room {
            self.text.push_str(prefix);
            self.text.push_str(line);
            self.text.push('\n');
            return;
        }
        let whole = format!("{prefix}{line}");
        let mut cut = room.min(whole.len());
        while !whole.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.push_str(&whole[..cut]);
        self.dropped = needed - cut;
    }

    /// The captured text with a `[truncated N bytes]` line if output was dropped; resets.
    pub(crate) fn take(&mut self) -> String {
        let mut text = std::mem::take(&mut self.text);
        if self.dropped > 0 {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[truncated {} bytes]\n", self.dropped));
        }
        self.dropped = 0;
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_keeps_whole_characters_and_counts_the_rest() {
        let mut console = Console::new(10);
        console.push("", "abc");
        // 6 bytes of room: "12345" and not half of the two-byte "é".
        console.push("", "12345é");
        console.push("[warn] ", "x");
        assert_eq!(console.take(), "abc\n12345\n[truncated 12 bytes]\n");
        console.push("", "fresh");
        assert_eq!(console.take(), "fresh\n");
    }
}
