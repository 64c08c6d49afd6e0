//! What `content` passes to a provider, parsed: a `--where` selection (SQL as SQLite reads
//! it: comparisons, `LIKE`, `IS [NOT] NULL`, `IN (…)`, `NOT`, `AND`, `OR`, parentheses), a
//! `--sort` order and `--bind COLUMN:TYPE:VALUE` values. Parsers never panic: odd text is an
//! error that says what was expected and what was found.
use std::cmp::Ordering;

use crate::records::Record;

/// Deepest nesting of parentheses and `NOT`s a selection may have.
pub const MAX_DEPTH: usize = 32;
/// Most tokens a selection may have.
pub const MAX_TOKENS: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Num(String),
    Op(&'static str),
}

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    while let Some(&c) = it.peek() {
        if out.len() > MAX_TOKENS {
            return Err(format!("the selection has more than {MAX_TOKENS} tokens"));
        }
        if c.is_whitespace() {
            it.next();
        } else if c == '\'' || c == '"' {
            it.next();
            let mut text = String::new();
            loop {
                match it.next() {
                    Some(q) if q == c && it.peek() == Some(&c) => {
                        it.next();
                        text.push(c);
                    }
                    Some(q) if q == c => break,
                    Some(other) => text.push(other),
                    None => return Err(format!("unrecognized token: \"{c}{text}\"")),
                }
            }
            // SQLite reads a double-quoted word as a column name when one has it.
            out.push(if c == '"' {
                Tok::Word(text)
            } else {
                Tok::Str(text)
            });
        } else if c.is_ascii_digit()
            || (c == '-' || c == '.') && out.last().is_none_or(|t| matches!(t, Tok::Op(_)))
        {
            let mut n = String::new();
            n.push(c);
            it.next();
            while let Some(&d) = it.peek() {
                if d.is_ascii_digit() || d == '.' {
                    n.push(d);
                    it.next();
                } else {
                    break;
                }
            }
            if n.parse::<f64>().is_err() {
                return Err(format!("near \"{n}\": syntax error"));
            }
            out.push(Tok::Num(n));
        } else if c.is_alphanumeric() || c == '_' {
            let mut w = String::new();
            while let Some(&d) = it.peek() {
                if d.is_alphanumeric() || d == '_' || d == '.' {
                    w.push(d);
                    it.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Word(w));
        } else {
            it.next();
            let next = it.peek().copied();
            let op = match (c, next) {
                ('=', Some('=')) => "==",
                ('!', Some('=')) => "!=",
                ('<', Some('>')) => "<>",
                ('<', Some('=')) => "<=",
                ('>', Some('=')) => ">=",
                ('=', _) => "=",
                ('<', _) => "<",
                ('>', _) => ">",
                ('(', _) => "(",
                (')', _) => ")",
                (',', _) => ",",
                _ => return Err(format!("unrecognized token: \"{c}\"")),
            };
            if op.len() == 2 {
                it.next();
            }
            out.push(Tok::Op(op));
        }
    }
    Ok(out)
}

/// A literal of a selection.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    Text(String),
    Null,
}

/// A parsed `--where` selection.
#[derive(Debug, Clone, PartialEq)]
pub enum Where {
    All,
    Or(Box<Where>, Box<Where>),
    And(Box<Where>, Box<Where>),
    Not(Box<Where>),
    Cmp {
        column: String,
        op: &'static str,
        value: Lit,
    },
    Like {
        column: String,
        pattern: String,
    },
    IsNull {
        column: String,
    },
    In {
        column: String,
        values: Vec<String>,
    },
}

struct Parser<'a> {
    toks: &'a [Tok],
    at: usize,
    depth: usize,
    known: &'a dyn Fn(&str) -> bool,
}

