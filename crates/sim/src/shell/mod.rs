//! The device's shell: runs a command line against the simulated phone and returns stdout,
//! stderr and the exit code, as `/system/bin/sh` would. Unknown commands answer like a phone
//! (`inaccessible or not found`, exit 127); nothing here blocks for longer than a capped
//! `sleep`.
mod android;
mod exec;
pub mod input;
pub mod parse;

use std::sync::Mutex;
use std::time::Duration;

use crate::device::Device;
use crate::fs::Kind;
pub use input::{Input, Source};

/// What a command printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub code: i32,
}

impl Output {
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Self {
        Self {
            stdout: stdout.into(),
            ..Self::default()
        }
    }

    pub fn fail(code: i32, stderr: impl Into<String>) -> Self {
        let mut e = stderr.into().into_bytes();
        if !e.ends_with(b"\n") {
            e.push(b'\n');
        }
        Self {
            stderr: e,
            code,
            ..Self::default()
        }
    }

    /// Output the way `shell:` (v1) delivers it: stderr mixed into stdout.
    pub fn merged(mut self) -> Vec<u8> {
        self.stdout.extend_from_slice(&self.stderr);
        self.stdout
    }
}

/// Longest `sleep` the shell honours.
pub const MAX_SLEEP: Duration = Duration::from_secs(10);

/// Runs a whole command line with no input. Blocking (a `sleep` sleeps): call it off the async
/// workers.
pub fn run(device: &Mutex<Device>, line: &str) -> Output {
    Session::default().run_line(device, line, &mut Input::empty())
}

/// What one shell process keeps from line to line: variables, the last status, and whether
/// `exit` ran.
#[derive(Debug, Default)]
pub struct Session {
    state: exec::State,
}

/// Most script a shell holds while a construct (a loop, an `if`, a quote) is still open.
const MAX_PENDING_SCRIPT: usize = 1 << 20;

impl Session {
    /// The status `$?` reads: the last command's.
    pub fn status(&self) -> i32 {
        self.state.status
    }

    /// `Some(code)` once `exit` ran: the shell has ended with that code.
    pub fn exited(&self) -> Option<i32> {
        self.state.exited
    }

    /// The code this shell ends with: `exit`'s, else the last command's.
    pub fn exit_code(&self) -> i32 {
        self.state.exited.unwrap_or(self.state.status)
    }

    /// Runs one command line; its commands read `stdin` (the first of each pipeline does; the
    /// rest read the pipe). Does nothing once the shell has exited.
    pub fn run_line(&mut self, device: &Mutex<Device>, line: &str, stdin: &mut Input) -> Output {
        match parse::parse(line) {
            Ok(list) => self.run_parsed(device, &list, stdin),
            Err(e) => self.syntax_error(&e),
        }
    }

    fn syntax_error(&mut self, e: &parse::ParseError) -> Output {
        self.state.status = 2;
        Output::fail(2, format!("/system/bin/sh: {e}"))
    }

    fn run_parsed(
        &mut self,
        device: &Mutex<Device>,
        list: &[parse::Pipeline],
        stdin: &mut Input,
    ) -> Output {
        let mut out = Output::default();
        if self.state.exited.is_none() {
            let mut run = exec::Run::new(device);
            if let Err(exec::Stop::Budget(why)) = self.state.list(&mut run, list, stdin, &mut out) {
                out.stderr
                    .extend_from_slice(format!("/system/bin/sh: {why}\n").as_bytes());
                self.state.status = 1;
            }
        }
        out.code = self.exit_code();
        out
    }

    /// Runs a script read from `stdin` as `sh` does when its input is not a terminal: a line
    /// at a time (more lines while a loop, an `if` or a quote is open), handing each part's
    /// output to `emit`; ends at `exit` or end of input and returns the shell's exit code.
    /// Commands in the script read the same input.
    pub fn run_script(
        &mut self,
        device: &Mutex<Device>,
        stdin: &mut Input,
        mut emit: impl FnMut(Output),
    ) -> i32 {
        let mut pending = String::new();
        while self.state.exited.is_none() {
            let Some(line) = stdin.line() else { break };
            pending.push_str(&String::from_utf8_lossy(&line));
            pending.push('\n');
            match parse::parse(&pending) {
                Ok(list) => {
                    pending.clear();
                    if !list.is_empty() {
                        emit(self.run_parsed(device, &list, stdin));
                    }
                }
                Err(parse::ParseError::Incomplete(_)) if pending.len() < MAX_PENDING_SCRIPT => {}
                Err(e) => {
                    pending.clear();
                    emit(self.syntax_error(&e));
                }
            }
        }
        if !pending.trim().is_empty() {
            // End of input inside an open construct.
            if let Err(e) = parse::parse(&pending) {
                emit(self.syntax_error(&e));
            }
        }
        self.exit_code()
    }
}

fn lock(device: &Mutex<Device>) -> std::sync::MutexGuard<'_, Device> {
    device.lock().unwrap_or_else(|p| p.into_inner())
}

