//! The device's file system: an in-memory tree of files and directories, enough for
//! `adb push/pull`, `ls`, `cat`, shell redirection and the apps' saved files.
use std::collections::{BTreeMap, BTreeSet};

/// Modification time given to every file (2026-01-01T00:00:00Z): the simulator keeps no clock,
/// so listings are the same on every run.
pub const MTIME: u32 = 1_767_225_600;
pub const DIR_MODE: u32 = 0o040_771;
pub const FILE_MODE: u32 = 0o100_660;

#[derive(Debug, Clone)]
pub struct Fs {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeSet<String>,
}

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File(u64),
    Dir,
}

impl Default for Fs {
    fn default() -> Self {
        Self::new()
    }
}

/// Makes `path` absolute and drops `.`, `..`, repeated and trailing slashes.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl Fs {
    pub fn new() -> Self {
        let mut fs = Self {
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
        };
        for d in [
            "/sdcard/Download",
            "/sdcard/DCIM",
            "/sdcard/Pictures",
            "/sdcard/Documents",
            "/data/local/tmp",
            "/system/bin",
        ] {
            fs.mkdir_all(d);
        }
        fs
    }

    pub fn mkdir_all(&mut self, path: &str) {
        let mut p = normalize(path);
        while p != "/" {
            let up = parent(&p).to_owned();
            self.dirs.insert(p);
            p = up;
        }
    }

    pub fn kind(&self, path: &str) -> Option<Kind> {
        let p = normalize(path);
        if p == "/" || self.dirs.contains(&p) {
            return Some(Kind::Dir);
        }
        self.files.get(&p).map(|f| Kind::File(f.len() as u64))
    }

    pub fn read(&self, path: &str) -> Result<&[u8], String> {
        let p = normalize(path);
        match self.files.get(&p) {
            Some(f) => Ok(f),
            None if self.dirs.contains(&p) || p == "/" => Err(format!("{path}: Is a directory")),
            None => Err(format!("{path}: No such file or directory")),
        }
    }

    /// Writes (or appends to) a file, creating its parent directories as Android's
    /// MediaProvider-backed /sdcard does for apps.
    pub fn write(&mut self, path: &str, data: Vec<u8>, append: bool) -> Result<(), String> {
        let p = normalize(path);
        if p == "/" || self.dirs.contains(&p) {
            return Err(format!("{path}: Is a directory"));
        }
        if self.files.contains_key(parent(&p)) {
            return Err(format!("{path}: Not a directory"));
        }
        self.mkdir_all(parent(&p));
        if append {
            self.files.entry(p).or_default().extend_from_slice(&data);
        } else {
            self.files.insert(p, data);
        }
        Ok(())
    }

    pub fn remove(&mut self, path: &str) -> Result<(), String> {
        let p = normalize(path);
        if self.files.remove(&p).is_some() {
            Ok(())
        } else if self.dirs.contains(&p) {
            Err(format!("{path}: Is a directory"))
        } else {
            Err(format!("{path}: No such file or directory"))
        }
    }

    /// Names and kinds of the entries of a directory, sorted.
    pub fn list(&self, path: &str) -> Result<Vec<(String, Kind)>, String> {
        let p = normalize(path);
        match self.kind(&p) {
            Some(Kind::Dir) => {}
            Some(Kind::File(_)) => return Err(format!("{path}: Not a directory")),
            None => return Err(format!("{path}: No such file or directory")),
        }
        let prefix = if p == "/" {
            "/".to_owned()
        } else {
            format!("{p}/")
        };
        let mut out = BTreeMap::new();
        for d in self.dirs.range(prefix.clone()..) {
            let Some(rest) = d.strip_prefix(&prefix) else {
                break;
            };
            if !rest.is_empty() && !rest.contains('/') {
                out.insert(rest.to_owned(), Kind::Dir);
            }
        }
        for (f, data) in self.files.range(prefix.clone()..) {
            let Some(rest) = f.strip_prefix(&prefix) else {
                break;
            };
            if !rest.contains('/') {
                out.insert(rest.to_owned(), Kind::File(data.len() as u64));
            }
        }
        Ok(out.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_behave_like_a_file_system() {
        let mut fs = Fs::new();
        fs.write("/sdcard/Notes/note.txt", b"hi".to_vec(), false)
            .unwrap();
        fs.write("/sdcard/Notes/../Notes/./note.txt", b"!".to_vec(), true)
            .unwrap();
        assert_eq!(fs.read("/sdcard/Notes/note.txt").unwrap(), b"hi!");
        assert_eq!(fs.kind("/sdcard/Notes"), Some(Kind::Dir));
        let names: Vec<String> = fs
            .list("/sdcard")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert!(names.contains(&"Notes".to_owned()) && names.contains(&"Download".to_owned()));
        assert!(fs.read("/sdcard").unwrap_err().contains("Is a directory"));
        assert!(fs.read("/nope").unwrap_err().contains("No such file"));
        assert!(fs.write("/sdcard/Notes/note.txt/x", vec![], false).is_err());
        fs.remove("/sdcard/Notes/note.txt").unwrap();
        assert!(fs.remove("/sdcard/Notes/note.txt").is_err());
        assert_eq!(normalize("a//b/../c/"), "/a/c");
    }
}
