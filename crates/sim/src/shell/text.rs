//! Toybox's filters that tools pipe Android's answers into: `grep` (basic, extended and fixed
//! patterns; -i -v -c -q -o -w -x -n -l -e), `head`/`tail` (-n, -c), `cut`, `tr`, `sort`,
//! `uniq` and `md5sum`, with toybox's exit codes.
use md5::{Digest, Md5};
use regex::bytes::{Regex, RegexBuilder};

use super::Output;

/// Most memory one compiled `grep` pattern may take.
const REGEX_LIMIT: usize = 1 << 20;

/// Most compiled patterns kept (more: the cache starts over).
const REGEX_CACHE: usize = 64;

/// The pattern compiled, from a cache of the last ones used: tools grep the same way every
/// time (the device service reads `dumpsys window` through one grep per observation), and
/// building the automaton costs more than running it.
fn compiled(source: &str, case_insensitive: bool) -> Result<Regex, regex::Error> {
    type Cache = std::collections::HashMap<(String, bool), Regex>;
    static CACHE: std::sync::OnceLock<std::sync::Mutex<Cache>> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (source.to_owned(), case_insensitive);
    if let Some(re) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(re.clone());
    }
    let re = RegexBuilder::new(source)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_LIMIT)
        .dfa_size_limit(REGEX_LIMIT)
        .build()?;
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() >= REGEX_CACHE {
        cache.clear();
    }
    cache.insert(key, re.clone());
    Ok(re)
}

/// A basic regular expression (grep without -E) in the syntax of the `regex` crate: `\(` `\)`
/// `\{` `\}` `\|` `\+` `\?` are operators, their plain forms literal.
fn from_basic(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut it = p.chars();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.next() {
                Some(o @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => out.push(o),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// One input of `grep`: its file name (none for stdin) and its bytes or why it could not be read.
type Named<'a> = (Option<&'a str>, Result<Vec<u8>, String>);

/// `grep [-EFivcqowxnl] [-e PATTERN]... [PATTERN] [FILE...]`, reading `stdin` without files.
pub fn grep(
    args: &[String],
    stdin: &[u8],
    read: impl Fn(&str) -> Result<Vec<u8>, String>,
) -> Output {
    let mut flags = String::new();
    let mut patterns: Vec<String> = Vec::new();
    let mut rest: Vec<&String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-e" {
            match it.next() {
                Some(p) => patterns.push(p.clone()),
                None => return Output::fail(2, "grep: option requires an argument -- e"),
            }
        } else if let Some(p) = a.strip_prefix("--regexp=") {
            patterns.push(p.to_owned());
        } else if a.starts_with('-') && a.len() > 1 && rest.is_empty() {
            flags.push_str(&a[1..]);
        } else {
            rest.push(a);
        }
    }
    if patterns.is_empty() {
        match rest.first() {
            Some(p) => {
                patterns.push((*p).clone());
                rest.remove(0);
            }
            None => {
                return Output::fail(
                    2,
                    "usage: grep [-EFivcqowxnl] [-e PATTERN] PATTERN [FILE...]",
                );
            }
        }
    }
    let has = |c: char| flags.contains(c);
    let alternatives: Vec<String> = patterns
        .iter()
        .flat_map(|p| p.split('\n'))
        .map(|p| {
            if has('F') {
                regex::escape(p)
            } else if has('E') {
                p.to_owned()
            } else {
                from_basic(p)
            }
        })
        .map(|p| format!("(?:{p})"))
        .collect();
    let mut source = alternatives.join("|");
    if has('w') {
        source = format!(r"\b(?:{source})\b");
    }
    if has('x') {
        source = format!("^(?:{source})$");
    }
    let re: Regex = match compiled(&source, has('i')) {
        Ok(re) => re,
        Err(e) => {
            return Output::fail(
                2,
                format!("grep: bad regex '{}': {e}", patterns.join("\\n")),
            );
        }
    };
    let inputs: Vec<Named<'_>> = if rest.is_empty() {
        vec![(None, Ok(stdin.to_vec()))]
    } else {
        rest.iter().map(|f| (Some(f.as_str()), read(f))).collect()
    };
    let named = inputs.len() > 1;
    let mut out = Output::default();
    let mut any = false;
    let mut error = false;
    for (name, data) in inputs {
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                if !has('s') {
                    out.stderr
                        .extend_from_slice(format!("grep: {e}\n").as_bytes());
                }
                error = true;
                continue;
            }
        };
        let mut count = 0usize;
        let prefix = |n: usize| {
            let mut p = String::new();
            if named {
                p.push_str(name.unwrap_or("(standard input)"));
                p.push(':');
            }
            if has('n') {
                p.push_str(&format!("{n}:"));
            }
            p
        };
        let body = data.strip_suffix(b"\n").unwrap_or(&data);
        let lines = body
            .split(|b| *b == b'\n')
            .take(if data.is_empty() { 0 } else { usize::MAX });
        for (i, line) in lines.enumerate() {
            if re.is_match(line) == has('v') {
                continue;
            }
            count += 1;
            if has('q') || has('c') || has('l') {
                continue;
            }
            if has('o') && !has('v') {
                for m in re.find_iter(line).filter(|m| !m.as_bytes().is_empty()) {
                    out.stdout.extend_from_slice(prefix(i + 1).as_bytes());
                    out.stdout.extend_from_slice(m.as_bytes());
                    out.stdout.push(b'\n');
                }
            } else {
                out.stdout.extend_from_slice(prefix(i + 1).as_bytes());
                out.stdout.extend_from_slice(line);
                out.stdout.push(b'\n');
            }
        }
        any |= count > 0;
        if has('c') {
            let label = if named {
                format!("{}:", name.unwrap_or(""))
            } else {
                String::new()
            };
            out.stdout
                .extend_from_slice(format!("{label}{count}\n").as_bytes());
        }
        if has('l') && count > 0 {
            out.stdout
                .extend_from_slice(format!("{}\n", name.unwrap_or("(standard input)")).as_bytes());
        }
    }
    if has('q') {
        out.stdout.clear();
    }
    out.code = if error && !(has('q') && any) {
        2
    } else if any {
        0
    } else {
        1
    };
    out
}