fn sleep(args: &[String]) -> Output {
    let Some(secs) = args
        .first()
        .and_then(|a| a.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
    else {
        return Output::fail(1, "usage: sleep SECONDS");
    };
    std::thread::sleep(Duration::from_secs_f64(secs).min(MAX_SLEEP));
    Output::default()
}

/// One command with its arguments.
fn command(device: &Mutex<Device>, cmd: &str, args: &[String], stdin: &mut Input) -> Output {
    let name = cmd.rsplit('/').next().unwrap_or(cmd);
    if name == "sleep" {
        return sleep(args);
    }
    if let Some(out) = android::command(device, name, args, stdin) {
        return out;
    }
    let dev = &mut *lock(device);
    match name {
        "echo" => echo(args),
        "printf" => printf(args),
        "true" | ":" => Output::default(),
        "false" => Output {
            code: 1,
            ..Output::default()
        },
        "cat" => cat(dev, args, stdin),
        "ls" => ls(dev, args),
        "rm" => each_path(args, |p| dev.fs.remove(p).map_err(|e| format!("rm: {e}"))),
        "mkdir" => each_path(args, |p| {
            dev.fs.mkdir_all(p);
            Ok(())
        }),
        "touch" => each_path(args, |p| match dev.fs.kind(p) {
            Some(_) => Ok(()),
            None => dev
                .fs
                .write(p, Vec::new(), false)
                .map_err(|e| format!("touch: {e}")),
        }),
        "grep" => grep(args, &stdin.read_to_end()),
        "head" | "tail" => head_tail(name, args, &stdin.read_to_end()),
        "wc" => wc(dev, args, stdin),
        "id" => Output::ok(
            "uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),1015(sdcard_rw),3003(inet) context=u:r:shell:s0\n",
        ),
        "whoami" => Output::ok("shell\n"),
        "pwd" => Output::ok("/\n"),
        "uname" => Output::ok(if args.iter().any(|a| a == "-a") {
            "Linux localhost 6.1.0-droidmesh #1 SMP PREEMPT aarch64 Toybox\n"
        } else {
            "Linux\n"
        }),
        "date" => Output::ok("Thu Jan  1 00:00:00 UTC 2026\n"),
        _ => Output::fail(
            127,
            format!("/system/bin/sh: {cmd}: inaccessible or not found"),
        ),
    }
}

/// `wc [-lwc] [FILE...]`: counts of each input, as toybox prints them.
fn wc(dev: &Device, args: &[String], stdin: &mut Input) -> Output {
    let flags: String = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .flat_map(|a| a.chars().skip(1))
        .collect();
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let (l, w, c) = if flags.is_empty() {
        (true, true, true)
    } else {
        (
            flags.contains('l'),
            flags.contains('w'),
            flags.contains('c'),
        )
    };
    let count = |data: &[u8], name: Option<&str>| {
        let mut cols = Vec::new();
        if l {
            cols.push(data.iter().filter(|b| **b == b'\n').count().to_string());
        }
        if w {
            cols.push(
                data.split(|b| b.is_ascii_whitespace())
                    .filter(|s| !s.is_empty())
                    .count()
                    .to_string(),
            );
        }
        if c {
            cols.push(data.len().to_string());
        }
        if let Some(n) = name {
            cols.push(n.to_owned());
        }
        cols.join(" ") + "\n"
    };
    if files.is_empty() {
        return Output::ok(count(&stdin.read_to_end(), None));
    }
    let mut out = Output::default();
    for f in files {
        match dev.fs.read(f) {
            Ok(data) => out
                .stdout
                .extend_from_slice(count(data, Some(f)).as_bytes()),
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("wc: {e}\n").as_bytes());
                out.code = 1;
            }
        }
    }
    out
}

/// Backslash escapes of `printf` and `echo -e`.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('e') => out.push('\u{1b}'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `printf FORMAT [ARG...]`: `%s %d %i %x %c %%` and backslash escapes; the format repeats
/// while arguments remain.
fn printf(args: &[String]) -> Output {
    let Some((format, mut rest)) = args.split_first() else {
        return Output::fail(1, "usage: printf FORMAT [ARGUMENT...]");
    };
    let format = unescape(format);
    let mut out = String::new();
    let mut code = 0;
    loop {
        let mut used = false;
        let mut it = format.chars().peekable();
        while let Some(c) = it.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let mut spec = String::new();
            while let Some(&d) = it.peek().filter(|d| d.is_ascii_digit() || **d == '-') {
                spec.push(d);
                it.next();
            }
            let conv = it.next();
            if conv == Some('%') {
                out.push('%');
                continue;
            }
            let arg = rest.first().map(String::as_str).unwrap_or("");
            if !rest.is_empty() {
                rest = &rest[1..];
                used = true;
            }
            let width: usize = spec.trim_start_matches('-').parse().unwrap_or(0);
            let text = match conv {
                Some('s') => arg.to_owned(),
                Some('c') => arg.chars().next().map(String::from).unwrap_or_default(),
                Some(k @ ('d' | 'i' | 'x' | 'X' | 'o')) => {
                    let n = if arg.is_empty() {
                        Ok(0)
                    } else {
                        arg.trim().parse::<i64>()
                    };
                    let n = n.unwrap_or_else(|_| {
                        code = 1;
                        0
                    });
                    match k {
                        'x' => format!("{n:x}"),
                        'X' => format!("{n:X}"),
                        'o' => format!("{n:o}"),
                        _ => n.to_string(),
                    }
                }
                _ => return Output::fail(1, "printf: unsupported conversion"),
            };
            if spec.starts_with('-') {
                out.push_str(&format!("{text:<width$}"));
            } else {
                out.push_str(&format!("{text:>width$}"));
            }
        }
        if !used || rest.is_empty() {
            break;
        }
    }
    Output {
        stdout: out.into_bytes(),
        code,
        ..Output::default()
    }
}

