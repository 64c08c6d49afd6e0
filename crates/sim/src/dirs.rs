//! Folders as record sets: a list whose source is `dir:PATH` shows the files and folders in that
//! folder of the phone's storage, one record each (`name`, `path`, `text`, `kind` `note` or
//! `folder`), and the record actions create (a folder when `kind=folder`), rename, rewrite and
//! delete the files, so a notes app keeps its notes as files a check reads
//! with `ls` and `cat`. A file's record id is a hash of its path: the same file keeps its id
//! while it keeps its name.
use crate::device::Device;
use crate::fs::Kind;
use crate::records::{ID, MAX_RECORDS, Record};

/// The prefix of a folder source.
pub const PREFIX: &str = "dir:";

/// Longest file name a form may give, in bytes.
pub const MAX_NAME: usize = 255;

/// The folder a source names, if it names one.
pub fn folder(source: &str) -> Option<&str> {
    source.strip_prefix(PREFIX)
}

/// A file's record id: FNV-1a of its path, in 52 bits (so it fits any `usize` and a double).
pub fn file_id(path: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h & ((1 << 52) - 1)
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(format!("'{name}' is not a file name (no '/', not empty)"));
    }
    if name.len() > MAX_NAME {
        return Err(format!("a file name has at most {MAX_NAME} bytes"));
    }
    Ok(())
}

impl Device {
    /// The files and folders of `dir` as records, by name, at most [`MAX_RECORDS`].
    pub fn folder_records(&self, dir: &str) -> Vec<Record> {
        let Ok(entries) = self.fs.list(dir) else {
            return Vec::new();
        };
        entries
            .into_iter()
            .take(MAX_RECORDS)
            .map(|(name, kind)| {
                let path = join(dir, &name);
                let (kind, text) = match kind {
                    Kind::File(_) => (
                        "note",
                        self.fs
                            .read(&path)
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_default(),
                    ),
                    _ => ("folder", String::new()),
                };
                Record::from([
                    (ID.to_owned(), file_id(&path).to_string()),
                    ("name".to_owned(), name),
                    ("path".to_owned(), path),
                    ("text".to_owned(), text),
                    ("kind".to_owned(), kind.to_owned()),
                ])
            })
            .collect()
    }

    /// The records a list of `source` shows: a folder's files or a record set of the app in
    /// front.
    pub fn source_records(&self, source: &str) -> std::borrow::Cow<'_, [Record]> {
        match folder(source) {
            Some(dir) => std::borrow::Cow::Owned(self.folder_records(dir)),
            None => std::borrow::Cow::Borrowed(self.records(source)),
        }
    }

    pub(crate) fn folder_file(&self, dir: &str, id: u64) -> Option<Record> {
        self.folder_records(dir)
            .into_iter()
            .find(|r| r.get(ID).and_then(|v| v.parse().ok()) == Some(id))
    }

    /// A new file `name` in `dir` holding `text` (a folder `name` when `kind` is `folder`); an
    /// existing name is refused.
    pub(crate) fn add_file(&mut self, dir: &str, record: &Record) -> Result<(), String> {
        let name = record.get("name").map_or("", |n| n.trim());
        check_name(name)?;
        let path = join(dir, name);
        if self.fs.kind(&path).is_some() {
            return Err(format!("{name} already exists"));
        }
        if record.get("kind").is_some_and(|k| k == "folder") {
            self.fs.mkdir_all(&path);
            return Ok(());
        }
        self.fs.mkdir_all(dir);
        let text = record.get("text").cloned().unwrap_or_default();
        self.fs.write(&path, text.into_bytes(), false)
    }

    /// Renames (column `name`), rewrites (column `text`) and moves (column `folder`, a folder's
    /// path) the file with this id.
    pub(crate) fn update_file(
        &mut self,
        dir: &str,
        id: u64,
        changes: &Record,
    ) -> Result<(), String> {
        let file = self
            .folder_file(dir, id)
            .ok_or_else(|| "the file is gone".to_owned())?;
        let old = file.get("path").cloned().unwrap_or_default();
        let mut name = file.get("name").cloned().unwrap_or_default();
        if let Some(new) = changes.get("name").map(|n| n.trim())
            && new != name
        {
            check_name(new)?;
            name = new.to_owned();
        }
        let target = match changes
            .get("folder")
            .map(|f| f.trim().trim_end_matches('/'))
        {
            Some(folder) if !folder.is_empty() => self.existing_folder(folder)?,
            _ => dir.to_owned(),
        };
        let path = join(&target, &name);
        if path != old && self.fs.kind(&path).is_some() {
            return Err(format!("{name} already exists"));
        }
        let text = match changes.get("text") {
            Some(t) => t.clone().into_bytes(),
            None => self.fs.read(&old)?.to_vec(),
        };
        self.fs.write(&path, text, false)?;
        if path != old {
            self.fs.remove(&old)?;
        }
        Ok(())
    }

    /// `folder` when it is a folder of the storage (no `.` or `..` in it).
    fn existing_folder(&self, folder: &str) -> Result<String, String> {
        let mut parts = folder.rsplit('/');
        let name = parts.next().unwrap_or_default();
        let parent = parts.next().unwrap_or_default();
        if folder.split('/').any(|c| c == "." || c == "..")
            || !matches!(self.fs.kind(folder), Some(Kind::Dir))
        {
            return Err(format!("there is no folder {name} in {parent}"));
        }
        Ok(folder.to_owned())
    }

    /// Deletes the file with this id.
    pub(crate) fn delete_file(&mut self, dir: &str, id: u64) -> Result<(), String> {
        let file = self
            .folder_file(dir, id)
            .ok_or_else(|| "the file is gone".to_owned())?;
        self.fs.remove(file.get("path").map_or("", String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::apps::AppSet;

    #[test]
    fn files_are_records_that_forms_create_rename_and_delete() {
        let mut dev = Device::new(Arc::new(AppSet::default_set().unwrap()), "s");
        let dir = "/sdcard/Notes";
        let note = Record::from([("name".into(), "a.md".into()), ("text".into(), "hi".into())]);
        dev.add_file(dir, &note).unwrap();
        assert!(dev.add_file(dir, &note).unwrap_err().contains("exists"));
        let bad = Record::from([("name".into(), "x/y".into())]);
        assert!(dev.add_file(dir, &bad).is_err());
        let id = file_id("/sdcard/Notes/a.md");
        let rename = Record::from([("name".into(), "b.md".into())]);
        dev.update_file(dir, id, &rename).unwrap();
        assert_eq!(dev.fs.read("/sdcard/Notes/b.md").unwrap(), b"hi");
        assert!(dev.fs.read("/sdcard/Notes/a.md").is_err());
        let rows = dev.folder_records(dir);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["name"], "b.md");
        dev.delete_file(dir, file_id("/sdcard/Notes/b.md")).unwrap();
        assert!(dev.folder_records(dir).is_empty());
        assert!(dev.delete_file(dir, id).is_err());
    }
}
