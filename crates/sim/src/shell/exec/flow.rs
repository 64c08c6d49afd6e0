//! Lists, pipelines, compounds (`{ }`, `for`, `while`/`until`, `case`, `if`) and simple
//! commands: the order things run in, each counted against the line's [`Run`] budget.
use super::glob::glob;
use super::redirect::To;
use super::{Run, State, Stop};
use crate::shell::parse::{self, Command, Join, Part, Pipeline, Simple};
use crate::shell::{Input, Output};

impl State {
    /// Runs a list of pipelines, adding what they print to `out`.
    pub fn list(
        &mut self,
        run: &mut Run<'_>,
        list: &[Pipeline],
        stdin: &mut Input,
        out: &mut Output,
    ) -> Result<(), Stop> {
        for p in list {
            let skip = match p.join {
                Join::Always => false,
                Join::And => self.status != 0,
                Join::Or => self.status == 0,
            };
            if !skip {
                self.pipeline(run, p, stdin, out)?;
            }
        }
        Ok(())
    }

    fn pipeline(
        &mut self,
        run: &mut Run<'_>,
        p: &Pipeline,
        stdin: &mut Input,
        out: &mut Output,
    ) -> Result<(), Stop> {
        let mut piped: Option<Vec<u8>> = None;
        let last = p.commands.len().saturating_sub(1);
        for (i, cmd) in p.commands.iter().enumerate() {
            let mut own = Output::default();
            // Before the last command, stdout is the pipe, whatever the shell's own points to.
            let shells_out = (i != last).then(|| std::mem::replace(&mut self.fds.out, To::Out));
            let r = match piped.take() {
                Some(bytes) => self.command(run, cmd, &mut Input::bytes(bytes), &mut own),
                None => self.command(run, cmd, stdin, &mut own),
            };
            if let Some(o) = shells_out {
                self.fds.out = o;
            }
            run.printed(own.stdout.len() + own.stderr.len())?;
            out.stderr.append(&mut own.stderr);
            if i == last {
                out.stdout.append(&mut own.stdout);
            } else {
                piped = Some(own.stdout);
            }
            r?;
        }
        if p.negate {
            self.status = i32::from(self.status == 0);
        }
        Ok(())
    }

    fn command(
        &mut self,
        run: &mut Run<'_>,
        cmd: &Command,
        stdin: &mut Input,
        out: &mut Output,
    ) -> Result<(), Stop> {
        run.step()?;
        match cmd {
            Command::Simple(s) => self.simple(run, s, stdin, out),
            Command::Group(body, redirects) => {
                let mut own = Output::default();
                let mut from_file = match self.input_file(run, redirects) {
                    Ok(f) => f,
                    Err(e) => {
                        self.status = 1;
                        out.stderr.extend_from_slice(e.as_bytes());
                        return Ok(());
                    }
                };
                let stdin = from_file.as_mut().unwrap_or(stdin);
                // The group's redirects take what its commands print, wherever the shell's
                // own descriptors point.
                let shells = (!redirects.is_empty()).then(|| std::mem::take(&mut self.fds));
                let r = self.nested(run, |st, run| st.list(run, body, stdin, &mut own));
                if let Some(fds) = shells {
                    self.fds = fds;
                }
                if let Err(e) = self.route(run, redirects, own, out) {
                    self.status = 1;
                    out.stderr.extend_from_slice(e.as_bytes());
                }
                r
            }
            Command::For { var, items, body } => {
                let mut values = Vec::new();
                for w in items {
                    // Unquoted expansions split into fields, as `for x in $LIST` expects (paths
                    // a pattern matched are fields already).
                    let split = w
                        .iter()
                        .any(|p| matches!(p, Part::Var(_) | Part::Command(_) | Part::Arith(_)));
                    if self.expand_fields(run, w, out, &mut values)? == 1
                        && split
                        && let Some(v) = values.pop()
                    {
                        values.extend(v.split_whitespace().map(str::to_owned));
                    }
                }
                self.status = 0;
                for v in values {
                    run.step()?;
                    self.set(var, v);
                    self.nested(run, |st, run| st.list(run, body, stdin, out))?;
                }
                Ok(())
            }
            Command::Loop { until, cond, body } => {
                let mut status = 0;
                loop {
                    run.step()?;
                    self.nested(run, |st, run| st.list(run, cond, stdin, out))?;
                    if (self.status == 0) == *until {
                        break;
                    }
                    self.nested(run, |st, run| st.list(run, body, stdin, out))?;
                    status = self.status;
                }
                self.status = status;
                Ok(())
            }
            Command::Case { word, arms } => {
                let value = self.expand(run, word, out)?;
                self.status = 0;
                for (patterns, body) in arms {
                    let mut hit = false;
                    for p in patterns {
                        let p = self.expand_pattern(run, p, out)?;
                        if glob(&p, &value) {
                            hit = true;
                            break;
                        }
                    }
                    if hit {
                        return self.nested(run, |st, run| st.list(run, body, stdin, out));
                    }
                }
                Ok(())
            }
            Command::If { arms, otherwise } => {
                for (cond, body) in arms {
                    self.nested(run, |st, run| st.list(run, cond, stdin, out))?;
                    if self.status == 0 {
                        return self.nested(run, |st, run| st.list(run, body, stdin, out));
                    }
                }
                self.status = 0;
                self.nested(run, |st, run| st.list(run, otherwise, stdin, out))
            }
        }
    }

