//! Expansions of a word: variables, `$(...)` run as a subshell, `$((...))` integer
//! arithmetic, and pathname expansion of its unquoted pattern characters.
use super::glob;
use super::{Run, State, Stop};
use crate::shell::parse::{self, Part, Pipeline, Word};
use crate::shell::{Input, Output, lock};

impl State {
    /// A word with variables only (redirect targets): no substitutions run.
    pub(super) fn expand_plain(&self, word: &Word) -> String {
        let mut s = String::new();
        for part in word {
            match part {
                Part::Lit(l) | Part::Pattern(l) => s.push_str(l),
                Part::Var(v) => s.push_str(&self.var(v)),
                Part::Command(_) | Part::Arith(_) => {}
            }
        }
        s
    }

    pub(super) fn expand(
        &mut self,
        run: &mut Run<'_>,
        word: &Word,
        out: &mut Output,
    ) -> Result<String, Stop> {
        Ok(self.expand_both(run, word, out, false)?.0)
    }

    /// The word as a pattern (`case`): its unquoted pattern characters active, quoted text and
    /// command output literal. Variables stay active (`case $x in $PATTERN)`): the parser does
    /// not tell `$P` from `"$P"`.
    pub(super) fn expand_pattern(
        &mut self,
        run: &mut Run<'_>,
        word: &Word,
        out: &mut Output,
    ) -> Result<String, Stop> {
        Ok(self.expand_both(run, word, out, true)?.1)
    }

    /// Adds to `fields` what a command word becomes: the paths its unquoted pattern matches
    /// (sorted), else the word as written. Returns how many it added.
    pub(super) fn expand_fields(
        &mut self,
        run: &mut Run<'_>,
        word: &Word,
        out: &mut Output,
        fields: &mut Vec<String>,
    ) -> Result<usize, Stop> {
        let (text, pattern) = self.expand_both(run, word, out, false)?;
        if word.iter().any(|p| matches!(p, Part::Pattern(_))) && glob::is_pattern(&pattern) {
            let found = glob::paths(&lock(run.device).fs, &pattern).map_err(Stop::Budget)?;
            if !found.is_empty() {
                let n = found.len();
                fields.extend(found);
                return Ok(n);
            }
        }
        fields.push(text);
        Ok(1)
    }

    /// The word's text, and the same word as a pattern in which only unquoted pattern
    /// characters are active (and variables, with `vars_active`).
    fn expand_both(
        &mut self,
        run: &mut Run<'_>,
        word: &Word,
        out: &mut Output,
        vars_active: bool,
    ) -> Result<(String, String), Stop> {
        let mut s = String::new();
        let mut pat = String::new();
        // Only a word with pattern characters (or a `case` pattern) needs the pattern.
        let want = vars_active || word.iter().any(|p| matches!(p, Part::Pattern(_)));
        for part in word {
            let from = s.len();
            match part {
                Part::Lit(l) => s.push_str(l),
                Part::Pattern(p) => {
                    s.push_str(p);
                    pat.push_str(p);
                    continue;
                }
                Part::Var(v) if vars_active => {
                    let v = self.var(v);
                    s.push_str(&v);
                    pat.push_str(&v);
                    continue;
                }
                Part::Var(v) => s.push_str(&self.var(v)),
                Part::Command(script) => {
                    let list = match parse::parse(script) {
                        Ok(l) => l,
                        Err(e) => {
                            out.stderr
                                .extend_from_slice(format!("/system/bin/sh: {e}\n").as_bytes());
                            self.status = 2;
                            continue;
                        }
                    };
                    // A subshell: its variables and `exit` stay inside.
                    // Its stdout is captured; its stderr goes where the shell's does.
                    let mut sub = State {
                        status: self.status,
                        vars: self.vars.clone(),
                        fds: super::redirect::Fds {
                            out: super::redirect::To::Out,
                            err: self.fds.err.clone(),
                        },
                        interactive: self.interactive,
                        ..State::default()
                    };
                    let mut own = Output::default();
                    let r = self.nested_sub(run, &mut sub, &list, &mut own);
                    if let Err(Stop::Budget(e)) = r {
                        return Err(Stop::Budget(e));
                    }
                    self.status = sub.exited.unwrap_or(sub.status);
                    out.stderr.append(&mut own.stderr);
                    let text = String::from_utf8_lossy(&own.stdout);
                    s.push_str(text.trim_end_matches('\n'));
                }
                Part::Arith(expr) => match arith(expr, self) {
                    Ok(n) => s.push_str(&n.to_string()),
                    Err(e) => {
                        out.stderr
                            .extend_from_slice(format!("/system/bin/sh: {expr}: {e}\n").as_bytes());
                        self.bad_expansion = true;
                        s.push('0');
                    }
                },
            }
            if want {
                glob::escape_into(&mut pat, &s[from..]);
            }
        }
        Ok((s, pat))
    }

