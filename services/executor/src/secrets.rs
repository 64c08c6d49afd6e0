//! The secrets `type_secret` types. They come from the executor's environment
//! (`DROIDMESH_SECRET_<ID>`, read at start) and, with `[secrets] dir`, from one file per id in
//! that directory, named by the id, as a Kubernetes Secret volume mounts them (a trailing
//! newline is not part of the value). Ids are case-insensitive. The directory is read again
//! when it changes (looked at at most once a second, when a run asks for secrets), so a
//! renewed Secret is used without a restart; a changed directory that cannot be read keeps
//! the previous values and the log says why. A run whose request names a secret held nowhere
//! is refused at its start, naming the id and where it was looked for. A value never reaches
//! a log, an error or a span: only ids, file names and sizes do.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use crate::error::ExecutorError;

/// How often, at most, the directory is looked at for a change.
const RECHECK: Duration = Duration::from_secs(1);
/// Largest secret file read.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most entries the directory may hold (files, and a Secret volume's own links).
const MAX_ENTRIES: usize = 1024;
/// The prefix of the environment variables that hold secrets.
pub const ENV_PREFIX: &str = "DROIDMESH_SECRET_";

/// `[secrets]` in droidmesh.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsConfig {
    /// A directory of secret files, one per id and named by it (a mounted Kubernetes
    /// Secret); unset: the environment's `DROIDMESH_SECRET_<ID>` only.
    pub dir: Option<PathBuf>,
}

/// What the directory looked like when read: each entry's name, modification time and size
/// (links followed), so a Secret volume's swap of its data is seen.
type Stamp = Vec<(String, Option<SystemTime>, u64)>;

struct Loaded {
    files: Arc<HashMap<String, String>>,
    stamp: Option<Stamp>,
    checked: Instant,
}

/// The secrets an executor holds; clones share them.
#[derive(Clone)]
pub struct Secrets(Arc<Inner>);

struct Inner {
    /// From the environment, by lower-case id.
    env: HashMap<String, String>,
    dir: Option<PathBuf>,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for Secrets {
    // Ids only: never a value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut env: Vec<&String> = self.0.env.keys().collect();
        env.sort();
        f.debug_struct("Secrets")
            .field("env", &env)
            .field("dir", &self.0.dir)
            .finish()
    }
}

impl From<HashMap<String, String>> for Secrets {
    /// Secrets given as the environment would give them (id → value), no directory.
    fn from(values: HashMap<String, String>) -> Self {
        Self(Arc::new(Inner::new(values, None)))
    }
}

impl Inner {
    fn new(env: HashMap<String, String>, dir: Option<PathBuf>) -> Self {
        Self {
            env: env
                .into_iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect(),
            dir,
            loaded: Mutex::new(Loaded {
                files: Arc::default(),
                stamp: None,
                checked: Instant::now(),
            }),
        }
    }
}

impl Secrets {
    /// The process's `DROIDMESH_SECRET_*` variables and the files of `cfg.dir`; a directory
    /// that cannot be read at start is an error (the executor does not start without the
    /// secrets it was told to hold).
    pub fn load(cfg: &SecretsConfig) -> Result<Self, String> {
        Self::new(crate::secrets_from_env(), cfg.dir.clone())
    }

    /// `env` (id → value) and the files of `dir`.
    pub fn new(env: HashMap<String, String>, dir: Option<PathBuf>) -> Result<Self, String> {
        let mut inner = Inner::new(env, dir);
        if let Some(dir) = &inner.dir {
            let (stamp, files) = read(dir, &inner.env)?;
            let loaded = inner.loaded.get_mut().unwrap_or_else(|p| p.into_inner());
            loaded.files = Arc::new(files);
            loaded.stamp = Some(stamp);
        }
        Ok(Self(Arc::new(inner)))
    }

    /// The files' secrets, read again first if the directory changed.
    fn files(&self) -> Arc<HashMap<String, String>> {
        let inner = &self.0;
        let mut loaded = inner.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = &inner.dir
            && loaded.checked.elapsed() >= RECHECK
        {
            reload(dir, &inner.env, &mut loaded);
        }
        loaded.files.clone()
    }

    /// Looks at the directory at once, as if a second had passed since the last look.
    #[cfg(test)]
    fn look_again(&self) {
        let mut loaded = self.0.loaded.lock().unwrap_or_else(|p| p.into_inner());
        loaded.checked = Instant::now()
            .checked_sub(RECHECK)
            .unwrap_or(loaded.checked);
    }

