//! `content query|insert|update|delete` over the phone's own providers ([`crate::providers`]),
//! with Android's output: `Row: N col=value, col=value` per row (NULL for a missing value),
//! `No result found.` for none, nothing for a change; a refused call prints
//! `Error while accessing provider:AUTHORITY` and the exception on stderr, and `content` exits
//! 0, as on a phone.
use std::fmt::Write;

use crate::device::Device;
use crate::providers::{self, ProviderError};
use crate::query;
use crate::shell::Output;

/// What `content` was asked.
#[derive(Debug, Default)]
struct Call<'a> {
    projection: Option<&'a str>,
    selection: &'a str,
    sort: Option<&'a str>,
    binds: Vec<&'a str>,
}

fn parse(args: &[String]) -> Result<Call<'_>, String> {
    let mut call = Call::default();
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .map(String::as_str)
                .ok_or_else(|| format!("Error: argument {a} requires a value"))
        };
        match a.as_str() {
            "--uri" | "--user" => {
                value()?;
            }
            "--projection" => call.projection = Some(value()?),
            "--where" => call.selection = value()?,
            "--sort" => call.sort = Some(value()?),
            "--bind" => call.binds.push(value()?),
            other => return Err(format!("Error: Unsupported argument: {other}")),
        }
    }
    Ok(call)
}

/// Answers `content` for a provider this phone has; `None` when it has none at `uri`.
pub(super) fn content(dev: &mut Device, args: &[String], uri: &str) -> Option<Output> {
    let (app, provider, id) = providers::find(dev, uri).map(|(a, p, i)| (a, p.clone(), i))?;
    let target = (app, &provider, id);
    let authority = uri
        .strip_prefix("content://")
        .unwrap_or(uri)
        .split('/')
        .next()
        .unwrap_or("");
    let call = match parse(args) {
        Ok(call) => call,
        Err(e) => return Some(Output::fail(0, e)),
    };
    let binds = || {
        call.binds
            .iter()
            .map(|b| query::parse_bind(b).map_err(ProviderError::Argument))
            .collect::<Result<Vec<_>, _>>()
    };
    let done = match args.first().map(String::as_str) {
        Some("query") => providers::query(dev, target, call.projection, call.selection, call.sort)
            .map(|rows| {
                if rows.is_empty() {
                    return "No result found.\n".to_owned();
                }
                let mut out = String::new();
                for (i, row) in rows.iter().enumerate() {
                    let _ = write!(out, "Row: {i} ");
                    for (j, (column, value)) in row.iter().enumerate() {
                        let sep = if j == 0 { "" } else { ", " };
                        let _ = write!(out, "{sep}{column}={}", value.as_deref().unwrap_or("NULL"));
                    }
                    out.push('\n');
                }
                out
            }),
        Some("insert") => binds()
            .and_then(|b| providers::insert(dev, target, &b))
            .map(|_| String::new()),
        Some("update") => binds()
            .and_then(|b| providers::update(dev, target, &b, call.selection))
            .map(|_| String::new()),
        Some("delete") => providers::delete(dev, target, call.selection).map(|_| String::new()),
        Some(other) => {
            return Some(Output::fail(
                0,
                format!("Error: Unsupported operation for provider {authority}: {other}"),
            ));
        }
        None => return None,
    };
    Some(match done {
        Ok(text) => Output::ok(text),
        Err(e) => Output::fail(
            0,
            format!("Error while accessing provider:{authority}\n{e}"),
        ),
    })
}
