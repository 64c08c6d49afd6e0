//! Work a model call waits on comes first. A run counts itself as foreground from the moment
//! it starts a step (or the run) until its model call goes out: reading the device, rendering
//! the prompt. Work no model call waits on yet, such as making a run's JavaScript session
//! before its first script, waits until no run of this executor is in the foreground, or
//! until it is needed. When many tasks start at once, their sessions are then made while
//! their first model calls are out, instead of delaying the other tasks' first calls.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use droidmesh_sandbox::Session;
use tokio::sync::{Notify, OnceCell};
use tokio::task::JoinHandle;

/// How many runs of this executor are preparing a model call.
#[derive(Debug, Default)]
pub struct Foreground {
    busy: AtomicUsize,
    idle: Notify,
}

/// One run in the foreground until dropped.
#[derive(Debug)]
pub struct InForeground(Arc<Foreground>);

impl Foreground {
    pub fn enter(self: &Arc<Self>) -> InForeground {
        self.busy.fetch_add(1, Ordering::AcqRel);
        InForeground(Arc::clone(self))
    }

    /// Returns once no run is in the foreground.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so a drop in between still wakes us.
            notified.as_mut().enable();
            if self.busy.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for InForeground {
    fn drop(&mut self) {
        if self.0.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A run's JavaScript session, made in the background once the executor's foreground is idle,
/// or at once when a script needs it. Dropping it stops a session still being made.
pub struct BackgroundSession {
    made: OnceCell<Result<Session, String>>,
    making: Mutex<Option<JoinHandle<Result<Session, String>>>>,
    needed: Arc<Notify>,
}

impl BackgroundSession {
    /// Starts `make` (which creates the session) when `foreground` is idle or the session is
    /// asked for, whichever comes first.
    pub fn new(
        foreground: Arc<Foreground>,
        make: impl Future<Output = Result<Session, String>> + Send + 'static,
    ) -> Self {
        let needed = Arc::new(Notify::new());
        let asked = Arc::clone(&needed);
        let making = tokio::spawn(async move {
            tokio::select! {
                () = foreground.idle() => {}
                () = asked.notified() => {}
            }
            make.await
        });
        Self {
            made: OnceCell::new(),
            making: Mutex::new(Some(making)),
            needed,
        }
    }

    /// The session, waiting for it to be made (and starting it if it has not started).
    pub async fn get(&self) -> Result<&Session, String> {
        let made = self
            .made
            .get_or_init(|| async {
                // A stored permit: the maker sees it even if it is not waiting yet.
                self.needed.notify_one();
                let making = self
                    .making
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                match making {
                    Some(handle) => handle.await.unwrap_or_else(|e| {
                        Err(format!("the JavaScript sandbox could not start: {e}"))
                    }),
                    None => Err("the JavaScript sandbox could not start: it was dropped".into()),
                }
            })
            .await;
        made.as_ref().map_err(Clone::clone)
    }
}

impl Drop for BackgroundSession {
    fn drop(&mut self) {
        if let Some(handle) = self
            .making
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use droidmesh_sandbox::{Capabilities, SandboxLimits};

    /// A maker that records that it started.
    fn maker(started: &Arc<AtomicBool>) -> impl Future<Output = Result<Session, String>> + use<> {
        let started = Arc::clone(started);
        async move {
            started.store(true, Ordering::SeqCst);
            Session::start(SandboxLimits::default(), Capabilities::new())
                .await
                .map_err(|e| e.to_string())
        }
    }

    /// Lets every other task of the one-thread runtime run as far as it can.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn idle_waits_for_every_run_to_leave_the_foreground() {
        let fg = Arc::new(Foreground::default());
        tokio::time::timeout(Duration::from_secs(5), fg.idle())
            .await
            .expect("nothing in the foreground: idle at once");
        let (a, b) = (fg.enter(), fg.enter());
        let waiter = tokio::spawn({
            let fg = Arc::clone(&fg);
            async move { fg.idle().await }
        });
        settle().await;
        assert!(!waiter.is_finished(), "two runs in the foreground");
        drop(a);
        settle().await;
        assert!(!waiter.is_finished(), "one run still in the foreground");
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("idle once the last run left")
            .unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_session_is_made_once_the_foreground_is_idle() {
        let fg = Arc::new(Foreground::default());
        let busy = fg.enter();
        let started = Arc::new(AtomicBool::new(false));
        let session = BackgroundSession::new(Arc::clone(&fg), maker(&started));
        settle().await;
        assert!(
            !started.load(Ordering::SeqCst),
            "made while a run prepares a model call"
        );
        drop(busy);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !started.load(Ordering::SeqCst) {
            assert!(tokio::time::Instant::now() < deadline, "not made once idle");
            tokio::task::yield_now().await;
        }
        let s = tokio::time::timeout(Duration::from_secs(10), session.get())
            .await
            .expect("the session comes")
            .expect("the session starts");
        let out = s.run("1 + 1").await.unwrap();
        assert_eq!(out.value, Some(serde_json::json!(2)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_session_asked_for_is_made_even_while_the_foreground_is_busy() {
        let fg = Arc::new(Foreground::default());
        let _busy = fg.enter();
        let started = Arc::new(AtomicBool::new(false));
        let session = BackgroundSession::new(Arc::clone(&fg), maker(&started));
        let s = tokio::time::timeout(Duration::from_secs(10), session.get())
            .await
            .expect("asked for: made without waiting for idle")
            .expect("the session starts");
        assert!(started.load(Ordering::SeqCst));
        assert_eq!(
            s.run("'ok'").await.unwrap().value,
            Some(serde_json::json!("ok"))
        );
        // Asked again: the same session.
        let again = session.get().await.expect("kept");
        assert!(std::ptr::eq(s, again));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_start_is_reported_to_every_ask() {
        let fg = Arc::new(Foreground::default());
        let session = BackgroundSession::new(fg, async { Err("no threads left".to_string()) });
        assert_eq!(
            session.get().await.err().as_deref(),
            Some("no threads left")
        );
        assert_eq!(
            session.get().await.err().as_deref(),
            Some("no threads left")
        );
    }
}