fn describe(t: Option<&Tok>) -> String {
    match t {
        None => "the end".into(),
        Some(Tok::Word(w) | Tok::Num(w)) => format!("\"{w}\""),
        Some(Tok::Str(s)) => format!("'{s}'"),
        Some(Tok::Op(o)) => format!("\"{o}\""),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn keyword(&mut self, k: &str) -> bool {
        let yes = matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k));
        if yes {
            self.at += 1;
        }
        yes
    }

    fn op(&mut self, o: &str) -> bool {
        let yes = matches!(self.peek(), Some(Tok::Op(p)) if *p == o);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn syntax(&self) -> String {
        format!("near {}: syntax error", describe(self.peek()))
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the selection nests deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Where, String> {
        let mut left = self.and()?;
        while self.keyword("or") {
            left = Where::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Where, String> {
        let mut left = self.not()?;
        while self.keyword("and") {
            left = Where::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Where, String> {
        if self.keyword("not") {
            self.deeper()?;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Where::Not(Box::new(inner)));
        }
        if self.op("(") {
            self.deeper()?;
            let inner = self.or()?;
            self.depth -= 1;
            if !self.op(")") {
                return Err(self.syntax());
            }
            return Ok(inner);
        }
        self.term()
    }

    fn literal(&mut self) -> Result<Lit, String> {
        let lit = match self.peek() {
            Some(Tok::Str(s) | Tok::Num(s)) => Lit::Text(s.clone()),
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("null") => Lit::Null,
            _ => return Err(self.syntax()),
        };
        self.at += 1;
        Ok(lit)
    }

    fn term(&mut self) -> Result<Where, String> {
        let column = match self.peek() {
            Some(Tok::Word(w)) => w.clone(),
            _ => return Err(self.syntax()),
        };
        if !(self.known)(&column) {
            return Err(format!("no such column: {column}"));
        }
        self.at += 1;
        let negate = |w: Where, not: bool| if not { Where::Not(Box::new(w)) } else { w };
        if self.keyword("is") {
            let not = self.keyword("not");
            if !self.keyword("null") {
                return Err(self.syntax());
            }
            return Ok(negate(Where::IsNull { column }, not));
        }
        let not = self.keyword("not");
        if self.keyword("like") {
            let Lit::Text(pattern) = self.literal()? else {
                return Ok(Where::Cmp {
                    column,
                    op: "=",
                    value: Lit::Null,
                });
            };
            return Ok(negate(Where::Like { column, pattern }, not));
        }
        if self.keyword("in") {
            if !self.op("(") {
                return Err(self.syntax());
            }
            let mut values = Vec::new();
            loop {
                if let Lit::Text(v) = self.literal()? {
                    values.push(v);
                }
                if self.op(")") {
                    break;
                }
                if !self.op(",") {
                    return Err(self.syntax());
                }
            }
            return Ok(negate(Where::In { column, values }, not));
        }
        if not {
            return Err(self.syntax());
        }
        let op = match self.peek() {
            Some(Tok::Op(o @ ("=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="))) => *o,
            _ => return Err(self.syntax()),
        };
        self.at += 1;
        let value = self.literal()?;
        Ok(Where::Cmp { column, op, value })
    }
}

impl Where {
    /// Parses a selection; `known` says which columns exist.
    pub fn parse(s: &str, known: &dyn Fn(&str) -> bool) -> Result<Self, String> {
        let toks = tokens(s)?;
        if toks.is_empty() {
            return Ok(Self::All);
        }
        let mut p = Parser {
            toks: &toks,
            at: 0,
            depth: 0,
            known,
        };
        let w = p.or()?;
        if p.at != toks.len() {
            return Err(p.syntax());
        }
        Ok(w)
    }

    /// Whether `row` is selected (a comparison with NULL selects nothing, as in SQL).
    pub fn matches(&self, row: &Record) -> bool {
        match self {
            Self::All => true,
            Self::Or(a, b) => a.matches(row) || b.matches(row),
            Self::And(a, b) => a.matches(row) && b.matches(row),
            Self::Not(a) => !a.matches(row),
            Self::IsNull { column } => !row.contains_key(column),
            Self::Cmp { column, op, value } => match (row.get(column), value) {
                (Some(have), Lit::Text(want)) => {
                    let o = compare(have, want);
                    match *op {
                        "=" | "==" => o == Ordering::Equal,
                        "!=" | "<>" => o != Ordering::Equal,
                        "<" => o == Ordering::Less,
                        "<=" => o != Ordering::Greater,
                        ">" => o == Ordering::Greater,
                        _ => o != Ordering::Less,
                    }
                }
                _ => false,
            },
            Self::Like { column, pattern } => row.get(column).is_some_and(|v| like(v, pattern)),
            Self::In { column, values } => row
                .get(column)
                .is_some_and(|v| values.iter().any(|w| compare(v, w) == Ordering::Equal)),
        }
    }
}

/// Numbers compare as numbers, other text byte by byte.
pub fn compare(a: &str, b: &str) -> Ordering {
    match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
        (Ok(x), Ok(y)) if x.is_finite() && y.is_finite() => {
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        _ => a.cmp(b),
    }
}

/// SQL `LIKE`: `%` any run, `_` one character, ASCII letters in any case.
fn like(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
    let p: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    // Iterative matching with one backtrack point: linear in practice, never recursive.
    let (mut ti, mut pi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('%') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '_' || c == t[ti] => {
                ti += 1;
                pi += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '%')
}

/// A `--sort` order: columns, each ascending or descending.
pub fn parse_sort(s: &str, known: &dyn Fn(&str) -> bool) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let words: Vec<&str> = part.split_whitespace().collect();
        let (column, desc) = match words.as_slice() {
            [] if s.trim().is_empty() => return Ok(out),
            [c] => (*c, false),
            [c, d] if d.eq_ignore_ascii_case("asc") => (*c, false),
            [c, d] if d.eq_ignore_ascii_case("desc") => (*c, true),
            _ => return Err(format!("near \"{}\": syntax error", part.trim())),
        };
        if !known(column) {
            return Err(format!("no such column: {column}"));
        }
        out.push((column.to_owned(), desc));
    }
    Ok(out)
}

/// Sorts rows by `order` (NULL first, as SQLite does ascending); ties keep their order.
pub fn sort(rows: &mut [&Record], order: &[(String, bool)]) {
    rows.sort_by(|a, b| {
        for (column, desc) in order {
            let o = match (a.get(column), b.get(column)) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(x), Some(y)) => compare(x, y),
            };
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
}

/// `--bind COLUMN:TYPE:VALUE` (types `s`, `i`, `l`, `f`, `d`, `b`, `n`): the column and its
/// value as stored (`None` for `n`, NULL).
pub fn parse_bind(s: &str) -> Result<(String, Option<String>), String> {
    let mut parts = s.splitn(3, ':');
    let column = parts.next().unwrap_or("");
    let kind = parts.next();
    let value = parts.next();
    let bad = || {
        format!(
            "Invalid binding: {s}: expected COLUMN:TYPE:VALUE with TYPE one of s, i, l, f, d, b, n"
        )
    };
    if column.is_empty() {
        return Err(bad());
    }
    let value = match (kind, value) {
        (Some("n"), _) => None,
        (Some("s"), Some(v)) => Some(v.to_owned()),
        (Some("i" | "l"), Some(v)) => Some(
            v.trim()
                .parse::<i64>()
                .map_err(|_| format!("Invalid binding: {s}: '{v}' is not an integer"))?
                .to_string(),
        ),
        (Some("f" | "d"), Some(v)) => Some(
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("Invalid binding: {s}: '{v}' is not a number"))?
                .to_string(),
        ),
        (Some("b"), Some(v)) => Some(
            match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => "1",
                "false" | "0" => "0",
                _ => return Err(format!("Invalid binding: {s}: '{v}' is not true or false")),
            }
            .to_owned(),
        ),
        _ => return Err(bad()),
    };
    Ok((column.to_owned(), value))
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
