//! Runs start a few at a time, in the order they arrived. A run's start (its setup, the first
//! read of the device, the first prompt) lasts until its first model call goes out. When many
//! tasks start at once and every start proceeds together, each gets a sliver of the CPU and
//! nearly all first model calls go out together at the end of the burst; their replies come
//! back as bunched, and every later step of every task meets the same crowd. Admitted a few
//! at a time, the first calls go out spread over the burst, and so do the later steps.
//!
//! A start holds its place until its first model call goes out or for at most `hold`,
//! whichever comes first, so a slow device (a real phone's first read takes a second or two)
//! delays the starts queued behind it by at most `hold` per place.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// The places starts take turns in; `None` places: every start proceeds at once.
#[derive(Debug)]
pub struct StartAdmission {
    places: Option<Arc<Semaphore>>,
    hold: Duration,
}

/// A start's place, given back when dropped or once its hold has run out.
#[derive(Debug)]
pub struct Admitted {
    place: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
    expiry: Option<JoinHandle<()>>,
}

impl StartAdmission {
    /// `places` starts at once (0: no limit), each for at most `hold`.
    pub fn new(places: usize, hold: Duration) -> Self {
        Self {
            places: (places > 0).then(|| Arc::new(Semaphore::new(places))),
            hold,
        }
    }

    /// Waits for a place, in arrival order (at once when there is no limit).
    pub async fn admit(&self) -> Admitted {
        let Some(places) = &self.places else {
            return Admitted {
                place: Arc::default(),
                expiry: None,
            };
        };
        // The semaphore is never closed, so acquiring only fails if it were.
        let place = Arc::new(Mutex::new(places.clone().acquire_owned().await.ok()));
        let held = Arc::clone(&place);
        let hold = self.hold;
        let expiry = tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            held.lock().unwrap_or_else(PoisonError::into_inner).take();
        });
        Admitted {
            place,
            expiry: Some(expiry),
        }
    }

    /// Places free now (`None`: no limit).
    pub fn free(&self) -> Option<usize> {
        self.places.as_ref().map(|p| p.available_permits())
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(expiry) = self.expiry.take() {
            expiry.abort();
        }
        self.place
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::timeout;

    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn starts_wait_for_a_place_in_arrival_order() {
        let gate = Arc::new(StartAdmission::new(1, LONG));
        let first = gate.admit().await;
        assert_eq!(gate.free(), Some(0));
        let (tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        for n in [1, 2] {
            let (gate, tx) = (gate.clone(), tx.clone());
            tokio::spawn(async move {
                let place = gate.admit().await;
                tx.send(n).unwrap();
                drop(place);
            });
            // Each waiter queues before the next is spawned.
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert!(
            order.try_recv().is_err(),
            "a start went ahead without a place"
        );
        drop(first);
        assert_eq!(order.recv().await, Some(1));
        assert_eq!(order.recv().await, Some(2));
        assert_eq!(gate.free(), Some(1));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_place_is_given_up_once_its_hold_runs_out() {
        let gate = StartAdmission::new(1, Duration::from_millis(20));
        let slow = gate.admit().await;
        let started = tokio::time::Instant::now();
        let next = timeout(Duration::from_secs(1), gate.admit())
            .await
            .expect("the next start waited past the first one's hold");
        assert_eq!(started.elapsed(), Duration::from_millis(20));
        // The slow start ending later gives back nothing twice.
        drop(slow);
        assert_eq!(gate.free(), Some(0));
        drop(next);
        assert_eq!(gate.free(), Some(1));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn without_a_limit_every_start_proceeds_at_once() {
        let gate = StartAdmission::new(0, LONG);
        let held: Vec<Admitted> = admit_all(&gate, 50).await;
        assert_eq!(held.len(), 50);
        assert_eq!(gate.free(), None);
    }

    async fn admit_all(gate: &StartAdmission, n: usize) -> Vec<Admitted> {
        let mut held = Vec::new();
        for _ in 0..n {
            held.push(
                timeout(Duration::from_millis(1), gate.admit())
                    .await
                    .expect("a start waited with no limit set"),
            );
        }
        held
    }
}
