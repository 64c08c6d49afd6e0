//! Shell patterns (`*`, `?`, `[abc]`, `[!a-z]`, `\x`): matching a word for `case`, and pathname
//! expansion of unquoted words against the device's files, as mksh does it: components
//! matched directory by directory, `.` and `..` never listed, a name starting with `.` matched
//! only by a pattern starting with a literal `.`, results sorted, no match leaves the word.
use crate::fs::{Fs, Kind};

/// Most paths one word may expand to; a pattern matching more stops the line.
pub(super) const MAX_MATCHES: usize = 10_000;

/// Adds `text` to a pattern so that it matches only itself (quoted text, variable values).
pub(super) fn escape_into(pat: &mut String, text: &str) {
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pat.push('\\');
        }
        pat.push(c);
    }
}

/// A bracket expression at the start of `p` (just after its `[`): whether it matches `c`, and
/// how many chars of `p` it takes up to and including its `]`. `None` when no `]` closes it
/// (the `[` is then an ordinary character).
fn bracket(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 0;
    let negate = matches!(p.first(), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let mut lo = match p.get(i) {
            None => return None,
            Some(']') if !first => return Some((hit != negate, i + 1)),
            Some('\\') => {
                i += 1;
                *p.get(i)?
            }
            Some(x) => *x,
        };
        first = false;
        i += 1;
        let mut hi = lo;
        if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|n| *n != ']') {
            hi = match p.get(i + 1) {
                Some('\\') => {
                    i += 1;
                    *p.get(i + 1)?
                }
                Some(x) => *x,
                None => return None,
            };
            i += 2;
        }
        if lo > hi {
            std::mem::swap(&mut lo, &mut hi);
        }
        hit |= (lo..=hi).contains(&c);
    }
}

/// Whether `text` matches the shell pattern `pat`.
pub(super) fn glob(pat: &str, text: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point for the last `*`: linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => match bracket(&p[pi + 1..], t[ti]) {
                Some((true, len)) => Some(pi + 1 + len),
                Some((false, _)) => None,
                None => (t[ti] == '[').then_some(pi + 1),
            },
            Some('\\') if p.get(pi + 1) == Some(&t[ti]) => Some(pi + 2),
            Some(c) if *c == t[ti] => Some(pi + 1),
            _ => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ti += 1;
            }
            (None, Some((sp, st))) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Whether `pat` holds an active `*`, `?` or bracket expression (else it is a plain word).
