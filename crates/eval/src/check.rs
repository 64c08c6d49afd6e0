//! Success checks: what a task's check reads from the phone, over its shell, and what it
//! found. A check never takes the agent's word for anything it can read itself; only a
//! question's answer is compared with what the agent said.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::params::Values;
use crate::render::render;
use crate::words::names;
use crate::{clipboard, rows};

/// What a command run in the phone's shell printed, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellOutput {
    pub stdout: String,
    pub exit_code: i32,
}

/// A phone whose shell a task's setup and check run commands in (a simulated phone, or a
/// phone reached over ADB).
pub trait Phone {
    /// Runs `command` in the phone's shell; `Err` when it could not be run at all.
    fn shell(
        &self,
        command: &str,
    ) -> impl std::future::Future<Output = Result<ShellOutput, String>> + Send;
}

/// Records of a content provider that a check looks for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowSpec {
    /// `content://contacts/phones/`, `content://sms/sent`, ...
    pub uri: String,
    /// Column → value every matching row holds.
    pub columns: BTreeMap<String, String>,
    /// Columns compared by their digits only (phone numbers).
    #[serde(default)]
    pub digits: Vec<String>,
    /// Columns that need only hold the value somewhere (a message's body that quotes it).
    #[serde(default)]
    pub contains: Vec<String>,
    /// Columns compared as whole numbers ("05" is 5: a timer's minutes as typed).
    #[serde(default)]
    pub numbers: Vec<String>,
}

/// What a check reads and what it wants.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Check {
    /// A setting (`namespace:key`, as `settings get` reads it) holds a value.
    Setting { name: String, equals: String },
    /// A content provider has a row with these values.
    HasRow(RowSpec),
    /// A content provider has no row with these values.
    NoRow(RowSpec),
    /// A content provider holds this many rows.
    RowCount { uri: String, equals: usize },
    /// A file holds text (`contains`), or exactly a text (`equals`).
    File {
        path: String,
        #[serde(default)]
        contains: Option<String>,
        #[serde(default)]
        equals: Option<String>,
    },
    /// No file at this path.
    NoFile { path: String },
    /// A folder at this path.
    Dir { path: String },
    /// The agent's answer to a question names this (case and spacing aside).
    Answer { contains: String },
    /// The phone's clipboard (read through the clipboard helper app's `clipper.get`
    /// broadcast) is `equals` (all of it, surrounding whitespace aside) and holds `contains`
    /// as whole words; give one or both.
    Clipboard {
        #[serde(default)]
        equals: Option<String>,
        #[serde(default)]
        contains: Option<String>,
    },
    /// Several checks; the score is the fraction that pass, success needs them all.
    All(Vec<Check>),
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub success: bool,
    /// 0 to 1: the fraction of a composite goal done (0 or 1 for a single check).
    pub score: f64,
    /// What was read, in words ("global wifi_on is 0; the task wants 1").
    pub detail: String,
}

impl Finding {
    fn of(success: bool, detail: String) -> Self {
        Self {
            success,
            score: if success { 1.0 } else { 0.0 },
            detail,
        }
    }
}

/// Longest file a check reads, in bytes shown of it in a finding.
const SHOWN: usize = 200;

