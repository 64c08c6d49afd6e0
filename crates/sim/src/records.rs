//! A phone's own records (contacts, messages, …): each device's copy of its apps' record sets,
//! started from the app files, changed by the apps' forms and by `content insert`/`update`/
//! `delete`, and started over by a reset. Every record has an `_id` that never changes and is
//! never reused on that device; a set holds at most [`MAX_RECORDS`].
use std::collections::BTreeMap;

use crate::apps::AppSet;

/// One record: column → value. A column it lacks reads as NULL.
pub type Record = BTreeMap<String, String>;

/// Most records one set holds; adding one more is refused.
pub const MAX_RECORDS: usize = 1_000;

/// Longest value a record keeps, in characters; longer text is cut.
pub const MAX_VALUE_CHARS: usize = 4_096;

/// The column that names a record.
pub const ID: &str = "_id";

#[derive(Debug, Clone, Default)]
struct Set {
    rows: Vec<Record>,
    next_id: u64,
}

/// Every record set of one device, keyed by (app index, set name).
#[derive(Debug, Clone, Default)]
pub struct Records {
    sets: BTreeMap<(usize, String), Set>,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the record set '{0}' is full ({MAX_RECORDS} records): delete some first")]
    Full(String),
    #[error("this app has no record set '{0}'")]
    NoSet(String),
}

impl Records {
    /// The records the app files start with; records without an `_id` are numbered from 1.
    pub fn from_apps(apps: &AppSet) -> Self {
        let mut sets = BTreeMap::new();
        for (i, app) in apps.apps.iter().enumerate() {
            for (name, rows) in &app.data {
                let mut set = Set {
                    rows: Vec::with_capacity(rows.len()),
                    next_id: 1,
                };
                for row in rows.iter().take(MAX_RECORDS) {
                    let mut row = row.clone();
                    let id = match row.get(ID).and_then(|v| v.parse::<u64>().ok()) {
                        Some(id) => id,
                        None => set.next_id,
                    };
                    row.insert(ID.into(), id.to_string());
                    set.next_id = set.next_id.max(id.saturating_add(1));
                    set.rows.push(row);
                }
                sets.insert((i, name.clone()), set);
            }
        }
        Self { sets }
    }

    /// The records of `app`'s set `name`, in the order they were added.
    pub fn rows(&self, app: usize, name: &str) -> &[Record] {
        self.sets
            .get(&(app, name.to_owned()))
            .map_or(&[], |s| s.rows.as_slice())
    }

    /// The record with this `_id`.
    pub fn get(&self, app: usize, name: &str, id: u64) -> Option<&Record> {
        self.rows(app, name).iter().find(|r| id_of(r) == Some(id))
    }

    fn set_mut(&mut self, app: usize, name: &str) -> Result<&mut Set, RecordError> {
        self.sets
            .get_mut(&(app, name.to_owned()))
            .ok_or_else(|| RecordError::NoSet(name.to_owned()))
    }

    /// Adds a record (its `_id` is given here, whatever `record` says); returns the id.
    pub fn add(&mut self, app: usize, name: &str, mut record: Record) -> Result<u64, RecordError> {
        let set = self.set_mut(app, name)?;
        if set.rows.len() >= MAX_RECORDS {
            return Err(RecordError::Full(name.to_owned()));
        }
        let id = set.next_id;
        set.next_id += 1;
        for v in record.values_mut() {
            cut(v);
        }
        record.insert(ID.into(), id.to_string());
        set.rows.push(record);
        Ok(id)
    }

    /// Changes the records `pick` chooses: `Some` values set a column, `None` makes it NULL;
    /// `_id` never changes. Returns how many records changed.
    pub fn update(
        &mut self,
        app: usize,
        name: &str,
        changes: &[(String, Option<String>)],
        mut pick: impl FnMut(&Record) -> bool,
    ) -> Result<usize, RecordError> {
        let set = self.set_mut(app, name)?;
        let mut n = 0;
        for row in set.rows.iter_mut().filter(|r| pick(r)) {
            for (column, value) in changes.iter().filter(|(c, _)| c != ID) {
                match value {
                    Some(v) => {
                        let mut v = v.clone();
                        cut(&mut v);
                        row.insert(column.clone(), v);
                    }
                    None => {
                        row.remove(column);
                    }
                }
            }
            n += 1;
        }
        Ok(n)
    }

    /// Deletes the records `pick` chooses, keeping the order of the rest; returns how many.
    pub fn delete(
        &mut self,
        app: usize,
        name: &str,
        mut pick: impl FnMut(&Record) -> bool,
    ) -> Result<usize, RecordError> {
        let set = self.set_mut(app, name)?;
        let before = set.rows.len();
        set.rows.retain(|r| !pick(r));
        Ok(before - set.rows.len())
    }
}

/// A record's `_id`.
pub fn id_of(record: &Record) -> Option<u64> {
    record.get(ID).and_then(|v| v.parse().ok())
}

fn cut(v: &mut String) {
    if let Some((at, _)) = v.char_indices().nth(MAX_VALUE_CHARS) {
        v.truncate(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contacts() -> (Records, usize) {
        let apps = AppSet::default_set().unwrap();
        let i = apps.app_index("com.android.contacts").unwrap();
        (Records::from_apps(&apps), i)
    }

    #[test]
    fn ids_are_numbered_from_one_and_never_reused() {
        let (mut r, app) = contacts();
        let n = r.rows(app, "contacts").len();
        assert_eq!(id_of(&r.rows(app, "contacts")[0]), Some(1));
        let last = n as u64;
        r.delete(app, "contacts", |x| id_of(x) == Some(last))
            .unwrap();
        let id = r.add(app, "contacts", Record::new()).unwrap();
        assert_eq!(id, last + 1);
    }

    #[test]
    fn a_full_set_refuses_one_more_and_values_are_cut() {
        let (mut r, app) = contacts();
        while r.rows(app, "contacts").len() < MAX_RECORDS {
            r.add(app, "contacts", Record::new()).unwrap();
        }
        assert_eq!(
            r.add(app, "contacts", Record::new()),
            Err(RecordError::Full("contacts".into()))
        );
        r.delete(app, "contacts", |_| true).unwrap();
        let long = Record::from([("note".to_owned(), "é".repeat(MAX_VALUE_CHARS + 5))]);
        let id = r.add(app, "contacts", long).unwrap();
        let kept = &r.get(app, "contacts", id).unwrap()["note"];
        assert_eq!(kept.chars().count(), MAX_VALUE_CHARS);
        assert!(r.add(app, "nope", Record::new()).is_err());
    }
}
