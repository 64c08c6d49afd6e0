//! A task's file workspace: one folder per task id under the configured root, shared by the
//! task's scripter runs, with a size cap. Names are relative paths that stay inside the folder
//! (no `..`, no absolute paths, no symlinks followed). Only the most recently used task folders
//! are kept, so the disk the scripter uses is bounded; a folder a run of this process is using
//! is never deleted.
use std::collections::BTreeMap;
use std::fs;
use std::io::{ErrorKind, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// Files one task's workspace may hold.
pub const MAX_FILES: usize = 256;
/// Folders a file name may be nested in.
const MAX_DEPTH: usize = 8;
/// Longest file name, in bytes.
const MAX_NAME_BYTES: usize = 512;
/// Entries looked at when listing a workspace (it holds only what scripts wrote, but the walk
/// has a bound all the same).
const MAX_WALK: usize = 4 * MAX_FILES;
/// Prefix of task folders; only folders with it are ever pruned.
const DIR_PREFIX: &str = "task-";

/// A file in the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The name relative to the workspace, with `/` between folders.
    pub name: String,
    /// The absolute path.
    pub path: PathBuf,
    pub size: u64,
}

#[derive(Debug)]
pub struct Workspace {
    dir: PathBuf,
    max_bytes: u64,
    _in_use: InUse,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Task folders open in this process, with how many runs hold each.
static IN_USE: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

/// Marks a folder as in use for as long as it lives.
#[derive(Debug)]
struct InUse(PathBuf);

impl InUse {
    fn new(dir: PathBuf) -> Self {
        *IN_USE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(dir.clone())
            .or_insert(0) += 1;
        Self(dir)
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut in_use = IN_USE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = in_use.get_mut(&self.0) {
            *n -= 1;
            if *n == 0 {
                in_use.remove(&self.0);
            }
        }
    }
}

impl Workspace {
    /// Opens the folder of `task_id` under `root` (creating both), marks it as just used, and
    /// deletes the least recently used task folders beyond `keep`.
    pub fn open(root: &Path, task_id: &str, max_bytes: u64, keep: usize) -> Result<Self, String> {
        fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        let root = root
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", root.display()))?;
        let dir = root.join(dir_name(task_id));
        // Marked before it is created, so that no concurrent prune removes it.
        let in_use = InUse::new(dir.clone());
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("{} exists and is not a folder", dir.display())),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?
            }
            Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
        }
        let _ = fs::File::open(&dir).and_then(|f| f.set_modified(SystemTime::now()));
        prune(&root, &dir, keep);
        Ok(Self {
            dir,
            max_bytes,
            _in_use: in_use,
        })
    }

    /// The task's folder (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The size cap in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Writes (or replaces) a file; refused when the workspace would exceed its cap.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, String> {
        let parts = split_name(name)?;
        let (file, folders) = parts.split_last().ok_or("the name is empty")?;
        let mut parent = self.dir.clone();
        for folder in folders {
            parent.push(folder);
            match fs::symlink_metadata(&parent) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(format!(
                        "`{name}`: {folder} is a link, which is not followed"
                    ));
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(format!("`{name}`: {folder} is a file, not a folder")),
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    fs::create_dir(&parent).map_err(|e| format!("`{name}`: {e}"))?;
                }
                Err(e) => return Err(format!("`{name}`: {e}")),
            }
        }
        let path = parent.join(file);
        let existing = match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("`{name}` is a link, which is not followed"));
            }
            Ok(m) if m.is_dir() => return Err(format!("`{name}` is a folder")),
            Ok(m) => Some(m.len()),
            Err(_) => None,
        };
        let files = self.list()?;
        if existing.is_none() && files.len() >= MAX_FILES {
            return Err(format!(
                "the workspace already holds {MAX_FILES} files, its limit; delete some first"
            ));
        }
        let used: u64 = files.iter().map(|f| f.size).sum();
        let after = used - existing.unwrap_or(0).min(used) + bytes.len() as u64;
        if after > self.max_bytes {
            return Err(format!(
                "writing `{name}` ({} bytes) would bring the workspace to {after} bytes, over its limit of {} bytes; write less or delete files first",
                bytes.len(),
                self.max_bytes
            ));
        }
        // Written beside the target and renamed over it: a rename replaces a link, never
        // writes through it.
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = parent.join(format!(".{file}.partial-{}-{n}", std::process::id()));
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| fs::rename(&temp, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(format!("cannot write `{name}`: {e}"));
        }
        Ok(FileInfo {
            name: parts.join("/"),
            path,
            size: bytes.len() as u64,
        })
    }

    /// Reads a file.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, String> {
        let path = self.existing(name)?;
        let mut out = Vec::new();
        fs::File::open(&path)
            .and_then(|f| {
                f.take(self.max_bytes.saturating_add(1))
                    .read_to_end(&mut out)
            })
            .map_err(|e| format!("cannot read `{name}`: {e}"))?;
        Ok(out)
    }

    /// Deletes a file; false when there was none.
    pub fn delete(&self, name: &str) -> Result<bool, String> {
        match self.existing(name) {
            Ok(path) => fs::remove_file(path)
                .map(|()| true)
                .map_err(|e| format!("cannot delete `{name}`: {e}")),
            Err(_) if split_name(name).is_ok() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every regular file, sorted by name (links are skipped).
    pub fn list(&self) -> Result<Vec<FileInfo>, String> {
        let mut out = Vec::new();
        let mut seen = 0usize;
        let mut stack = vec![(self.dir.clone(), String::new(), 0usize)];
        while let Some((dir, prefix, depth)) = stack.pop() {
            let entries =
                fs::read_dir(&dir).map_err(|e| format!("cannot list the workspace: {e}"))?;
            for entry in entries.flatten() {
                seen += 1;
                if seen > MAX_WALK {
                    break;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let Some(file) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let name = format!("{prefix}{file}");
                if kind.is_dir() && depth < MAX_DEPTH {
                    stack.push((entry.path(), format!("{name}/"), depth + 1));
                } else if kind.is_file() && !is_partial(&file) {
                    let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    out.push(FileInfo {
                        name,
                        path: entry.path(),
                        size,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The path of an existing regular file, refusing links on the way.
    fn existing(&self, name: &str) -> Result<PathBuf, String> {
        let parts = split_name(name)?;
        let mut path = self.dir.clone();
        for (i, part) in parts.iter().enumerate() {
            path.push(part);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(format!("`{name}`: {part} is a link, which is not followed"));
                }
                Ok(m) if i + 1 < parts.len() && m.is_dir() => {}
                Ok(m) if i + 1 == parts.len() && m.is_file() => {}
                Ok(_) if i + 1 == parts.len() => return Err(format!("`{name}` is a folder")),
                Ok(_) => return Err(format!("`{name}`: {part} is a file, not a folder")),
                Err(_) => return Err(format!("there is no file `{name}` in the workspace")),
            }
        }
        Ok(path)
    }
}

fn is_partial(file: &str) -> bool {
    file.starts_with('.') && file.contains(".partial-")
}

/// A file name's folders and file, checked: relative, no `.`/`..`/empty parts, no
/// backslashes or control characters, bounded length and depth.
fn split_name(name: &str) -> Result<Vec<&str>, String> {
    let refuse = |why: &str| {
        Err(format!(
            "file name `{name}` is refused: {why}; use a relative name such as `report.csv` or `data/page1.json`"
        ))
    };
    if name.is_empty() {
        return refuse("it is empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return refuse(&format!("it is longer than {MAX_NAME_BYTES} bytes"));
    }
    if name.starts_with('/') {
        return refuse("it is an absolute path");
    }
    if name.contains('\\') || name.chars().any(char::is_control) {
        return refuse("it contains a backslash or a control character");
    }
    let parts: Vec<&str> = name.split('/').collect();
    if parts.contains(&"..") {
        return refuse("`..` would leave the workspace");
    }
    if parts.iter().any(|p| p.is_empty() || *p == ".") {
        return refuse("it has an empty or `.` part");
    }
    if parts.len() > MAX_DEPTH + 1 {
        return refuse(&format!("it is nested deeper than {MAX_DEPTH} folders"));
    }
    if parts.last().is_some_and(|f| is_partial(f)) {
        return refuse("the name is reserved for files being written");
    }
    Ok(parts)
}

/// `task-<id>`, with characters outside `[A-Za-z0-9._-]` replaced and, when anything was
/// replaced or cut, a hash of the full id appended so that different ids stay apart.
pub fn dir_name(task_id: &str) -> String {
    let clean: String = task_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if clean == task_id {
        format!("{DIR_PREFIX}{clean}")
    } else {
        // FNV-1a, 64 bit: stable across builds and platforms.
        let hash = task_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{DIR_PREFIX}{clean}-{hash:016x}")
    }
}

/// Deletes the least recently used task folders under `root` beyond `keep` (never `current`,
/// never one in use).
fn prune(root: &Path, current: &Path, keep: usize) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    let mut dirs: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .take(100_000)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(DIR_PREFIX))
        })
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.path() != current)
        .map(|e| {
            let used = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            (used, e.path())
        })
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    for (_, dir) in dirs.into_iter().skip(keep.saturating_sub(1)) {
        // Held while deleting: a run cannot start using the folder meanwhile.
        let in_use = IN_USE.lock().unwrap_or_else(PoisonError::into_inner);
        if in_use.contains_key(&dir) {
            continue;
        }
        if let Err(e) = fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "old task workspace not removed");
        }
    }
}

/// The media type of a file, from its extension.
pub fn mime_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "ndjson" | "jsonl" => "application/x-ndjson",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