impl Check {
    /// The check of one instance: every text filled with its values.
    pub fn render(&self, values: &Values) -> Result<Check, String> {
        let r = |s: &String| render(s, values);
        let spec = |s: &RowSpec| -> Result<RowSpec, String> {
            Ok(RowSpec {
                uri: r(&s.uri)?,
                columns: s
                    .columns
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), r(v)?)))
                    .collect::<Result<_, String>>()?,
                digits: s.digits.clone(),
                contains: s.contains.clone(),
                numbers: s.numbers.clone(),
            })
        };
        let opt = |s: &Option<String>| s.as_ref().map(r).transpose();
        Ok(match self {
            Check::Setting { name, equals } => Check::Setting {
                name: r(name)?,
                equals: r(equals)?,
            },
            Check::HasRow(s) => Check::HasRow(spec(s)?),
            Check::NoRow(s) => Check::NoRow(spec(s)?),
            Check::RowCount { uri, equals } => Check::RowCount {
                uri: r(uri)?,
                equals: *equals,
            },
            Check::File {
                path,
                contains,
                equals,
            } => Check::File {
                path: r(path)?,
                contains: opt(contains)?,
                equals: opt(equals)?,
            },
            Check::NoFile { path } => Check::NoFile { path: r(path)? },
            Check::Dir { path } => Check::Dir { path: r(path)? },
            Check::Answer { contains } => Check::Answer {
                contains: r(contains)?,
            },
            Check::Clipboard { equals, contains } => Check::Clipboard {
                equals: opt(equals)?,
                contains: opt(contains)?,
            },
            Check::All(checks) => Check::All(
                checks
                    .iter()
                    .map(|c| c.render(values))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// What is wrong with this check as written (checked when the file loads).
    pub fn problem(&self) -> Option<String> {
        let uri_problem = |uri: &str| {
            (!uri.starts_with("content://") || uri.contains(char::is_whitespace))
                .then(|| format!("uri `{uri}` is not a content:// address without spaces"))
        };
        let path_problem = |p: &str| {
            (!p.starts_with('/') || p.contains(['\'', '\n']))
                .then(|| format!("path `{p}` is not an absolute path without quotes"))
        };
        match self {
            Check::Setting { name, .. } => {
                let (ns, key) = name.split_once(':').unwrap_or(("", ""));
                (!matches!(ns, "global" | "secure" | "system") || key.is_empty()).then(|| {
                    format!(
                        "setting name `{name}` is not namespace:key with namespace global, secure or system"
                    )
                })
            }
            Check::HasRow(s) | Check::NoRow(s) => uri_problem(&s.uri)
                .or_else(|| {
                    s.columns
                        .is_empty()
                        .then(|| "columns is empty: name at least one value to look for".into())
                })
                .or_else(|| {
                    s.columns.keys().find(|c| !is_column(c)).map(|c| {
                        format!("column `{c}` is not a column name: use letters, digits and _")
                    })
                }),
            Check::RowCount { uri, .. } => uri_problem(uri),
            Check::File {
                path,
                contains,
                equals,
            } => path_problem(path).or_else(|| {
                (contains.is_none() == equals.is_none())
                    .then(|| "give exactly one of contains and equals".into())
            }),
            Check::NoFile { path } | Check::Dir { path } => path_problem(path),
            Check::Answer { contains } => contains
                .trim()
                .is_empty()
                .then(|| "answer.contains is empty".into()),
            Check::Clipboard { equals, contains } => match (equals, contains) {
                (None, None) => Some(
                    "clipboard names nothing to look for: give equals, contains or both".into(),
                ),
                (Some(e), _) if e.trim().is_empty() => Some("clipboard.equals is empty".into()),
                (_, Some(c)) if c.trim().is_empty() => Some("clipboard.contains is empty".into()),
                _ => None,
            },
            Check::All(checks) if checks.is_empty() => {
                Some("all lists no checks: give at least one".into())
            }
            Check::All(checks) => checks.iter().find_map(Check::problem),
        }
    }

    /// Reads the phone (and, for a question, the agent's answer) and says what it found.
    pub async fn run<P: Phone>(&self, phone: &P, answer: &str) -> Result<Finding, String> {
        match self {
            Check::Setting { name, equals } => {
                let (ns, key) = name.split_once(':').unwrap_or(("global", name));
                let found = ok(phone, &format!("settings get {ns} {key}")).await?;
                let found = found.trim();
                Ok(Finding::of(
                    found == equals,
                    if found == equals {
                        format!("{ns} {key} is {found}, as the task wants")
                    } else {
                        format!("{ns} {key} is {found}; the task wants {equals}")
                    },
                ))
            }
            Check::HasRow(s) | Check::NoRow(s) => {
                let want_present = matches!(self, Check::HasRow(_));
                let rows = query(phone, &s.uri, s.columns.keys().cloned().collect()).await?;
                let hit = rows
                    .iter()
                    .find(|r| rows::matches(r, &s.columns, &s.digits, &s.contains, &s.numbers));
                let wanted = rows::show(&s.columns);
                Ok(match (hit, want_present) {
                    (Some(r), true) => {
                        Finding::of(true, format!("{} has {}", s.uri, rows::show(r)))
                    }
                    (None, false) => Finding::of(true, format!("{} has no row {wanted}", s.uri)),
                    (Some(r), false) => Finding::of(
                        false,
                        format!(
                            "{} still has {}; the task wants it gone",
                            s.uri,
                            rows::show(r)
                        ),
                    ),
                    (None, true) => {
                        let shown: Vec<String> = rows.iter().take(10).map(rows::show).collect();
                        Finding::of(
                            false,
                            format!(
                                "{} has no row {wanted}; rows: {}",
                                s.uri,
                                if shown.is_empty() {
                                    "none".into()
                                } else {
                                    shown.join(" | ")
                                }
                            ),
                        )
                    }
                })
            }
            Check::RowCount { uri, equals } => {
                one_word(uri, "uri")?;
                let out = ok(phone, &format!("content query --uri {uri}")).await?;
                let n = out.lines().filter(|l| l.starts_with("Row: ")).count();
                Ok(Finding::of(
                    n == *equals,
                    format!("{uri} has {n} rows; the task wants {equals}"),
                ))
            }
            Check::File {
                path,
                contains,
                equals,
            } => {
                one_word(path, "path")?;
                let out = phone.shell(&format!("cat '{path}'")).await?;
                if out.exit_code != 0 {
                    return Ok(Finding::of(false, format!("{path} does not exist")));
                }
                let text = out.stdout;
                let (success, want) = match (contains, equals) {
                    (Some(c), _) => (text.contains(c.as_str()), format!("to contain {c:?}")),
                    (None, Some(e)) => (
                        text.trim_end() == e.trim_end(),
                        format!("to hold exactly {e:?}"),
                    ),
                    (None, None) => (false, "nothing".into()),
                };
                let shown: String = text.chars().take(SHOWN).collect();
                Ok(Finding::of(
                    success,
                    format!("{path} holds {shown:?}; the task wants it {want}"),
                ))
            }
            Check::NoFile { path } => {
                one_word(path, "path")?;
                let out = phone.shell(&format!("ls '{path}'")).await?;
                Ok(Finding::of(
                    out.exit_code != 0,
                    if out.exit_code != 0 {
                        format!("{path} is gone")
                    } else {
                        format!("{path} still exists; the task wants it gone")
                    },
                ))
            }
            Check::Dir { path } => {
                one_word(path, "path")?;
                let out = phone.shell(&format!("test -d '{path}'")).await?;
                Ok(Finding::of(
                    out.exit_code == 0,
                    if out.exit_code == 0 {
                        format!("{path} is a folder")
                    } else {
                        format!("there is no folder {path}; the task wants one")
                    },
                ))
            }
            Check::Answer { contains } => {
                let norm = |s: &str| {
                    s.split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .to_lowercase()
                };
                let success = names(&norm(answer), &norm(contains));
                Ok(Finding::of(
                    success,
                    format!(
                        "the answer {answer:?} {} {contains:?}",
                        if success { "names" } else { "does not name" }
                    ),
                ))
            }
            Check::Clipboard { equals, contains } => {
                let found = clipboard::parse(&ok(phone, clipboard::GET).await?)?;
                let (success, detail) =
                    clipboard::judge(found.as_deref(), equals.as_deref(), contains.as_deref());
                Ok(Finding::of(success, detail))
            }
            Check::All(checks) => {
                let mut passed = 0usize;
                let mut failed = Vec::new();
                for check in checks {
                    let f = Box::pin(check.run(phone, answer)).await?;
                    if f.success {
                        passed += 1;
                    } else {
                        failed.push(f.detail);
                    }
                }
                let total = checks.len().max(1);
                Ok(Finding {
                    success: failed.is_empty(),
                    score: passed as f64 / total as f64,
                    detail: if failed.is_empty() {
                        format!("all {total} parts done")
                    } else {
                        format!("{passed} of {total} parts done; {}", failed.join("; "))
                    },
                })
            }
        }
    }
}

fn is_column(c: &str) -> bool {
    c.chars()
        .next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Refuses a filled-in address or path the phone's shell would read as more than one word
/// (a parameter value with a quote or a space).
fn one_word(s: &str, what: &str) -> Result<(), String> {
    if s.contains(['\'', '\n']) || (what == "uri" && s.contains(char::is_whitespace)) {
        return Err(format!(
            "the {what} `{s}` holds a quote or a space once filled in"
        ));
    }
    Ok(())
}

/// What `command` printed; `Err` when it ended with a status other than 0.
async fn ok<P: Phone>(phone: &P, command: &str) -> Result<String, String> {
    let out = phone.shell(command).await?;
    if out.exit_code != 0 {
        return Err(format!(
            "`{command}` ended with status {}: {}",
            out.exit_code,
            out.stdout.trim()
        ));
    }
    Ok(out.stdout)
}

/// The rows of `uri` with `columns`.
async fn query<P: Phone>(
    phone: &P,
    uri: &str,
    columns: Vec<String>,
) -> Result<Vec<rows::Row>, String> {
    one_word(uri, "uri")?;
    let out = ok(
        phone,
        &format!(
            "content query --uri {uri} --projection {}",
            columns.join(":")
        ),
    )
    .await?;
    rows::parse(&out, &columns).map_err(|e| format!("{uri}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A phone whose shell answers one command with fixed text (a content provider's rows).
    struct Answers(Vec<(String, String)>);

    impl Phone for Answers {
        async fn shell(&self, command: &str) -> Result<ShellOutput, String> {
            self.0
                .iter()
                .find(|(c, _)| c == command)
                .map(|(_, out)| ShellOutput {
                    stdout: out.clone(),
                    exit_code: 0,
                })
                .ok_or_else(|| format!("unexpected command {command}"))
        }
    }

    fn contacts() -> Answers {
        Answers(vec![
            (
                "content query --uri content://contacts/phones/ --projection display_name:number"
                    .into(),
                "Row: 0 display_name=Ada Lovelace, number=+44 20 7946 0101\nRow: 1 display_name=Zoë Müller, number=+49 30 1234 5678\n".into(),
            ),
            (
                "content query --uri content://contacts/phones/".into(),
                "Row: 0 _id=1, display_name=Ada Lovelace\nRow: 1 _id=2, display_name=Zoë Müller\n"
                    .into(),
            ),
        ])
    }

    fn spec(name: &str, number: &str) -> RowSpec {
        RowSpec {
            uri: "content://contacts/phones/".into(),
            columns: [
                ("display_name".to_owned(), name.to_owned()),
                ("number".to_owned(), number.to_owned()),
            ]
            .into(),
            digits: vec!["number".into()],
            contains: Vec::new(),
            numbers: Vec::new(),
        }
    }

    #[tokio::test]
    async fn row_checks_find_a_record_name_what_is_there_and_count() {
        let phone = contacts();
        let f = Check::HasRow(spec("Zoë Müller", "+49 (30) 1234-5678"))
            .run(&phone, "")
            .await
            .unwrap();
        assert!(f.success, "{}", f.detail);
        let f = Check::HasRow(spec("Zoë Müller", "+49 30 0000"))
            .run(&phone, "")
            .await
            .unwrap();
        assert!(!f.success);
        assert!(
            f.detail.contains("rows: display_name=Ada Lovelace"),
            "{}",
            f.detail
        );
        let f = Check::NoRow(spec("Ada Lovelace", "+44 20 7946 0101"))
            .run(&phone, "")
            .await
            .unwrap();
        assert!(!f.success && f.detail.contains("still has"), "{}", f.detail);
        let count = Check::RowCount {
            uri: "content://contacts/phones/".into(),
            equals: 2,
        };
        assert!(count.run(&phone, "").await.unwrap().success);
    }

    #[test]
    fn a_filled_in_path_or_column_that_would_split_in_the_shell_is_refused() {
        assert!(one_word("/sdcard/O'Brien.md", "path").is_err());
        assert!(one_word("content://x/a b", "uri").is_err());
        let mut s = spec("a", "1");
        s.columns.insert("x;rm".into(), "1".into());
        assert!(
            Check::HasRow(s)
                .problem()
                .unwrap()
                .contains("not a column name")
        );
    }
}
