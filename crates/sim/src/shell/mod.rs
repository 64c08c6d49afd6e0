//! The device's shell: runs a command line against the simulated phone and returns stdout,
//! stderr and the exit code, as `/system/bin/sh` would. Unknown commands answer like a phone
//! (`inaccessible or not found`, exit 127); nothing here blocks for longer than a capped
//! `sleep`.
mod android;
mod exec;
pub mod input;
pub mod parse;
mod text;
mod toybox;

use std::sync::Mutex;
use std::time::Duration;

use crate::device::Device;
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

/// The pid of the shell (`$$`), as `ps` and errors name it.
pub const SHELL_PID: u32 = 4242;

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
    /// A shell on a terminal (`adb shell` with a pty): as mksh, it tracks as aliases only the
    /// commands it starts with (`type getprop` says `getprop is /system/bin/getprop`).
    pub fn on_terminal() -> Self {
        let mut s = Self::default();
        s.state.interactive = true;
        s
    }

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

/// The device, with its delayed changes that are due applied.
fn lock(device: &Mutex<Device>) -> std::sync::MutexGuard<'_, Device> {
    let mut dev = device.lock().unwrap_or_else(|p| p.into_inner());
    dev.tick();
    dev
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

/// The toybox tools this shell has (`toybox NAME` runs them; `which` finds them).
const TOYBOX: &[&str] = &[
    "cat", "cut", "date", "echo", "false", "grep", "head", "id", "ls", "md5sum", "mkdir", "printf",
    "pwd", "rm", "sleep", "sort", "tail", "touch", "tr", "true", "uname", "uniq", "wc", "whoami",
    "which",
];

/// One command with its arguments; `env` holds the assignments written before it
/// (`CLASSPATH=… app_process …`).
fn command(
    device: &Mutex<Device>,
    cmd: &str,
    args: &[String],
    env: &[(String, String)],
    stdin: &mut Input,
) -> Output {
    let name = cmd.rsplit('/').next().unwrap_or(cmd);
    if name == "sleep" {
        return sleep(args);
    }
    if name == "toybox" {
        return match args.split_first() {
            Some((tool, rest)) if TOYBOX.contains(&tool.as_str()) => {
                command(device, tool, rest, env, stdin)
            }
            Some((tool, _)) => Output::fail(1, format!("toybox: Unknown command {tool}")),
            None => Output::ok(TOYBOX.join(" ") + "\n"),
        };
    }
    if name == "which" {
        let mut out = Output {
            code: i32::from(args.is_empty()),
            ..Output::default()
        };
        for a in args {
            if TOYBOX.contains(&a.as_str()) || android::COMMANDS.contains(&a.as_str()) {
                out.stdout
                    .extend_from_slice(format!("/system/bin/{a}\n").as_bytes());
            } else {
                out.code = 1;
            }
        }
        return out;
    }
    if let Some(out) = android::command(device, name, args, env, stdin) {
        return out;
    }
    let dev = &mut *lock(device);
    match name {
        "echo" => toybox::echo(args),
        "printf" => toybox::printf(args),
        "true" | ":" => Output::default(),
        "false" => Output {
            code: 1,
            ..Output::default()
        },
        "cat" => toybox::cat(dev, args, stdin),
        "ls" => toybox::ls(dev, args),
        "rm" => {
            let force = args.iter().any(|a| a.starts_with('-') && a.contains('f'));
            toybox::each_path(args, |p| match dev.fs.remove(p) {
                Err(_) if force && dev.fs.kind(p).is_none() => Ok(()),
                r => r.map_err(|e| format!("rm: {e}")),
            })
        }
        "mkdir" => toybox::each_path(args, |p| {
            dev.fs.mkdir_all(p);
            Ok(())
        }),
        "touch" => toybox::each_path(args, |p| match dev.fs.kind(p) {
            Some(_) => Ok(()),
            None => dev
                .fs
                .write(p, Vec::new(), false)
                .map_err(|e| format!("touch: {e}")),
        }),
        "grep" => text::grep(args, &stdin.read_to_end(), |f| {
            dev.fs.read(f).map(<[u8]>::to_vec)
        }),
        "head" | "tail" => {
            // Files after the options (`head -n 5 FILE`); stdin without them.
            let mut skip = false;
            let files: Vec<&String> = args
                .iter()
                .filter(|a| {
                    let keep = !skip && !a.starts_with('-');
                    skip = matches!(a.as_str(), "-n" | "-c");
                    keep
                })
                .collect();
            if files.is_empty() {
                text::head_tail(name, args, &stdin.read_to_end())
            } else {
                let mut out = Output::default();
                for f in files {
                    match dev.fs.read(f) {
                        Ok(data) => out.stdout.extend(text::head_tail(name, args, data).stdout),
                        Err(e) => {
                            out.stderr.extend(format!("{name}: {e}\n").bytes());
                            out.code = 1;
                        }
                    }
                }
                out
            }
        }
        "cut" => text::cut(args, &stdin.read_to_end()),
        "tr" => text::tr(args, &stdin.read_to_end()),
        "sort" | "uniq" => text::sort_uniq(name, args, &stdin.read_to_end()),
        "md5sum" => text::md5sum(args, &stdin.read_to_end(), |f| {
            dev.fs.read(f).map(<[u8]>::to_vec)
        }),
        "wc" => toybox::wc(dev, args, stdin),
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
        "date" => toybox::date(dev.clock.now_ms(), args),
        _ => Output::fail(
            127,
            format!("/system/bin/sh: {cmd}: inaccessible or not found"),
        ),
    }
}

#[cfg(test)]
mod tests;