    /// The value of each id a request names, keyed by the id as written; an id held nowhere
    /// refuses the whole request, naming it and where it was looked for.
    pub fn for_request(&self, ids: &[String]) -> Result<HashMap<String, String>, ExecutorError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let files = self.files();
        let mut out = HashMap::with_capacity(ids.len());
        for id in ids {
            let key = id.to_ascii_lowercase();
            match self.0.env.get(&key).or_else(|| files.get(&key)) {
                Some(v) => {
                    out.insert(id.clone(), v.clone());
                }
                None => return Err(ExecutorError::SecretMissing(self.missing(id))),
            }
        }
        Ok(out)
    }

    /// Why `id` is not held: where it was looked for, and what to do.
    fn missing(&self, id: &str) -> String {
        let shown: String = id.chars().take(100).collect();
        let var = format!("{ENV_PREFIX}{}", shown.to_ascii_uppercase());
        let places = match &self.0.dir {
            Some(dir) => format!(
                "the environment variable {var} and a file named '{shown}' (any case) in {}",
                dir.display()
            ),
            None => format!("the environment variable {var} (no secrets.dir is configured)"),
        };
        format!(
            "secret '{shown}' is not held by this executor: it looked for {places}; set it there, \
             or leave the id out of secret_ids"
        )
    }

    /// Every value held, for redaction.
    pub fn values(&self) -> Vec<String> {
        let files = self.files();
        self.0.env.values().chain(files.values()).cloned().collect()
    }
}

/// Reads the directory again if it changed; a directory that cannot be read keeps the values
/// already loaded.
fn reload(dir: &Path, env: &HashMap<String, String>, loaded: &mut Loaded) {
    loaded.checked = Instant::now();
    let now = match stamp(dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "the secrets directory cannot be read; the previous secrets stay in use");
            return;
        }
    };
    if loaded.stamp.as_ref() == Some(&now) {
        return;
    }
    match read(dir, env) {
        Ok((stamp, files)) => {
            tracing::info!(secrets = files.len(), dir = %dir.display(), "secrets directory read again");
            loaded.files = Arc::new(files);
            loaded.stamp = Some(stamp);
        }
        Err(e) => {
            // Not tried again until it changes once more.
            loaded.stamp = Some(now);
            tracing::warn!(error = %e, "the secrets directory changed but is not usable; the previous secrets stay in use");
        }
    }
}

fn stamp(dir: &Path) -> Result<Stamp, String> {
    let err = |e: std::io::Error| format!("secrets.dir {}: {e}", dir.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        if out.len() == MAX_ENTRIES {
            return Err(format!(
                "secrets.dir {} holds more than {MAX_ENTRIES} entries",
                dir.display()
            ));
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        // Followed: a Secret volume's files are links into the data it swaps.
        let meta = std::fs::metadata(entry.path()).ok();
        out.push((
            name,
            meta.as_ref().and_then(|m| m.modified().ok()),
            meta.map_or(0, |m| m.len()),
        ));
    }
    out.sort();
    Ok(out)
}

/// The directory's secrets by lower-case id: every regular file (links followed) whose name
/// does not start with '.', its trailing newlines dropped.
fn read(
    dir: &Path,
    env: &HashMap<String, String>,
) -> Result<(Stamp, HashMap<String, String>), String> {
    let stamp = stamp(dir)?;
    let mut files = HashMap::new();
    for (name, _, size) in &stamp {
        let path = dir.join(name);
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        let at = || format!("secret file {}", path.display());
        if *size > MAX_FILE_BYTES {
            return Err(format!(
                "{} has {size} bytes, more than the {MAX_FILE_BYTES} a secret may have",
                at()
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", at()))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", at()))?;
        let value = text.trim_end_matches(['\n', '\r']);
        if value.is_empty() {
            return Err(format!("{} is empty", at()));
        }
        let id = name.to_ascii_lowercase();
        if env.contains_key(&id) {
            return Err(format!(
                "{} and the environment variable {ENV_PREFIX}{} both hold secret '{id}'; keep one",
                at(),
                id.to_ascii_uppercase()
            ));
        }
        if files.insert(id.clone(), value.to_owned()).is_some() {
            return Err(format!(
                "secrets.dir {} holds secret '{id}' twice (file names differing only in case)",
                dir.display()
            ));
        }
    }
    Ok((stamp, files))
}

#[cfg(test)]
#[path = "secrets_tests.rs"]
mod tests;
