//! A card server: `POST {url}/app-cards` with `{"package_name", "instruction", "platform":
//! "android"}` answers `{"app_card": "..."}`, or 404 when it has no card. An answer is used
//! only when it comes within the timeout, is at most [`MAX_ANSWER_BYTES`] and holds a card;
//! anything else (an error, a late or malformed answer) falls back to the local cards, with a
//! warning. Answers are kept a short while, bounded, so a task does not ask every step.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::CardsError;

/// Longest answer read from the server.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// How long an answer (a card or "none") is kept.
const KEEP: Duration = Duration::from_secs(60);
/// Most answers kept.
const MAX_KEPT: usize = 256;
/// Most characters of the instruction sent.
const MAX_INSTRUCTION_CHARS: usize = 4_000;

#[derive(Debug, Deserialize)]
struct Answer {
    app_card: Option<String>,
}

type Kept = HashMap<(String, String), (Instant, Option<String>)>;

#[derive(Debug, Clone)]
pub struct CardServer {
    url: String,
    timeout: Duration,
    client: reqwest::Client,
    kept: Arc<Mutex<Kept>>,
}

impl CardServer {
    pub fn new(base: &str, timeout: Duration) -> Result<Self, CardsError> {
        let base = base.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(CardsError {
                field: "server",
                message: format!("must be an http:// or https:// URL, got {base:?}"),
            });
        }
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let _already_installed = rustls::crypto::ring::default_provider().install_default();
        });
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .user_agent(concat!("droidmesh-app-cards/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CardsError {
                field: "server",
                message: format!("cannot build the http client: {e}"),
            })?;
        Ok(Self {
            url: format!("{base}/app-cards"),
            timeout,
            client,
            kept: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The server's card for `package`, or none (it has none, or did not answer well).
    pub async fn card(&self, package: &str, instruction: &str) -> Option<String> {
        let instruction: String = instruction.chars().take(MAX_INSTRUCTION_CHARS).collect();
        let key = (package.to_owned(), instruction.clone());
        {
            let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, card)) = kept.get(&key)
                && at.elapsed() < KEEP
            {
                return card.clone();
            }
        }
        let answer = tokio::time::timeout(self.timeout, self.ask(package, &instruction)).await;
        let card = match answer {
            Ok(Ok(card)) => card,
            Ok(Err(e)) => {
                tracing::warn!(url = %self.url, package, error = %e, "app cards: the card server failed; local cards are used");
                return None;
            }
            Err(_) => {
                tracing::warn!(url = %self.url, package, timeout_ms = self.timeout.as_millis() as u64, "app cards: the card server did not answer in time; local cards are used");
                return None;
            }
        };
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= MAX_KEPT {
            kept.retain(|_, (at, _)| at.elapsed() < KEEP);
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
        }
        kept.insert(key, (Instant::now(), card.clone()));
        card
    }

    async fn ask(&self, package: &str, instruction: &str) -> Result<Option<String>, String> {
        let body = serde_json::json!({
            "package_name": package,
            "instruction": instruction,
            "platform": "android",
        });
        let mut resp = self
            .client
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(format!("it answered {status}"));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(format!(
                    "its answer is longer than {MAX_ANSWER_BYTES} bytes"
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|e| format!("its answer is not {{\"app_card\": \"...\"}}: {e}"))?;
        Ok(answer
            .app_card
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty()))
    }
}
