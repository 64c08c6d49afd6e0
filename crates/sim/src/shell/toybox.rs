//! Toybox's text and file tools as the shell's commands use them: `echo`, `printf`, `cat`, `ls`,
//! `wc` and `date`.
use super::{Input, Output};
use crate::device::Device;
use crate::fs::Kind;

/// `wc [-lwc] [FILE...]`: counts of each input, as toybox prints them.
pub(super) fn wc(dev: &Device, args: &[String], stdin: &mut Input) -> Output {
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
pub(super) fn unescape(s: &str) -> String {
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
pub(super) fn printf(args: &[String]) -> Output {
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

pub(super) fn echo(args: &[String]) -> Output {
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

pub(super) fn each_path(args: &[String], mut f: impl FnMut(&str) -> Result<(), String>) -> Output {
    let mut out = Output::default();
    for a in args.iter().filter(|a| !a.starts_with('-')) {
        if let Err(e) = f(a) {
            out.stderr.extend_from_slice(format!("{e}\n").as_bytes());
            out.code = 1;
        }
    }
    out
}

pub(super) fn cat(dev: &Device, args: &[String], stdin: &mut Input) -> Output {
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

pub(super) fn ls(dev: &Device, args: &[String]) -> Output {
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

/// `date` and `date +FORMAT`: the phone's clock ([`crate::clock`]), in UTC.
pub(super) fn date(now_ms: i64, args: &[String]) -> Output {
    let format = args
        .iter()
        .find_map(|a| a.strip_prefix('+'))
        .unwrap_or(crate::clock::DEFAULT_FORMAT);
    let mut out = crate::clock::format(now_ms, format);
    out.push('\n');
    Output::ok(out)
}