fn echo(args: &[String]) -> Output {
    let (newline, args) = match args.first() {
        Some(a) if a == "-n" => (false, &args[1..]),
        _ => (true, args),
    };
    let mut s = args.join(" ");
    if newline {
        s.push('\n');
    }
    Output::ok(s)
}

fn each_path(args: &[String], mut f: impl FnMut(&str) -> Result<(), String>) -> Output {
    let mut out = Output::default();
    for a in args.iter().filter(|a| !a.starts_with('-')) {
        if let Err(e) = f(a) {
            out.stderr.extend_from_slice(format!("{e}\n").as_bytes());
            out.code = 1;
        }
    }
    out
}

fn cat(dev: &Device, args: &[String], stdin: &mut Input) -> Output {
    if args.is_empty() {
        return Output::ok(stdin.read_to_end());
    }
    let mut out = Output::default();
    for a in args {
        match dev.fs.read(a) {
            Ok(data) => out.stdout.extend_from_slice(data),
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("cat: {e}\n").as_bytes());
                out.code = 1;
            }
        }
    }
    out
}

fn ls(dev: &Device, args: &[String]) -> Output {
    let long = args.iter().any(|a| a.starts_with('-') && a.contains('l'));
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let paths = if paths.is_empty() {
        vec!["/"]
    } else {
        paths.iter().map(|s| s.as_str()).collect()
    };
    let mut out = Output::default();
    for p in paths {
        let entries = match dev.fs.kind(p) {
            Some(Kind::File(size)) => Ok(vec![(p.to_owned(), Kind::File(size))]),
            _ => dev.fs.list(p),
        };
        match entries {
            Ok(entries) => {
                for (name, kind) in entries {
                    let line = if long {
                        match kind {
                            Kind::Dir => format!(
                                "drwxrwx--x 2 root sdcard_rw 3452 2026-01-01 00:00 {name}\n"
                            ),
                            Kind::File(size) => format!(
                                "-rw-rw---- 1 root sdcard_rw {size} 2026-01-01 00:00 {name}\n"
                            ),
                        }
                    } else {
                        format!("{name}\n")
                    };
                    out.stdout.extend_from_slice(line.as_bytes());
                }
            }
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("ls: {e}\n").as_bytes());
                out.code = 1;
            }
        }
    }
    out
}

fn grep(args: &[String], stdin: &[u8]) -> Output {
    let invert = args.iter().any(|a| a == "-v");
    let ignore = args.iter().any(|a| a == "-i");
    let Some(pattern) = args.iter().find(|a| !a.starts_with('-')) else {
        return Output::fail(2, "usage: grep [-iv] PATTERN");
    };
    let pattern = if ignore {
        pattern.to_lowercase()
    } else {
        pattern.clone()
    };
    let text = String::from_utf8_lossy(stdin);
    let mut out = String::new();
    for line in text.lines() {
        let hay = if ignore {
            line.to_lowercase()
        } else {
            line.to_owned()
        };
        if hay.contains(&pattern) != invert {
            out.push_str(line);
            out.push('\n');
        }
    }
    let code = if out.is_empty() { 1 } else { 0 };
    Output {
        stdout: out.into_bytes(),
        code,
        ..Output::default()
    }
}

fn head_tail(name: &str, args: &[String], stdin: &[u8]) -> Output {
    let n = args
        .iter()
        .filter_map(|a| {
            a.trim_start_matches("-n")
                .trim_start_matches('-')
                .parse::<usize>()
                .ok()
        })
        .next()
        .unwrap_or(10);
    let text = String::from_utf8_lossy(stdin);
    let lines: Vec<&str> = text.lines().collect();
    let picked: &[&str] = if name == "head" {
        &lines[..n.min(lines.len())]
    } else {
        &lines[lines.len().saturating_sub(n)..]
    };
    let mut s = picked.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    Output::ok(s)
}

#[cfg(test)]
mod tests;
