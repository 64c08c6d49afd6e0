//! droidmesh's task suite (`droidmesh eval`): task templates read from TOML files, each
//! instance made from a seed, the initial state it starts from, and the check that reads the
//! phone's state back over its shell (never the agent's own claims).
//!
//! The suite that ships in the binary is [`builtin`]; a user's own is [`task::load_dir`].

pub mod check;
pub mod clipboard;
pub mod params;
pub mod render;
pub mod rows;
pub mod stats;
pub mod task;
pub mod words;

pub use check::{Check, Finding, Phone, ShellOutput};
pub use task::{Family, Instance, SuiteError, Template, select};

/// The task files built into droidmesh, by name.
const BUILTIN: &[(&str, &str)] = &[
    ("settings.toml", include_str!("../suite/settings.toml")),
    ("lookup.toml", include_str!("../suite/lookup.toml")),
    ("contacts.toml", include_str!("../suite/contacts.toml")),
    ("messages.toml", include_str!("../suite/messages.toml")),
    ("notes.toml", include_str!("../suite/notes.toml")),
    ("tasks.toml", include_str!("../suite/tasks.toml")),
    ("expenses.toml", include_str!("../suite/expenses.toml")),
    ("clock.toml", include_str!("../suite/clock.toml")),
    ("clipboard.toml", include_str!("../suite/clipboard.toml")),
];

/// The built-in suite.
pub fn builtin() -> Result<Vec<Family>, SuiteError> {
    BUILTIN
        .iter()
        .map(|(name, text)| task::parse_family(&format!("builtin:{name}"), text))
        .collect()
}

/// Runs an instance's setup commands on a freshly reset phone; the first that fails (could
/// not run, or ended with a status other than 0) is the error.
pub async fn set_up<P: Phone>(phone: &P, instance: &Instance) -> Result<(), String> {
    for command in &instance.setup {
        let out = phone.shell(command).await?;
        if out.exit_code != 0 {
            return Err(format!(
                "setup command `{command}` ended with status {}: {}",
                out.exit_code,
                out.stdout.trim()
            ));
        }
    }
    Ok(())
}
