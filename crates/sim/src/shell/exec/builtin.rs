//! Builtins that read or change the shell's own state (`export`, `unset`, `read`, ...),
//! `test` / `[ ]`, and those that say what a name is (`command -v`, `type`, `whence`).
use super::{Run, State};
use crate::device::Device;
use crate::shell::{Input, Output, lock};

impl State {
    /// Builtins that read or change the shell's own state.
    pub(super) fn builtin(
        &mut self,
        run: &Run<'_>,
        name: &str,
        args: &[String],
        stdin: &mut Input,
    ) -> Option<Output> {
        Some(match name {
            "export" | "readonly" | "local" => {
                for a in args {
                    if let Some((k, v)) = a.split_once('=') {
                        self.set(k, v.to_owned());
                    }
                }
                Output::default()
            }
            "unset" => {
                for a in args {
                    self.vars.remove(a);
                }
                Output::default()
            }
            "set" | "cd" | "shift" | "trap" | "umask" | "wait" => Output::default(),
            // `command` gets here with `-v` or `-V`: the flow runs `command NAME ...` itself.
            "whence" | "type" | "command" => super::whence::whence(name, args, !self.interactive),
            "read" => {
                let names: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
                match stdin.line() {
                    None => Output {
                        code: 1,
                        ..Output::default()
                    },
                    Some(line) => {
                        let line = String::from_utf8_lossy(&line).into_owned();
                        let mut fields = line.split_whitespace();
                        for (i, n) in names.iter().enumerate() {
                            let v = if i + 1 == names.len() {
                                fields.by_ref().collect::<Vec<_>>().join(" ")
                            } else {
                                fields.next().unwrap_or("").to_owned()
                            };
                            self.set(n, v);
                        }
                        if names.is_empty() {
                            self.set("REPLY", line);
                        }
                        Output::default()
                    }
                }
            }
            "test" | "[" => {
                let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
                if name == "[" {
                    if a.last() != Some(&"]") {
                        return Some(Output::fail(2, "[: missing ]"));
                    }
                    a.pop();
                }
                match test(&lock(run.device), &a) {
                    Ok(true) => Output::default(),
                    Ok(false) => Output {
                        code: 1,
                        ..Output::default()
                    },
                    Err(e) => Output::fail(2, format!("/system/bin/sh: {name}: {e}")),
                }
            }
            _ => return None,
        })
    }
}

/// `test` / `[ ]`: file tests, string tests and integer comparisons, with `!`.
fn test(dev: &Device, a: &[&str]) -> Result<bool, String> {
    use crate::fs::Kind;
    let int = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| format!("{s}: bad number"))
    };
    Ok(match a {
        [] => false,
        ["!", rest @ ..] => !test(dev, rest)?,
        [s] => !s.is_empty(),
        ["-n", s] => !s.is_empty(),
        ["-z", s] => s.is_empty(),
        ["-e", p] => dev.fs.kind(p).is_some(),
        ["-f", p] => matches!(dev.fs.kind(p), Some(Kind::File(_))),
        ["-d", p] => matches!(dev.fs.kind(p), Some(Kind::Dir)),
        ["-s", p] => matches!(dev.fs.kind(p), Some(Kind::File(n)) if n > 0),
        ["-r" | "-w" | "-x", p] => dev.fs.kind(p).is_some(),
        [x, "=" | "==", y] => x == y,
        [x, "!=", y] => x != y,
        [x, op @ ("-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"), y] => {
            let (x, y) = (int(x)?, int(y)?);
            match *op {
                "-eq" => x == y,
                "-ne" => x != y,
                "-lt" => x < y,
                "-le" => x <= y,
                "-gt" => x > y,
                _ => x >= y,
            }
        }
        [x, "-a", y] => !x.is_empty() && !y.is_empty(),
        [x, "-o", y] => !x.is_empty() || !y.is_empty(),
        _ => return Err("unknown operand".into()),
    })
}
