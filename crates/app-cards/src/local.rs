//! Cards from a directory the user keeps: `android/app_cards.json` maps a package name to a
//! card file in that folder (`{"com.google.android.gm": "gmail.md"}`), or to
//! `{"file": "gmail.md", "label": "Gmail"}` to name the app for goals that mention it (else the
//! card's first `# ` heading names it). Every lookup looks at the files' modification time and
//! size, so an edited map or card is read again on the next step; a map or card that cannot be
//! read is skipped with a warning (the last good map is kept), never an error of the step.
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Deserialize;

/// Longest `app_cards.json`, in bytes.
pub const MAX_MAP_BYTES: u64 = 256 * 1024;
/// Most packages a map names.
pub const MAX_ENTRIES: usize = 200;
/// Longest card file, in bytes; a longer one is not used.
pub const MAX_CARD_BYTES: u64 = 64 * 1024;

/// What identifies a version of a file: its modification time and size.
type Stamp = (SystemTime, u64);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Entry {
    File(String),
    Full {
        file: String,
        #[serde(default)]
        label: Option<String>,
    },
}

#[derive(Debug, Clone)]
struct Mapped {
    file: PathBuf,
    label: Option<String>,
}

#[derive(Debug, Clone)]
struct Text {
    stamp: Stamp,
    text: String,
    heading: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    map_stamp: Option<Stamp>,
    map: HashMap<String, Mapped>,
    /// Card texts by file, as last read (at most one per mapped file).
    texts: HashMap<PathBuf, Text>,
}

/// One card directory.
#[derive(Debug)]
pub struct Dir {
    root: PathBuf,
    state: Mutex<State>,
}

impl Dir {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            state: Mutex::new(State::default()),
        }
    }

    fn folder(&self) -> PathBuf {
        self.root.join("android")
    }

    /// The card of `package`, read again when its file changed.
    pub fn card(&self, package: &str) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh_map(&mut state);
        let file = state.map.get(package)?.file.clone();
        self.text(&mut state, &file).map(|t| t.text)
    }

    /// (package, label) of every card whose app has a name: the map's label, else the card's
    /// first heading.
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh_map(&mut state);
        let entries: Vec<(String, Mapped)> = state
            .map
            .iter()
            .map(|(p, m)| (p.clone(), m.clone()))
            .collect();
        let mut out = Vec::new();
        for (package, mapped) in entries {
            let label = match mapped.label {
                Some(l) => Some(l),
                None => self.text(&mut state, &mapped.file).and_then(|t| t.heading),
            };
            if let Some(label) = label {
                out.push((package, label));
            }
        }
        out.sort();
        out
    }

    fn refresh_map(&self, state: &mut State) {
        let path = self.folder().join("app_cards.json");
        let stamp = match stamp(&path) {
            Some(s) => s,
            None => {
                if state.map_stamp.take().is_some() {
                    tracing::warn!(path = %path.display(), "app cards: the map is gone; no cards from the directory");
                }
                state.map.clear();
                state.texts.clear();
                return;
            }
        };
        if state.map_stamp == Some(stamp) {
            return;
        }
        state.map_stamp = Some(stamp);
        match self.read_map(&path, stamp.1) {
            Ok(map) => {
                state
                    .texts
                    .retain(|f, _| map.values().any(|m| &m.file == f));
                state.map = map;
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "app cards: the map cannot be used; the last good one is kept");
            }
        }
    }

    fn read_map(&self, path: &Path, len: u64) -> Result<HashMap<String, Mapped>, String> {
        if len > MAX_MAP_BYTES {
            return Err(format!(
                "it is {len} bytes, at most {MAX_MAP_BYTES} are read"
            ));
        }
        let raw = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let entries: HashMap<String, Entry> = serde_json::from_str(&raw)
            .map_err(|e| format!("not a JSON object of package to card file: {e}"))?;
        if entries.len() > MAX_ENTRIES {
            return Err(format!(
                "it names {} packages, at most {MAX_ENTRIES} are kept",
                entries.len()
            ));
        }
        let mut map = HashMap::new();
        for (package, entry) in entries {
            let (file, label) = match entry {
                Entry::File(f) => (f, None),
                Entry::Full { file, label } => (file, label),
            };
            // A card lives in the folder: no absolute paths, no `..`.
            let rel = Path::new(&file);
            let inside =
                !file.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
            if !inside {
                tracing::warn!(package = %package, file = %file, "app cards: a card file must be a path inside the android folder; skipped");
                continue;
            }
            map.insert(
                package,
                Mapped {
                    file: self.folder().join(rel),
                    label: label.filter(|l| !l.trim().is_empty()),
                },
            );
        }
        Ok(map)
    }

    fn text(&self, state: &mut State, file: &Path) -> Option<Text> {
        let Some(now) = stamp(file) else {
            state.texts.remove(file);
            return None;
        };
        if let Some(t) = state.texts.get(file)
            && t.stamp == now
        {
            return Some(t.clone());
        }
        if now.1 > MAX_CARD_BYTES {
            tracing::warn!(file = %file.display(), bytes = now.1, "app cards: a card longer than {MAX_CARD_BYTES} bytes is not used");
            state.texts.remove(file);
            return None;
        }
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t.trim().to_owned(),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "app cards: a card cannot be read");
                state.texts.remove(file);
                return None;
            }
        };
        let heading = text
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty());
        let t = Text {
            stamp: now,
            text,
            heading,
        };
        state.texts.insert(file.to_owned(), t.clone());
        Some(t)
    }
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    Some((meta.modified().ok()?, meta.len()))
}
