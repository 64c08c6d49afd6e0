//! App cards: short Markdown notes on how an app is laid out, given to the agents' prompts
//! when the app is in front or named in the goal. A card comes from, in this order, a card
//! server (`POST {url}/app-cards`), a directory the user keeps (`android/app_cards.json`
//! mapping a package to a card file beside it, reread when a file changes) and the built-in
//! cards of the simulated phone's apps. [`AppCards::for_step`] picks a step's cards and
//! [`render`] fits them in a prompt, saying when it cut them.
mod builtin;
mod local;
mod render;
mod server;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use local::{MAX_CARD_BYTES, MAX_ENTRIES, MAX_MAP_BYTES};
pub use render::{Rendered, render};

/// Most cards one step gets (the app in front first, then apps the goal names).
pub const MAX_CARDS_PER_STEP: usize = 3;

/// Where cards come from and how much of them a prompt holds.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AppCardsConfig {
    /// A directory holding `android/app_cards.json` and the card files it names.
    pub dir: Option<PathBuf>,
    /// A card server's base URL; asked first, the local cards answer when it has none, fails
    /// or is late.
    pub server: Option<String>,
    /// Longest wait for the card server, in ms.
    pub server_timeout_ms: u64,
    /// Most characters of cards in one prompt; longer cards are cut and the prompt says so.
    pub max_chars: usize,
    /// Whether the built-in cards of the simulated phone's apps are used.
    pub builtin: bool,
    /// Whether cards are given to prompts at all.
    pub enabled: bool,
}

impl Default for AppCardsConfig {
    fn default() -> Self {
        Self {
            dir: None,
            server: None,
            server_timeout_ms: 2_000,
            max_chars: 2_000,
            builtin: true,
            enabled: true,
        }
    }
}

/// Where a card came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Server,
    Dir,
    Builtin,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Server => "server",
            Source::Dir => "dir",
            Source::Builtin => "built-in",
        }
    }
}

/// One app's card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub package: String,
    pub text: String,
    pub source: Source,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("app_cards.{field}: {message}")]
pub struct CardsError {
    pub field: &'static str,
    pub message: String,
}

/// The cards of one service: cheap to clone, shared by its tasks.
#[derive(Debug, Clone)]
pub struct AppCards {
    cfg: AppCardsConfig,
    local: Option<std::sync::Arc<local::Dir>>,
    server: Option<server::CardServer>,
}

impl AppCards {
    pub fn new(cfg: &AppCardsConfig) -> Result<Self, CardsError> {
        if cfg.max_chars == 0 && cfg.enabled {
            return Err(CardsError {
                field: "max_chars",
                message: "must be at least 1 (set enabled = false to give no cards)".into(),
            });
        }
        let server = match &cfg.server {
            Some(url) => Some(server::CardServer::new(
                url,
                Duration::from_millis(cfg.server_timeout_ms.max(1)),
            )?),
            None => None,
        };
        if let Some(dir) = &cfg.dir
            && !dir.is_dir()
        {
            return Err(CardsError {
                field: "dir",
                message: format!(
                    "{} is not a directory; it should hold android/app_cards.json",
                    dir.display()
                ),
            });
        }
        Ok(Self {
            cfg: cfg.clone(),
            local: cfg
                .dir
                .clone()
                .map(|d| std::sync::Arc::new(local::Dir::new(d))),
            server,
        })
    }

    /// Cards off: every lookup finds none.
    pub fn disabled() -> Self {
        Self {
            cfg: AppCardsConfig {
                enabled: false,
                ..AppCardsConfig::default()
            },
            local: None,
            server: None,
        }
    }

    pub fn config(&self) -> &AppCardsConfig {
        &self.cfg
    }