/// The count an option like `-n 5`, `-n5`, `-5` or `-c 5` gives, and which option it was.
fn head_count(args: &[String]) -> (char, usize) {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        for opt in ['n', 'c'] {
            if let Some(v) = a.strip_prefix(&format!("-{opt}")) {
                let v = if v.is_empty() {
                    it.next().map(String::as_str).unwrap_or("")
                } else {
                    v
                };
                if let Ok(n) = v.parse() {
                    return (opt, n);
                }
            }
        }
        if let Some(Ok(n)) = a.strip_prefix('-').map(str::parse) {
            return ('n', n);
        }
    }
    ('n', 10)
}

/// `head` and `tail` with `-n N` (lines) or `-c N` (bytes) over their input.
pub fn head_tail(name: &str, args: &[String], stdin: &[u8]) -> Output {
    let (unit, n) = head_count(args);
    if unit == 'c' {
        let picked = if name == "head" {
            &stdin[..n.min(stdin.len())]
        } else {
            &stdin[stdin.len().saturating_sub(n)..]
        };
        return Output::ok(picked.to_vec());
    }
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

/// Which 1-based fields a `cut` list (`2`, `1,3`, `2-`, `-3`, `2-4`) selects.
fn in_list(list: &str, i: usize) -> bool {
    list.split(',').any(|r| match r.split_once('-') {
        Some((a, b)) => {
            let lo = a.parse().unwrap_or(1);
            let hi = b.parse().unwrap_or(usize::MAX);
            (lo..=hi).contains(&i)
        }
        None => r.parse() == Ok(i),
    })
}

/// `cut -d DELIM -f LIST` and `cut -c LIST`.
pub fn cut(args: &[String], stdin: &[u8]) -> Output {
    let mut delim = "\t".to_owned();
    let (mut fields, mut chars) = (None, None);
    let mut only_delimited = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |short: &str| -> Option<String> {
            let v = a.strip_prefix(short)?;
            Some(if v.is_empty() {
                it.next().cloned().unwrap_or_default()
            } else {
                v.to_owned()
            })
        };
        if let Some(d) = value("-d") {
            delim = d;
        } else if let Some(f) = value("-f") {
            fields = Some(f);
        } else if let Some(c) = value("-c") {
            chars = Some(c);
        } else if a == "-s" {
            only_delimited = true;
        }
    }
    let text = String::from_utf8_lossy(stdin);
    let mut out = String::new();
    for line in text.lines() {
        if let Some(list) = &chars {
            let picked: String = line
                .chars()
                .enumerate()
                .filter(|(i, _)| in_list(list, i + 1))
                .map(|(_, c)| c)
                .collect();
            out.push_str(&picked);
        } else if let Some(list) = &fields {
            if !line.contains(delim.as_str()) {
                if only_delimited {
                    continue;
                }
                out.push_str(line);
            } else {
                let picked: Vec<&str> = line
                    .split(delim.as_str())
                    .enumerate()
                    .filter(|(i, _)| in_list(list, i + 1))
                    .map(|(_, f)| f)
                    .collect();
                out.push_str(&picked.join(&delim));
            }
        } else {
            return Output::fail(1, "cut: need -f or -c");
        }
        out.push('\n');
    }
    Output::ok(out)
}

