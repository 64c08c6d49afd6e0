//! What a name is to the shell, as Android's mksh (R59c) says it: `command -v|-V`, `whence
//! [-pv]` and `type` (mksh's alias for `\builtin whence -v`). Reserved words, the aliases and
//! builtins this shell runs, and the tools found on PATH in /system/bin. A shell run with a
//! command (`sh -c`) tracks every command it finds on PATH as an alias; an interactive one
//! tracks only mksh's initial list.
use crate::shell::{Output, TOYBOX, android};

/// mksh's reserved words.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "{", "}", "!", "[[",
];

/// mksh's aliases for builtins this shell runs, with their values.
const ALIASES: &[(&str, &str)] = &[
    ("local", "\\\\builtin typeset"),
    ("type", "\\\\builtin whence -v"),
];

/// POSIX special builtins this shell runs (mksh says "special shell builtin").
const SPECIAL: &[&str] = &[
    ":", "exec", "exit", "export", "readonly", "set", "shift", "trap", "unset",
];

/// The other mksh builtins this shell runs.
const BUILTINS: &[&str] = &[
    "[", "cat", "cd", "command", "echo", "false", "pwd", "read", "sleep", "test", "true", "umask",
    "wait", "whence",
];

/// Commands mksh tracks as aliases from its start, before it has run any.
const TRACKED_AT_START: &[&str] = &[
    "cat", "cc", "chmod", "cp", "date", "ed", "emacs", "grep", "ls", "make", "mv", "pr", "rm",
    "sed", "sh", "vi", "who",
];

/// Whether `name` is a program in /system/bin.
fn on_path(name: &str) -> bool {
    name == "toybox" || TOYBOX.contains(&name) || android::COMMANDS.contains(&name)
}

/// Whether `name` is a builtin of this shell (then it runs before anything on PATH).
pub(super) fn is_builtin(name: &str) -> bool {
    SPECIAL.contains(&name) || BUILTINS.contains(&name)
}

enum Found {
    Keyword,
    Alias(&'static str),
    Builtin {
        special: bool,
    },
    /// A program: its path, and whether the shell tracks it as an alias.
    Program(String, bool),
}

fn find(name: &str, path_only: bool, default_path: bool, trackall: bool) -> Option<Found> {
    if name.contains('/') {
        let full = crate::fs::normalize(name);
        let found = full.strip_prefix("/system/bin/").is_some_and(on_path);
        let shown = if name.starts_with('/') {
            name.to_owned()
        } else {
            full
        };
        return found.then_some(Found::Program(shown, false));
    }
    if !path_only {
        if KEYWORDS.contains(&name) {
            return Some(Found::Keyword);
        }
        if let Some((_, value)) = ALIASES.iter().find(|(a, _)| *a == name) {
            return Some(Found::Alias(value));
        }
        if is_builtin(name) {
            return Some(Found::Builtin {
                special: SPECIAL.contains(&name),
            });
        }
    }
    on_path(name).then(|| {
        let tracked = !default_path && (trackall || TRACKED_AT_START.contains(&name));
        Found::Program(format!("/system/bin/{name}"), tracked)
    })
}

/// A word as mksh prints a value: as is when nothing in it needs quoting, else single-quoted.
fn quoted(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "%+,-./:=@_^".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `command -v|-V NAME...` (`command`) and `whence [-pv] NAME...` / `type NAME...`: one line per
/// name. Without `-v` (or `-V`) the first name not found ends the list, with status 1.
pub(super) fn whence(name: &str, args: &[String], trackall: bool) -> Output {
    let command = name == "command";
    let mut verbose = name == "type";
    let (mut path_only, mut default_path) = (false, false);
    let mut names = args;
    while let Some((first, rest)) = names.split_first() {
        if first == "--" {
            names = rest;
            break;
        }
        let Some(flags) = first.strip_prefix('-').filter(|f| !f.is_empty()) else {
            break;
        };
        for f in flags.chars() {
            match (f, command) {
                ('v', true) => verbose = false,
                ('V', true) | ('v', false) => verbose = true,
                ('p', true) => default_path = true,
                ('p', false) => path_only = true,
                _ => {
                    return Output::fail(
                        1,
                        format!("/system/bin/sh: {name}: -{f}: unknown option"),
                    );
                }
            }
        }
        names = rest;
    }
    let mut out = String::new();
    let mut code = 0;
    for id in names {
        if code != 0 && !verbose {
            break;
        }
        match find(id, path_only, default_path, trackall) {
            Some(Found::Keyword) if verbose => out.push_str(&format!("{id} is a reserved word")),
            Some(Found::Builtin { special }) if verbose => {
                let special = if special { "special " } else { "" };
                out.push_str(&format!("{id} is a {special}shell builtin"));
            }
            Some(Found::Keyword | Found::Builtin { .. }) => out.push_str(id),
            Some(Found::Alias(value)) if verbose => {
                out.push_str(&format!("{} is an alias for {}", quoted(id), quoted(value)))
            }
            Some(Found::Alias(value)) if command => {
                out.push_str(&format!("alias {}={}", quoted(id), quoted(value)));
            }
            Some(Found::Alias(value)) => out.push_str(&quoted(value)),
            Some(Found::Program(path, tracked)) if verbose => {
                let how = if tracked { "a tracked alias for " } else { "" };
                out.push_str(&format!("{id} is {how}{path}"));
            }
            Some(Found::Program(path, _)) => out.push_str(&path),
            None => {
                code = 1;
                if verbose {
                    out.push_str(&format!("{id} not found"));
                } else {
                    continue;
                }
            }
        }
        out.push('\n');
    }
    Output {
        stdout: out.into_bytes(),
        code,
        ..Output::default()
    }
}