    /// The cards for a step: the app in front (`foreground`, a package name), then the apps
    /// `goal` names (by a card's label, whole words, any case, or by package name), at most
    /// [`MAX_CARDS_PER_STEP`], each once.
    pub async fn for_step(&self, foreground: Option<&str>, goal: &str) -> Vec<Card> {
        if !self.cfg.enabled {
            return Vec::new();
        }
        let mut packages: Vec<String> = Vec::new();
        if let Some(p) = foreground.map(str::trim).filter(|p| !p.is_empty()) {
            packages.push(p.to_owned());
        }
        for p in self.named_in(goal).await {
            if !packages.contains(&p) {
                packages.push(p);
            }
        }
        let mut cards = Vec::new();
        for package in packages {
            if cards.len() == MAX_CARDS_PER_STEP {
                break;
            }
            if let Some(card) = self.card(&package, goal).await {
                cards.push(card);
            }
        }
        cards
    }

    /// The card of `package`: the server's, else the directory's, else the built-in one.
    pub async fn card(&self, package: &str, instruction: &str) -> Option<Card> {
        if !self.cfg.enabled {
            return None;
        }
        if let Some(server) = &self.server
            && let Some(text) = server.card(package, instruction).await
        {
            return Some(Card {
                package: package.to_owned(),
                text,
                source: Source::Server,
            });
        }
        if let Some(dir) = &self.local {
            let dir = std::sync::Arc::clone(dir);
            let p = package.to_owned();
            if let Ok(Some(text)) = tokio::task::spawn_blocking(move || dir.card(&p)).await {
                return Some(Card {
                    package: package.to_owned(),
                    text,
                    source: Source::Dir,
                });
            }
        }
        if self.cfg.builtin {
            return builtin::card(package).map(|text| Card {
                package: package.to_owned(),
                text: text.to_owned(),
                source: Source::Builtin,
            });
        }
        None
    }

    /// The "about the app" text of a prompt: `given` (a card the task's request carries)
    /// first, then the step's cards ([`AppCards::for_step`]) within `max_chars`, and the line
    /// saying they were cut when they were; none when there is nothing to say.
    pub async fn prompt_text(
        &self,
        foreground: Option<&str>,
        goal: &str,
        given: Option<&str>,
    ) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(g) = given.map(str::trim).filter(|g| !g.is_empty()) {
            parts.push(g.to_owned());
        }
        let cards = self.for_step(foreground, goal).await;
        let rendered = render(&cards, self.cfg.max_chars);
        if !rendered.text.is_empty() {
            parts.push(rendered.text.clone());
        }
        if let Some(note) = rendered.cap_note() {
            parts.push(note);
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Packages whose label or name `goal` mentions.
    async fn named_in(&self, goal: &str) -> Vec<String> {
        let mut labels: Vec<(String, String)> = Vec::new();
        if let Some(dir) = &self.local {
            let dir = std::sync::Arc::clone(dir);
            if let Ok(l) = tokio::task::spawn_blocking(move || dir.labels()).await {
                labels.extend(l);
            }
        }
        if self.cfg.builtin {
            labels.extend(
                builtin::labels()
                    .iter()
                    .map(|(p, l)| ((*p).to_owned(), (*l).to_owned())),
            );
        }
        let mut out: Vec<String> = Vec::new();
        for (package, label) in labels {
            let named = mentions(goal, &label) || goal.contains(package.as_str());
            if named && !out.contains(&package) {
                out.push(package);
            }
        }
        out
    }
}

/// Whether `text` holds `word` (one or more words) as whole words, in any case.
pub fn mentions(text: &str, word: &str) -> bool {
    let word = word.trim().to_lowercase();
    if word.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let mut from = 0;
    while let Some(at) = text[from..].find(&word) {
        let start = from + at;
        let end = start + word.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if boundary(before) && boundary(after) {
            return true;
        }
        from = start + word.chars().next().map_or(1, char::len_utf8);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn labels_are_matched_as_whole_words_in_any_case() {
        assert!(mentions("Open settings and turn on Wi-Fi", "Settings"));
        assert!(mentions("add an alarm in the Clock app", "clock"));
        assert!(mentions("Send a message with Messages", "messages"));
        assert!(!mentions("Check the clockwork", "Clock"));
        assert!(!mentions("what are my notes?", "Note"));
        assert!(mentions("öffne Notizen", "Notizen"));
        assert!(!mentions("anything", ""));
    }
}
