//! Runs parsed scripts: lists, pipelines, compounds, expansions, redirects and the builtins that
//! change the shell itself (`exit`, `exec`, assignments, `export`, `unset`, `read`, `test`) or
//! name commands (`command`, `type`, `whence`). Every run of a line is bounded: [`MAX_STEPS`]
//! commands, [`MAX_RUN_TIME`], [`MAX_OUTPUT`] bytes.
mod builtin;
mod expand;
mod flow;
mod glob;
mod redirect;
mod whence;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::device::Device;

/// Most commands one line may run (a `while true` loop ends here).
pub const MAX_STEPS: u64 = 100_000;
/// Longest one line may run.
pub const MAX_RUN_TIME: Duration = Duration::from_secs(60);
/// Most bytes one line may print.
pub const MAX_OUTPUT: usize = 32 << 20;
/// Most variables a shell keeps, and the longest value.
const MAX_VARS: usize = 1_000;
const MAX_VALUE: usize = 1 << 20;

/// Why a line stopped before its end.
pub enum Stop {
    /// `exit` ran.
    Exit,
    /// A budget ran out: the message says which.
    Budget(String),
}

/// The budget of one line.
pub struct Run<'a> {
    pub device: &'a Mutex<Device>,
    steps: u64,
    deadline: Instant,
    printed: usize,
    depth: usize,
}

impl<'a> Run<'a> {
    pub fn new(device: &'a Mutex<Device>) -> Self {
        Self {
            device,
            steps: 0,
            deadline: Instant::now() + MAX_RUN_TIME,
            printed: 0,
            depth: 0,
        }
    }

    fn step(&mut self) -> Result<(), Stop> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Stop::Budget(format!(
                "stopped after {MAX_STEPS} commands in one line"
            )));
        }
        if self.steps.is_multiple_of(64) && Instant::now() > self.deadline {
            return Err(Stop::Budget(format!(
                "stopped after {} s in one line",
                MAX_RUN_TIME.as_secs()
            )));
        }
        Ok(())
    }

    fn printed(&mut self, n: usize) -> Result<(), Stop> {
        self.printed += n;
        if self.printed > MAX_OUTPUT {
            return Err(Stop::Budget(format!(
                "stopped after printing {} MiB in one line",
                MAX_OUTPUT >> 20
            )));
        }
        Ok(())
    }
}

/// The state a shell keeps between lines.
#[derive(Debug, Default)]
pub struct State {
    pub status: i32,
    pub exited: Option<i32>,
    pub vars: HashMap<String, String>,
    /// An expansion of the current command failed (a bad `$((...))`): it does not run.
    bad_expansion: bool,
    /// Where the shell's own stdout and stderr point (moved by `exec >FILE`).
    fds: redirect::Fds,
    /// A shell on a terminal: it tracks as aliases only the commands mksh starts with.
    pub interactive: bool,
}

impl State {
    fn set(&mut self, name: &str, mut value: String) {
        if value.len() > MAX_VALUE {
            let mut end = MAX_VALUE;
            while !value.is_char_boundary(end) {
                end -= 1;
            }
            value.truncate(end);
        }
        if self.vars.len() < MAX_VARS || self.vars.contains_key(name) {
            self.vars.insert(name.to_owned(), value);
        }
    }

    fn var(&self, name: &str) -> String {
        if let Some(v) = self.vars.get(name) {
            return v.clone();
        }
        match name {
            "?" => self.status.to_string(),
            "$" => super::SHELL_PID.to_string(),
            "#" => "0".into(),
            "0" => "/system/bin/sh".into(),
            "EXTERNAL_STORAGE" => "/sdcard".into(),
            "HOME" => "/".into(),
            "PATH" => "/product/bin:/apex/com.android.runtime/bin:/system/bin:/system/xbin".into(),
            "ANDROID_DATA" => "/data".into(),
            "ANDROID_ROOT" => "/system".into(),
            "USER" => "shell".into(),
            "HOSTNAME" => "localhost".into(),
            _ => String::new(),
        }
    }
}