pub(super) fn is_pattern(pat: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => i += 1,
            '*' | '?' => return true,
            '[' if bracket(&p[i + 1..], '\0').is_some() => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// `pat` with its escapes removed: the word as written, when nothing matches.
pub(super) fn unescape(pat: &str) -> String {
    let mut out = String::with_capacity(pat.len());
    let mut it = pat.chars();
    while let Some(c) = it.next() {
        match c {
            '\\' => out.extend(it.next()),
            c => out.push(c),
        }
    }
    out
}

/// The paths of `fs` that `pat` names, sorted; empty when none does. Relative patterns are
/// read from `/`, the shell's directory. `Err` when more than [`MAX_MATCHES`] paths match.
pub(super) fn paths(fs: &Fs, pat: &str) -> Result<Vec<String>, String> {
    let dirs_only = pat.len() > 1 && pat.ends_with('/');
    // (path as the word will read, path in the file system)
    let mut found: Vec<(String, String)> = vec![(
        if pat.starts_with('/') { "/" } else { "" }.to_owned(),
        "/".to_owned(),
    )];
    let parts: Vec<&str> = pat.split('/').filter(|c| !c.is_empty()).collect();
    let join = |base: &str, name: &str| match base {
        "" => name.to_owned(),
        b if b.ends_with('/') => format!("{b}{name}"),
        b => format!("{b}/{name}"),
    };
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        if !is_pattern(part) {
            let name = unescape(part);
            for (shown, real) in &found {
                next.push((join(shown, &name), join(real, &name)));
            }
        } else {
            let dot_ok = part.starts_with('.') || part.starts_with("\\.");
            for (shown, real) in &found {
                let Ok(entries) = fs.list(real) else { continue };
                for (name, kind) in entries {
                    if (name.starts_with('.') && !dot_ok)
                        || (!last && kind != Kind::Dir)
                        || !glob(part, &name)
                    {
                        continue;
                    }
                    next.push((join(shown, &name), join(real, &name)));
                    if next.len() > MAX_MATCHES {
                        return Err(format!("a pattern matched more than {MAX_MATCHES} paths"));
                    }
                }
            }
        }
        found = next;
    }
    let mut out: Vec<String> = found
        .into_iter()
        .filter(|(_, real)| match fs.kind(real) {
            Some(Kind::Dir) => true,
            Some(Kind::File(_)) => !dirs_only,
            None => false,
        })
        .map(|(shown, _)| if dirs_only { shown + "/" } else { shown })
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_a_shell() {
        for (p, t, want) in [
            ("*", "", true),
            ("*/*", "com.a/.B", true),
            ("*/*", "No activity found", false),
            ("*.p?g", "c.png", true),
            ("[ab]x", "bx", true),
            ("[ab]x", "cx", false),
            ("[!ab]x", "cx", true),
            ("[^ab]x", "ax", false),
            ("[a-c]", "b", true),
            ("[c-a]", "b", true),
            ("[a-]", "-", true),
            ("[]a]", "]", true),
            ("[\\]]", "]", true),
            ("[", "[", true),
            ("[ab", "[ab", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("?", "é", true),
            ("é*", "été", true),
        ] {
            assert_eq!(glob(p, t), want, "{p} ~ {t}");
        }
        assert!(is_pattern("a*") && is_pattern("[ab]") && is_pattern("?"));
        assert!(!is_pattern("[") && !is_pattern("a]") && !is_pattern("\\*") && !is_pattern("x"));
        assert_eq!(unescape("a\\*b\\\\"), "a*b\\");
        let mut p = String::new();
        escape_into(&mut p, "a*[b]?\\");
        assert!(glob(&p, "a*[b]?\\") && !glob(&p, "aX[b]?\\"));
    }

    #[test]
    fn paths_expand_directory_by_directory() {
        let mut fs = Fs::new();
        for f in [
            "/d/b.txt",
            "/d/a.txt",
            "/d/.hidden",
            "/d/sub/x.txt",
            "/e/sub/y.txt",
        ] {
            fs.write(f, b"1".to_vec(), false).unwrap();
        }
        let p = |pat: &str| paths(&fs, pat).unwrap();
        assert_eq!(p("/d/*"), ["/d/a.txt", "/d/b.txt", "/d/sub"]);
        assert_eq!(p("/d/.*"), ["/d/.hidden"]);
        assert_eq!(p("/d/*/"), ["/d/sub/"]);
        assert_eq!(p("/*/sub/*.txt"), ["/d/sub/x.txt", "/e/sub/y.txt"]);
        assert_eq!(p("d/[ab].txt"), ["d/a.txt", "d/b.txt"]);
        assert_eq!(p("/d/*/nothing"), Vec::<String>::new());
        assert_eq!(p("/nowhere/*"), Vec::<String>::new());
        for i in 0..=MAX_MATCHES {
            fs.write(&format!("/many/{i}"), Vec::new(), false).unwrap();
        }
        assert!(paths(&fs, "/many/*").unwrap_err().contains("more than"));
    }

    proptest::proptest! {
        #[test]
        fn glob_never_panics(p in "[a*?\\[\\]\\\\!^-]{0,20}", t in "[ab\\[*-]{0,20}") {
            let _ = glob(&p, &t);
            let _ = is_pattern(&p);
            let _ = paths(&Fs::new(), &p);
        }
    }
}
