//! Success checks: what a task's check reads from the phone, over its shell, and what it
//! found. A check never takes the agent's word for anything it can read itself.
use serde::{Deserialize, Serialize};

use crate::params::Values;
use crate::render::render;

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

/// What a check reads and what it wants.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Check {
    /// A setting (`namespace:key`, as `settings get` reads it) holds a value.
    Setting { name: String, equals: String },
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

impl Check {
    /// The check of one instance: every text filled with its values.
    pub fn render(&self, values: &Values) -> Result<Check, String> {
        Ok(match self {
            Check::Setting { name, equals } => Check::Setting {
                name: render(name, values)?,
                equals: render(equals, values)?,
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
        match self {
            Check::Setting { name, .. } => {
                let (ns, key) = name.split_once(':').unwrap_or(("", ""));
                (!matches!(ns, "global" | "secure" | "system") || key.is_empty()).then(|| {
                    format!(
                        "setting name `{name}` is not namespace:key with namespace global, secure or system"
                    )
                })
            }
            Check::All(checks) if checks.is_empty() => {
                Some("all lists no checks: give at least one".into())
            }
            Check::All(checks) => checks.iter().find_map(Check::problem),
        }
    }

    /// Reads the phone and says what it found.
    pub async fn run<P: Phone>(&self, phone: &P) -> Result<Finding, String> {
        match self {
            Check::Setting { name, equals } => {
                let (ns, key) = name.split_once(':').unwrap_or(("global", name));
                let out = phone.shell(&format!("settings get {ns} {key}")).await?;
                if out.exit_code != 0 {
                    return Err(format!(
                        "`settings get {ns} {key}` ended with status {}: {}",
                        out.exit_code,
                        out.stdout.trim()
                    ));
                }
                let found = out.stdout.trim();
                let success = found == equals;
                Ok(Finding {
                    success,
                    score: if success { 1.0 } else { 0.0 },
                    detail: if success {
                        format!("{ns} {key} is {found}, as the task wants")
                    } else {
                        format!("{ns} {key} is {found}; the task wants {equals}")
                    },
                })
            }
            Check::All(checks) => {
                let mut passed = 0usize;
                let mut failed = Vec::new();
                for check in checks {
                    let f = Box::pin(check.run(phone)).await?;
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
