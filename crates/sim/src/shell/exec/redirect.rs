//! Redirects: the file a `<` reads as stdin, and where `>`, `>>`, `2>`, `2>&1` and `>&2` send
//! a command's stdout and stderr, starting from where the shell's own descriptors point (`exec
//! >FILE` moves those for the rest of the shell).
use std::collections::HashMap;

use super::{Run, State};
use crate::shell::parse::Redirect;
use crate::shell::{Input, Output, lock};

/// Where a file descriptor writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum To {
    /// What the caller reads as stdout (the shell's stdout, a pipe, a capture).
    Out,
    /// What the caller reads as stderr.
    Err,
    Null,
    /// A file, and whether it is appended to (a file the shell opened with `exec >` is).
    File(String, bool),
}

/// Where the shell's own stdout and stderr point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fds {
    pub out: To,
    pub err: To,
}

impl Default for Fds {
    fn default() -> Self {
        Self {
            out: To::Out,
            err: To::Err,
        }
    }
}

impl State {
    /// `exec` without a command: its redirects move the shell's own stdout and stderr for the
    /// rest of the shell. A file opened without `>>` is emptied now, and written after.
    pub(super) fn exec_redirects(
        &mut self,
        run: &mut Run<'_>,
        redirects: &[Redirect],
    ) -> Result<(), String> {
        let mut fds = self.fds.clone();
        for r in redirects {
            match r {
                Redirect::Out { path, append } | Redirect::Err { path, append } => {
                    let path = self.expand_plain(path);
                    let to = if path == "/dev/null" {
                        To::Null
                    } else {
                        if !append {
                            lock(run.device)
                                .fs
                                .write(&path, Vec::new(), false)
                                .map_err(|e| format!("/system/bin/sh: {e}\n"))?;
                        }
                        To::File(path, true)
                    };
                    if matches!(r, Redirect::Out { .. }) {
                        fds.out = to;
                    } else {
                        fds.err = to;
                    }
                }
                Redirect::ErrToOut => fds.err = fds.out.clone(),
                Redirect::OutToErr => fds.out = fds.err.clone(),
                Redirect::In { .. } => {
                    return Err(
                        "/system/bin/sh: exec: this shell cannot read its own input \
                                from a file; redirect the input of each command instead\n"
                            .into(),
                    );
                }
            }
        }
        self.fds = fds;
        Ok(())
    }

    /// The file a `<` redirect reads, as the command's stdin.
    pub(super) fn input_file(
        &self,
        run: &mut Run<'_>,
        redirects: &[Redirect],
    ) -> Result<Option<Input>, String> {
        let mut input = None;
        for r in redirects {
            if let Redirect::In { path } = r {
                let path = self.expand_plain(path);
                match lock(run.device).fs.read(&path) {
                    Ok(data) => input = Some(Input::bytes(data.to_vec())),
                    Err(e) => return Err(format!("/system/bin/sh: {e}\n")),
                }
            }
        }
        Ok(input)
    }

    /// Sends a command's stdout and stderr where its redirects point (in order, as the shell
    /// sets up file descriptors 1 and 2), and the rest to `out`.
    pub(super) fn route(
        &self,
        run: &mut Run<'_>,
        redirects: &[Redirect],
        result: Output,
        out: &mut Output,
    ) -> Result<(), String> {
        let (mut fd1, mut fd2) = (self.fds.out.clone(), self.fds.err.clone());
        // Whether each file is appended to: as the command's own redirect says, else as the
        // shell's descriptor was opened.
        let mut appends: HashMap<String, bool> = HashMap::new();
        let target = |path: String, append: bool, appends: &mut HashMap<String, bool>| {
            if path == "/dev/null" {
                To::Null
            } else {
                appends.entry(path.clone()).or_insert(append);
                To::File(path, append)
            }
        };
        for r in redirects {
            match r {
                Redirect::Out { path, append } => {
                    fd1 = target(self.expand_plain(path), *append, &mut appends);
                }
                Redirect::Err { path, append } => {
                    fd2 = target(self.expand_plain(path), *append, &mut appends);
                }
                Redirect::ErrToOut => fd2 = fd1.clone(),
                Redirect::OutToErr => fd1 = fd2.clone(),
                Redirect::In { .. } => {}
            }
        }
        for to in [&self.fds.out, &self.fds.err] {
            if let To::File(path, append) = to {
                appends.entry(path.clone()).or_insert(*append);
            }
        }
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for (to, data) in [(fd1, result.stdout), (fd2, result.stderr)] {
            match to {
                To::Out => out.stdout.extend_from_slice(&data),
                To::Err => out.stderr.extend_from_slice(&data),
                To::Null => {}
                To::File(path, _) => match files.iter_mut().find(|(p, _)| *p == path) {
                    Some((_, buf)) => buf.extend_from_slice(&data),
                    None => files.push((path, data)),
                },
            }
        }
        for (path, data) in files {
            let append = appends.get(&path).copied().unwrap_or(false);
            lock(run.device)
                .fs
                .write(&path, data, append)
                .map_err(|e| format!("/system/bin/sh: {e}\n"))?;
        }
        Ok(())
    }
}