/// A `tr` set: ranges (`a-z`) and escapes (`\n`, `\r`, `\t`, `\\`) spelled out.
fn tr_set(s: &str) -> Vec<char> {
    let raw: Vec<char> = super::toybox::unescape(s).chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        if i + 2 < raw.len() && raw[i + 1] == '-' && raw[i] <= raw[i + 2] {
            out.extend(raw[i]..=raw[i + 2]);
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    out
}

/// `tr SET1 SET2`, `tr -d SET1`.
pub fn tr(args: &[String], stdin: &[u8]) -> Output {
    let delete = args.iter().any(|a| a == "-d");
    let sets: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') || a.len() == 1)
        .collect();
    let text = String::from_utf8_lossy(stdin);
    let from = match sets.first() {
        Some(s) => tr_set(s),
        None => return Output::fail(1, "usage: tr [-d] SET1 [SET2]"),
    };
    if delete {
        return Output::ok(
            text.chars()
                .filter(|c| !from.contains(c))
                .collect::<String>(),
        );
    }
    let to = match sets.get(1) {
        Some(s) if !s.is_empty() => tr_set(s),
        _ => return Output::fail(1, "tr: missing SET2"),
    };
    let out: String = text
        .chars()
        .map(|c| match from.iter().position(|f| *f == c) {
            Some(i) => to.get(i).or(to.last()).copied().unwrap_or(c),
            None => c,
        })
        .collect();
    Output::ok(out)
}

/// `sort [-r] [-n] [-u]` and `uniq [-c]` over their input's lines.
pub fn sort_uniq(name: &str, args: &[String], stdin: &[u8]) -> Output {
    let flags: String = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .flat_map(|a| a.chars().skip(1))
        .collect();
    let text = String::from_utf8_lossy(stdin);
    let mut lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    if name == "sort" {
        if flags.contains('n') {
            let num = |l: &str| {
                l.trim()
                    .split(|c: char| !c.is_ascii_digit() && c != '-' && c != '.')
                    .next()
                    .and_then(|n| n.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            lines.sort_by(|a, b| num(a).total_cmp(&num(b)));
        } else {
            lines.sort_unstable();
        }
        if flags.contains('r') {
            lines.reverse();
        }
        if flags.contains('u') {
            lines.dedup();
        }
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    } else {
        let mut groups: Vec<(usize, &str)> = Vec::new();
        for l in lines {
            match groups.last_mut() {
                Some((n, last)) if *last == l => *n += 1,
                _ => groups.push((1, l)),
            }
        }
        for (n, l) in groups {
            if flags.contains('c') {
                out.push_str(&format!("{n:>7} "));
            }
            out.push_str(l);
            out.push('\n');
        }
    }
    Output::ok(out)
}

/// `md5sum FILE...` as toybox prints it (`HASH  FILE`); `-` or no file reads stdin.
pub fn md5sum(
    args: &[String],
    stdin: &[u8],
    read: impl Fn(&str) -> Result<Vec<u8>, String>,
) -> Output {
    let files: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') || a.as_str() == "-")
        .collect();
    let hex = |d: &[u8]| {
        Md5::digest(d)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    if files.is_empty() {
        return Output::ok(format!("{}  -\n", hex(stdin)));
    }
    let mut out = Output::default();
    for f in files {
        let data = if f == "-" {
            Ok(stdin.to_vec())
        } else {
            read(f)
        };
        match data {
            Ok(d) => out
                .stdout
                .extend_from_slice(format!("{}  {f}\n", hex(&d)).as_bytes()),
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("md5sum: {e}\n").as_bytes());
                out.code = 1;
            }
        }
    }
    out
}