    fn nested_sub(
        &self,
        run: &mut Run<'_>,
        sub: &mut State,
        list: &[Pipeline],
        out: &mut Output,
    ) -> Result<(), Stop> {
        if run.depth >= parse::MAX_DEPTH {
            return Err(Stop::Budget(format!(
                "nested deeper than {} levels",
                parse::MAX_DEPTH
            )));
        }
        run.depth += 1;
        let r = sub.list(run, list, &mut Input::empty(), out);
        run.depth -= 1;
        r
    }
}

/// `$((...))`: integers with `+ - * / %`, parentheses, unary minus and variables.
fn arith(expr: &str, st: &State) -> Result<i64, String> {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
        st: &'a State,
        depth: usize,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
                self.i += 1;
            }
        }
        fn sum(&mut self) -> Result<i64, String> {
            let mut v = self.product()?;
            loop {
                self.ws();
                match self.s.get(self.i) {
                    Some(b'+') => {
                        self.i += 1;
                        v = v.wrapping_add(self.product()?);
                    }
                    Some(b'-') => {
                        self.i += 1;
                        v = v.wrapping_sub(self.product()?);
                    }
                    _ => return Ok(v),
                }
            }
        }
        fn product(&mut self) -> Result<i64, String> {
            let mut v = self.unary()?;
            loop {
                self.ws();
                let op = match self.s.get(self.i) {
                    Some(c @ (b'*' | b'/' | b'%')) => *c,
                    _ => return Ok(v),
                };
                self.i += 1;
                let r = self.unary()?;
                v = match op {
                    b'*' => v.wrapping_mul(r),
                    _ if r == 0 => return Err("division by zero".into()),
                    b'/' => v.wrapping_div(r),
                    _ => v.wrapping_rem(r),
                };
            }
        }
        fn unary(&mut self) -> Result<i64, String> {
            self.ws();
            self.depth += 1;
            if self.depth > 64 {
                return Err("expression too deep".into());
            }
            let r = match self.s.get(self.i) {
                Some(b'-') => {
                    self.i += 1;
                    self.unary().map(i64::wrapping_neg)
                }
                Some(b'+') => {
                    self.i += 1;
                    self.unary()
                }
                Some(b'(') => {
                    self.i += 1;
                    let v = self.sum()?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b')') {
                        return Err("missing ')'".into());
                    }
                    self.i += 1;
                    Ok(v)
                }
                Some(c) if c.is_ascii_digit() => {
                    let start = self.i;
                    while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                        self.i += 1;
                    }
                    std::str::from_utf8(&self.s[start..self.i])
                        .ok()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| "number too large".to_owned())
                }
                Some(c) if c.is_ascii_alphabetic() || *c == b'_' || *c == b'$' => {
                    if *c == b'$' {
                        self.i += 1;
                    }
                    let start = self.i;
                    while self
                        .s
                        .get(self.i)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                    {
                        self.i += 1;
                    }
                    let name = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                    let v = self.st.var(name);
                    Ok(v.trim().parse().unwrap_or(0))
                }
                _ => Err("syntax error in expression".into()),
            };
            self.depth -= 1;
            r
        }
    }
    let mut p = P {
        s: expr.as_bytes(),
        i: 0,
        st,
        depth: 0,
    };
    let v = p.sum()?;
    p.ws();
    if p.i != p.s.len() {
        return Err("syntax error in expression".into());
    }
    Ok(v)
}
