//! Waits that end at their deadline to within the OS's timer slack. tokio's timer rounds a
//! deadline up to the next millisecond and fires it when a worker next turns the driver, which
//! under load added ~1.2 ms on average to every reply of a model double answering after 500 ms:
//! time a benchmark would charge to the client. One thread per process keeps the deadlines and
//! sleeps until the earliest.
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Instant;
use tokio::sync::oneshot;

type Wait = (Instant, oneshot::Sender<()>);

/// Resolves at `deadline`. Falls back to tokio's timer if the alarm thread cannot be started.
pub(crate) async fn until(deadline: Instant) {
    let (tx, rx) = oneshot::channel();
    let sent = alarm().is_some_and(|a| a.send((deadline, tx)).is_ok());
    if !sent || rx.await.is_err() {
        tokio::time::sleep_until(deadline.into()).await;
    }
}

fn alarm() -> Option<&'static Sender<Wait>> {
    static ALARM: OnceLock<Option<Sender<Wait>>> = OnceLock::new();
    ALARM
        .get_or_init(|| {
            let (tx, rx) = channel();
            std::thread::Builder::new()
                .name("mock-llm-alarm".into())
                .spawn(move || ring(&rx))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Wakes each waiter at its deadline, earliest first. Waits are as many as the requests a
/// double holds at once; a waiter that went away is skipped.
fn ring(rx: &Receiver<Wait>) {
    let mut waiting: BTreeMap<(Instant, u64), oneshot::Sender<()>> = BTreeMap::new();
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        while let Some(due) = waiting.first_entry() {
            if due.key().0 > now {
                break;
            }
            let _gone = due.remove().send(());
        }
        let next = match waiting.first_key_value() {
            Some(((at, _), _)) => rx.recv_timeout(at.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok((at, tx)) => {
                seq += 1;
                waiting.insert((at, seq), tx);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[tokio::test]
    async fn waits_end_in_deadline_order_and_not_before() {
        let start = std::time::Instant::now();
        let later = tokio::spawn(super::until(start + Duration::from_millis(300)));
        let sooner = super::until(start + Duration::from_millis(10));
        sooner.await;
        let woke = start.elapsed();
        assert!(woke >= Duration::from_millis(10), "{woke:?}");
        assert!(
            !later.is_finished(),
            "the later wait ended with the sooner one"
        );
        later.await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(300));
        // A deadline already past resolves at once.
        tokio::time::timeout(Duration::from_secs(5), super::until(start))
            .await
            .unwrap();
    }
}