    fn nested(
        &mut self,
        run: &mut Run<'_>,
        f: impl FnOnce(&mut Self, &mut Run<'_>) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        if run.depth >= parse::MAX_DEPTH {
            return Err(Stop::Budget(format!(
                "nested deeper than {} levels",
                parse::MAX_DEPTH
            )));
        }
        run.depth += 1;
        let r = f(self, run);
        run.depth -= 1;
        r
    }

    fn simple(
        &mut self,
        run: &mut Run<'_>,
        s: &Simple,
        stdin: &mut Input,
        out: &mut Output,
    ) -> Result<(), Stop> {
        self.bad_expansion = false;
        let mut words = Vec::with_capacity(s.words.len());
        for w in &s.words {
            self.expand_fields(run, w, out, &mut words)?;
        }
        let mut assigned = Vec::new();
        for (name, value) in &s.assigns {
            assigned.push((name.clone(), self.expand(run, value, out)?));
        }
        if std::mem::take(&mut self.bad_expansion) {
            self.status = 1;
            return Ok(());
        }
        for (name, value) in &assigned {
            self.set(name, value.clone());
        }
        // `exec` and `command` run the words after them; `exec` then ends the shell.
        let mut at = 0;
        let mut replaces_shell = false;
        loop {
            match words.get(at).map(String::as_str) {
                Some("exec") => match exec_options(&words[at + 1..]) {
                    Ok(skip) => {
                        at += 1 + skip;
                        replaces_shell = true;
                    }
                    Err(e) => {
                        self.status = 2;
                        out.stderr.extend_from_slice(e.as_bytes());
                        return Ok(());
                    }
                },
                Some("command") => {
                    let opts = words[at + 1..]
                        .iter()
                        .take_while(|w| w.starts_with('-') && w.len() > 1)
                        .collect::<Vec<_>>();
                    // With anything but `-p` it is `command -v|-V`, a builtin of its own.
                    if opts
                        .iter()
                        .any(|o| *o != "--" && o.chars().skip(1).any(|c| c != 'p'))
                    {
                        break;
                    }
                    let stop = opts.iter().position(|o| *o == "--");
                    at += 1 + stop.map_or(opts.len(), |i| i + 1);
                }
                _ => break,
            }
            if at == words.len() {
                // `exec` with redirects only moves the shell's own descriptors.
                self.status = 0;
                if replaces_shell && let Err(e) = self.exec_redirects(run, &s.redirects) {
                    self.status = 1;
                    out.stderr.extend_from_slice(e.as_bytes());
                }
                return Ok(());
            }
        }
        let Some(name) = words.get(at) else {
            // Only assignments.
            self.status = 0;
            return Ok(());
        };
        let args = &words[at + 1..];
        if name == "exit" {
            let code = match args.first() {
                None => Some(self.status),
                Some(a) => a.parse::<i32>().ok(),
            };
            self.exited = Some(code.unwrap_or(2) & 0xff);
            if code.is_none() {
                out.stderr.extend_from_slice(
                    format!("/system/bin/sh: exit: {}: bad number\n", args[0]).as_bytes(),
                );
            }
            return Err(Stop::Exit);
        }
        let mut from_file = match self.input_file(run, &s.redirects) {
            Ok(f) => f,
            Err(e) => {
                self.status = 1;
                out.stderr.extend_from_slice(e.as_bytes());
                return Ok(());
            }
        };
        let stdin = from_file.as_mut().unwrap_or(stdin);
        let result = match self.builtin(run, name, args, stdin) {
            Some(r) => r,
            None => crate::shell::command(run.device, name, args, &assigned, stdin),
        };
        self.status = result.code;
        if let Err(e) = self.route(run, &s.redirects, result, out) {
            self.status = 1;
            out.stderr.extend_from_slice(e.as_bytes());
        }
        if replaces_shell {
            self.exited = Some(self.status & 0xff);
            return Err(Stop::Exit);
        }
        Ok(())
    }
}

/// How many words after `exec` are its options (`-c`, `-a NAME`, ending at `--`).
fn exec_options(args: &[String]) -> Result<usize, String> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--" => return Ok(i + 1),
            "-c" => i += 1,
            "-a" => i += 2,
            o if o.starts_with("-a") => i += 1,
            o if o.starts_with('-') && o.len() > 1 => {
                let c = o.chars().nth(1).unwrap_or('-');
                return Err(format!("/system/bin/sh: exec: -{c}: unknown option\n"));
            }
            _ => break,
        }
    }
    Ok(i.min(args.len()))
}
