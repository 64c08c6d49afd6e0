//! Content providers as data: a provider serves `content://AUTHORITY/PATH` over one record set
//! of its app (its `source`), showing the records whose columns hold its `filter` values (so
//! `content://sms/sent` and `…/inbox` are two views of one set of messages), and answers
//! query, insert, update and delete as Android's providers do (`…/PATH/ID` names one record).
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::apps::App;
use crate::device::Device;
use crate::query::{self, Where};
use crate::records::{ID, Record, RecordError, id_of};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// `content://AUTHORITY/PATH`, without a trailing slash.
    pub uri: String,
    /// The app's record set it serves.
    pub source: String,
    /// The columns a query without `--projection` shows, in order; the ones a caller may name.
    pub columns: Vec<String>,
    /// Column values every record it shows holds, and an insert sets.
    #[serde(default)]
    pub filter: BTreeMap<String, String>,
    /// Templates an insert sets for columns it does not bind (`{clock:ms}`: the phone's time).
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    /// The order of a query without `--sort` (`COLUMN [ASC|DESC], …`).
    #[serde(default)]
    pub sort: String,
}

/// Why a provider refused a call (the text of the exception `content` prints).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("android.database.sqlite.SQLiteException: {0} (code 1 SQLITE_ERROR)")]
    Sql(String),
    #[error("java.lang.IllegalArgumentException: {0}")]
    Argument(String),
    #[error("android.database.sqlite.SQLiteFullException: {0} (code 13 SQLITE_FULL)")]
    Full(String),
}

impl From<RecordError> for ProviderError {
    fn from(e: RecordError) -> Self {
        match e {
            RecordError::Full(_) => Self::Full(e.to_string()),
            RecordError::NoSet(_) => Self::Argument(e.to_string()),
        }
    }
}

/// One row of a query's answer: (column, value or NULL), in the order asked.
pub type Row = Vec<(String, Option<String>)>;

impl Provider {
    /// Checks the provider against its app (at load).
    pub fn check(&self, app: &App) -> Result<(), String> {
        let at = |what: String| format!("provider {}: {what}", self.uri);
        if !self.uri.starts_with("content://") || self.uri.ends_with('/') {
            return Err(at(
                "the uri must be content://AUTHORITY/PATH without a trailing '/'".into(),
            ));
        }
        if !app.data.contains_key(&self.source) {
            return Err(at(format!("source '{}' is not in its data", self.source)));
        }
        if self.columns.is_empty() {
            return Err(at("it names no columns".into()));
        }
        query::parse_sort(&self.sort, &|c| self.knows(c)).map_err(at)?;
        Ok(())
    }

    /// Whether callers may name this column.
    pub fn knows(&self, column: &str) -> bool {
        column == ID
            || self.columns.iter().any(|c| c == column)
            || self.filter.contains_key(column)
            || self.defaults.contains_key(column)
    }

    fn shows(&self, r: &Record, id: Option<u64>) -> bool {
        self.filter.iter().all(|(k, v)| r.get(k) == Some(v))
            && id.is_none_or(|id| id_of(r) == Some(id))
    }

    fn selection(&self, selection: &str) -> Result<Where, ProviderError> {
        Where::parse(selection, &|c| self.knows(c)).map_err(ProviderError::Sql)
    }

    fn column(&self, c: &str) -> Result<(), ProviderError> {
        if self.knows(c) {
            Ok(())
        } else {
            Err(ProviderError::Argument(format!("Invalid column {c}")))
        }
    }
}

/// A provider of the device and what its uri names: (app index, provider, record id).
pub fn find<'a>(dev: &'a Device, uri: &str) -> Option<(usize, &'a Provider, Option<u64>)> {
    let uri = uri.trim_end_matches('/');
    dev.apps.apps.iter().enumerate().find_map(|(i, app)| {
        app.providers.iter().find_map(|p| {
            if uri == p.uri {
                return Some((i, p, None));
            }
            let id = uri.strip_prefix(p.uri.as_str())?.strip_prefix('/')?;
            id.parse().ok().map(|id| (i, p, Some(id)))
        })
    })
}

/// `content query`: the rows chosen, sorted, with the columns asked (all the provider's by
/// default).
pub fn query(
    dev: &Device,
    (app, p, id): (usize, &Provider, Option<u64>),
    projection: Option<&str>,
    selection: &str,
    sort: Option<&str>,
) -> Result<Vec<Row>, ProviderError> {
    let columns: Vec<String> = match projection {
        Some(list) => list.split(':').map(str::to_owned).collect(),
        None => p.columns.clone(),
    };
    for c in &columns {
        p.column(c)?;
    }
    let select = p.selection(selection)?;
    let order =
        query::parse_sort(sort.unwrap_or(&p.sort), &|c| p.knows(c)).map_err(ProviderError::Sql)?;
    let mut rows: Vec<&Record> = dev
        .records
        .rows(app, &p.source)
        .iter()
        .filter(|r| p.shows(r, id) && select.matches(r))
        .collect();
    query::sort(&mut rows, &order);
    Ok(rows
        .into_iter()
        .map(|r| {
            columns
                .iter()
                .map(|c| (c.clone(), r.get(c).cloned()))
                .collect()
        })
        .collect())
}

/// `content insert`: a new record with the bound values, the provider's filter values and
/// its defaults for columns not bound; returns its id.
pub fn insert(
    dev: &mut Device,
    (app, p, _): (usize, &Provider, Option<u64>),
    binds: &[(String, Option<String>)],
) -> Result<u64, ProviderError> {
    let mut record = Record::new();
    for (k, v) in &p.defaults {
        record.insert(k.clone(), dev.expand_with(v, None));
    }
    for (column, value) in binds {
        p.column(column)?;
        match value {
            Some(v) => record.insert(column.clone(), v.clone()),
            None => record.remove(column),
        };
    }
    record.extend(p.filter.clone());
    let source = p.source.clone();
    Ok(dev.records.add(app, &source, record)?)
}

/// `content update`: sets the bound columns of the rows chosen; returns how many.
pub fn update(
    dev: &mut Device,
    (app, p, id): (usize, &Provider, Option<u64>),
    binds: &[(String, Option<String>)],
    selection: &str,
) -> Result<usize, ProviderError> {
    for (column, _) in binds {
        p.column(column)?;
    }
    // The filter columns stay: an update cannot move a message out of the view it is in.
    let binds: Vec<(String, Option<String>)> = binds
        .iter()
        .filter(|(c, _)| !p.filter.contains_key(c))
        .cloned()
        .collect();
    let select = p.selection(selection)?;
    let p = p.clone();
    Ok(dev.records.update(app, &p.source, &binds, |r| {
        p.shows(r, id) && select.matches(r)
    })?)
}

/// `content delete`: removes the rows chosen; returns how many.
pub fn delete(
    dev: &mut Device,
    (app, p, id): (usize, &Provider, Option<u64>),
    selection: &str,
) -> Result<usize, ProviderError> {
    let select = p.selection(selection)?;
    let p = p.clone();
    Ok(dev
        .records
        .delete(app, &p.source, |r| p.shows(r, id) && select.matches(r))?)
}
