//! Parses a shell script the way a POSIX shell does, for the subset that adb clients and people
//! send: quoting, `$VAR`/`${VAR}`/`$?`, `$(...)`, `$((...))`, assignments, pipes, `!`,
//! `;`/`&&`/`||`/newlines, `{ ...; }` groups, `for`/`while`/`until`/`if` compounds, and
//! `>`/`>>`/`<` redirects of fd 1 and 2 (`2>`, `2>>`, `2>&1`, `>&2`, `1>&2`).

/// A piece of a word: literal text, a variable, or a substitution to expand when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Var(String),
    /// `$(...)` or backquotes: the command's output.
    Command(String),
    /// `$((...))`: an integer expression.
    Arith(String),
}

pub type Word = Vec<Part>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    Out {
        path: Word,
        append: bool,
    },
    Err {
        path: Word,
        append: bool,
    },
    /// `2>&1`
    ErrToOut,
    /// `>&2`, `1>&2`
    OutToErr,
    In {
        path: Word,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Simple {
    /// `NAME=value` words before the command.
    pub assigns: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// One command of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Simple(Simple),
    /// `{ list; }`
    Group(Vec<Pipeline>, Vec<Redirect>),
    /// `for NAME in WORDS; do BODY; done`
    For {
        var: String,
        items: Vec<Word>,
        body: Vec<Pipeline>,
    },
    /// `while COND; do BODY; done` (or `until`)
    Loop {
        until: bool,
        cond: Vec<Pipeline>,
        body: Vec<Pipeline>,
    },
    /// `case WORD in PATTERN|PATTERN) LIST ;; ... esac`
    Case {
        word: Word,
        arms: Vec<(Vec<Word>, Vec<Pipeline>)>,
    },
    /// `if C; then B; elif C; then B; else B; fi`
    If {
        arms: Vec<(Vec<Pipeline>, Vec<Pipeline>)>,
        otherwise: Vec<Pipeline>,
    },
}

/// Why a script did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The script stops inside a construct (a quote, a loop, an `if`): more lines may complete it.
    Incomplete(String),
    Syntax(String),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Incomplete(e) | Self::Syntax(e) => write!(f, "syntax error: {e}"),
        }
    }
}

/// Deepest nesting of compounds and substitutions.
pub const MAX_DEPTH: usize = 32;

/// How a pipeline is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    Always,
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub join: Join,
    /// `! pipeline`: the status is inverted.
    pub negate: bool,
    pub commands: Vec<Command>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// A word, and whether any of it was quoted (a quoted word is never a keyword).
    Word(Word, bool),
    Op(&'static str),
}

fn push_lit(word: &mut Word, c: char) {
    if let Some(Part::Lit(s)) = word.last_mut() {
        s.push(c);
    } else {
        word.push(Part::Lit(c.to_string()));
    }
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn incomplete(what: &str) -> ParseError {
    ParseError::Incomplete(what.to_owned())
}

/// Reads up to the `)` that closes a `$(` (or the `))` of `$((`), keeping quotes and nesting.
fn read_balanced(chars: &mut Chars<'_>, arith: bool) -> Result<String, ParseError> {
    let mut depth = 0usize;
    let mut text = String::new();
    while let Some(c) = chars.next() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                if arith && chars.next() != Some(')') {
                    return Err(ParseError::Syntax("'$((' needs '))'".into()));
                }
                return Ok(text);
            }
            ')' => depth -= 1,
            '\'' => {
                text.push(c);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => text.push(c),
                        None => return Err(incomplete("unterminated quoted string")),
                    }
                }
            }
            '\\' => {
                text.push(c);
                if let Some(n) = chars.next() {
                    text.push(n);
                }
                continue;
            }
            _ => {}
        }
        text.push(c);
    }
    Err(incomplete(if arith {
        "'$((' needs '))'"
    } else {
        "'$(' needs ')'"
    }))
}

/// Reads what follows a `$`: a name, `{NAME}`, a special parameter, `(...)` or `((...))`.
fn read_dollar(chars: &mut Chars<'_>) -> Result<Option<Part>, ParseError> {
    Ok(match chars.peek().copied() {
        Some(c @ ('?' | '$' | '#' | '!' | '@' | '*' | '0'..='9')) => {
            chars.next();
            Some(Part::Var(c.to_string()))
        }
        Some('{') => {
            chars.next();
            let mut name = String::new();
            loop {
                match chars.next() {
                    Some('}') => break,
                    Some(c) => name.push(c),
                    None => return Err(incomplete("'${' needs '}'")),
                }
            }
            Some(Part::Var(name))
        }
        Some('(') => {
            chars.next();
            if chars.peek() == Some(&'(') {
                chars.next();
                Some(Part::Arith(read_balanced(chars, true)?))
            } else {
                Some(Part::Command(read_balanced(chars, false)?))
            }
        }
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            let mut name = String::new();
            while let Some(c) = chars
                .peek()
                .copied()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                name.push(c);
                chars.next();
            }
            Some(Part::Var(name))
        }
        _ => None,
    })
}

fn tokenize(line: &str) -> Result<Vec<Tok>, ParseError> {
    let mut toks = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word: Word = Vec::new();
    let mut in_word = false;
    let mut quoted = false;
    let flush = |toks: &mut Vec<Tok>, word: &mut Word, in_word: &mut bool, quoted: &mut bool| {
        if *in_word {
            toks.push(Tok::Word(std::mem::take(word), *quoted));
            *in_word = false;
            *quoted = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' => flush(&mut toks, &mut word, &mut in_word, &mut quoted),
            '\n' | ';' => {
                flush(&mut toks, &mut word, &mut in_word, &mut quoted);
                if c == ';' && chars.peek() == Some(&';') {
                    chars.next();
                    toks.push(Tok::Op(";;"));
                } else {
                    toks.push(Tok::Op(";"));
                }
            }
            '#' if !in_word => {
                // A comment runs to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        toks.push(Tok::Op(";"));
                        break;
                    }
                }
            }
            '(' | ')' => {
                flush(&mut toks, &mut word, &mut in_word, &mut quoted);
                toks.push(Tok::Op(if c == '(' { "(" } else { ")" }));
            }
            '|' | '&' | '>' | '<' => {
                // A redirect's file descriptor: the word so far is exactly "1" or "2".
                let fd = match (&word[..], c) {
                    ([Part::Lit(l)], '>') if in_word && !quoted && (l == "1" || l == "2") => {
                        Some(l.clone())
                    }
                    _ => None,
                };
                if fd.is_some() {
                    word.clear();
                    in_word = false;
                } else {
                    flush(&mut toks, &mut word, &mut in_word, &mut quoted);
                }
                let err = fd.as_deref() == Some("2");
                let op = match (c, chars.peek().copied()) {
                    ('|', Some('|')) => "||",
                    ('&', Some('&')) => "&&",
                    ('>', Some('>')) => {
                        if err {
                            "2>>"
                        } else {
                            ">>"
                        }
                    }
                    ('>', Some('&')) => {
                        chars.next();
                        let target = chars.next();
                        let op = match (err, target) {
                            (true, Some('1')) => "2>&1",
                            (false, Some('2')) => ">&2",
                            (true, Some('2')) | (false, Some('1')) => "",
                            _ => {
                                return Err(ParseError::Syntax(
                                    "only >&1, >&2, 2>&1 and 2>&2 are supported".into(),
                                ));
                            }
                        };
                        if !op.is_empty() {
                            toks.push(Tok::Op(op));
                        }
                        continue;
                    }
                    ('|', _) => "|",
                    ('>', _) => {
                        if err {
                            "2>"
                        } else {
                            ">"
                        }
                    }
                    ('<', _) => "<",
                    _ => "&",
                };
                if matches!(op, "||" | "&&" | ">>" | "2>>") {
                    chars.next();
                }
                toks.push(Tok::Op(op));
            }
            '\'' => {
                in_word = true;
                quoted = true;
                word.push(Part::Lit(String::new()));
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => push_lit(&mut word, c),
                        None => return Err(incomplete("unterminated quoted string")),
                    }
                }
            }
            '"' => {
                in_word = true;
                quoted = true;
                word.push(Part::Lit(String::new()));
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => push_lit(&mut word, c),
                            Some('\n') => {}
                            Some(c) => {
                                push_lit(&mut word, '\\');
                                push_lit(&mut word, c);
                            }
                            None => return Err(incomplete("unterminated quoted string")),
                        },
                        Some('$') => match read_dollar(&mut chars)? {
                            Some(p) => word.push(p),
                            None => push_lit(&mut word, '$'),
                        },
                        Some('`') => word.push(Part::Command(read_backquote(&mut chars)?)),
                        Some(c) => push_lit(&mut word, c),
                        None => return Err(incomplete("unterminated quoted string")),
                    }
                }
            }
            '`' => {
                in_word = true;
                word.push(Part::Command(read_backquote(&mut chars)?));
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    quoted = true;
                    push_lit(&mut word, c);
                }
                None => return Err(incomplete("a line ends with '\\'")),
            },
            '$' => {
                in_word = true;
                match read_dollar(&mut chars)? {
                    Some(p) => word.push(p),
                    None => push_lit(&mut word, '$'),
                }
            }
            c => {
                in_word = true;
                push_lit(&mut word, c);
            }
        }
    }
    flush(&mut toks, &mut word, &mut in_word, &mut quoted);
    Ok(toks)
}

fn read_backquote(chars: &mut Chars<'_>) -> Result<String, ParseError> {
    let mut text = String::new();
    loop {
        match chars.next() {
            Some('`') => return Ok(text),
            Some('\\') => {
                if let Some(c) = chars.next() {
                    text.push(c);
                }
            }
            Some(c) => text.push(c),
            None => return Err(incomplete("unterminated '`'")),
        }
    }
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    /// The unquoted literal word at the cursor, if any.
    fn keyword(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Word(w, false)) => match &w[..] {
                [Part::Lit(l)] => Some(l.as_str()),
                [] => None,
                _ => None,
            },
            _ => None,
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(Tok::Op(";"))) {
            self.at += 1;
        }
    }

    fn expect(&mut self, kw: &str) -> Result<(), ParseError> {
        self.skip_separators();
        match self.keyword() {
            Some(k) if k == kw => {
                self.at += 1;
                Ok(())
            }
            Some(k) => Err(ParseError::Syntax(format!(
                "unexpected '{k}', expected '{kw}'"
            ))),
            None if self.peek().is_none() => Err(incomplete(&format!("expected '{kw}'"))),
            None => Err(ParseError::Syntax(format!("expected '{kw}'"))),
        }
    }

    /// A list of pipelines up to one of `stops` (not consumed) or the end of input.
    fn list(&mut self, stops: &[&str]) -> Result<Vec<Pipeline>, ParseError> {
        let mut out = Vec::new();
        let mut join = Join::Always;
        loop {
            self.skip_separators();
            if matches!(self.peek(), Some(Tok::Op(";;"))) && stops.contains(&"esac") {
                if join != Join::Always {
                    return Err(ParseError::Syntax("unexpected ';;'".into()));
                }
                return Ok(out);
            }
            match self.keyword() {
                Some(k) if stops.contains(&k) => {
                    if join != Join::Always {
                        return Err(ParseError::Syntax(format!("unexpected '{k}'")));
                    }
                    return Ok(out);
                }
                _ => {}
            }
            if self.peek().is_none() {
                if join != Join::Always {
                    return Err(incomplete("a line ends with '&&' or '||'"));
                }
                if !stops.is_empty() {
                    return Err(incomplete(&format!("expected '{}'", stops[0])));
                }
                return Ok(out);
            }
            let mut p = self.pipeline()?;
            p.join = join;
            out.push(p);
            if matches!(self.peek(), Some(Tok::Op(";;"))) && stops.contains(&"esac") {
                return Ok(out);
            }
            join = match self.peek() {
                Some(Tok::Op("&&")) => Join::And,
                Some(Tok::Op("||")) => Join::Or,
                Some(Tok::Op(";" | "&")) | None => Join::Always,
                Some(Tok::Op(op)) => return Err(ParseError::Syntax(format!("unexpected '{op}'"))),
                Some(Tok::Word(..)) => {
                    return Err(ParseError::Syntax("unexpected word".into()));
                }
            };
            if self.peek().is_some() {
                self.at += 1;
            }
        }
    }

    fn pipeline(&mut self) -> Result<Pipeline, ParseError> {
        let mut negate = false;
        if self.keyword() == Some("!") {
            self.at += 1;
            negate = true;
        }
        let mut commands = vec![self.command()?];
        while matches!(self.peek(), Some(Tok::Op("|"))) {
            self.at += 1;
            self.skip_newlines_after_pipe();
            commands.push(self.command()?);
        }
        Ok(Pipeline {
            join: Join::Always,
            negate,
            commands,
        })
    }

    fn skip_newlines_after_pipe(&mut self) {
        self.skip_separators();
    }

    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::Syntax(format!(
                "nested deeper than {MAX_DEPTH} levels"
            )));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn command(&mut self) -> Result<Command, ParseError> {
        let cmd = match self.keyword() {
            Some("for") => {
                self.at += 1;
                let var = match self.peek() {
                    Some(Tok::Word(w, false)) => match &w[..] {
                        [Part::Lit(l)] if is_name(l) => l.clone(),
                        _ => return Err(ParseError::Syntax("'for' needs a variable name".into())),
                    },
                    None => return Err(incomplete("'for' needs a variable name")),
                    _ => return Err(ParseError::Syntax("'for' needs a variable name".into())),
                };
                self.at += 1;
                let mut items = Vec::new();
                if self.keyword() == Some("in") {
                    self.at += 1;
                    while let Some(Tok::Word(w, _)) = self.peek() {
                        items.push(w.clone());
                        self.at += 1;
                    }
                } else {
                    items.push(vec![Part::Var("@".into())]);
                }
                self.expect("do")?;
                let body = self.nested(|p| p.list(&["done"]))?;
                self.expect("done")?;
                Command::For { var, items, body }
            }
            Some(k @ ("while" | "until")) => {
                let until = k == "until";
                self.at += 1;
                let cond = self.nested(|p| p.list(&["do"]))?;
                self.expect("do")?;
                let body = self.nested(|p| p.list(&["done"]))?;
                self.expect("done")?;
                Command::Loop { until, cond, body }
            }
            Some("if") => {
                self.at += 1;
                let mut arms = Vec::new();
                let mut otherwise = Vec::new();
                loop {
                    let cond = self.nested(|p| p.list(&["then"]))?;
                    self.expect("then")?;
                    let body = self.nested(|p| p.list(&["elif", "else", "fi"]))?;
                    arms.push((cond, body));
                    self.skip_separators();
                    match self.keyword() {
                        Some("elif") => {
                            self.at += 1;
                        }
                        Some("else") => {
                            self.at += 1;
                            otherwise = self.nested(|p| p.list(&["fi"]))?;
                            self.expect("fi")?;
                            break;
                        }
                        _ => {
                            self.expect("fi")?;
                            break;
                        }
                    }
                }
                Command::If { arms, otherwise }
            }
            Some("case") => {
                self.at += 1;
                let word = match self.peek() {
                    Some(Tok::Word(w, _)) => w.clone(),
                    None => return Err(incomplete("'case' needs a word")),
                    _ => return Err(ParseError::Syntax("'case' needs a word".into())),
                };
                self.at += 1;
                self.expect("in")?;
                let mut arms = Vec::new();
                loop {
                    self.skip_separators();
                    if self.keyword() == Some("esac") {
                        self.at += 1;
                        break;
                    }
                    if matches!(self.peek(), Some(Tok::Op("("))) {
                        self.at += 1;
                    }
                    let mut patterns = Vec::new();
                    loop {
                        match self.peek() {
                            Some(Tok::Word(w, _)) => patterns.push(w.clone()),
                            None => return Err(incomplete("a 'case' pattern needs ')'")),
                            _ => return Err(ParseError::Syntax("bad 'case' pattern".into())),
                        }
                        self.at += 1;
                        match self.peek() {
                            Some(Tok::Op("|")) => self.at += 1,
                            Some(Tok::Op(")")) => {
                                self.at += 1;
                                break;
                            }
                            None => return Err(incomplete("a 'case' pattern needs ')'")),
                            _ => {
                                return Err(ParseError::Syntax(
                                    "a 'case' pattern needs ')'".into(),
                                ));
                            }
                        }
                    }
                    let body = self.nested(|p| p.list(&["esac"]))?;
                    arms.push((patterns, body));
                    if matches!(self.peek(), Some(Tok::Op(";;"))) {
                        self.at += 1;
                    } else {
                        self.expect("esac")?;
                        break;
                    }
                }
                Command::Case { word, arms }
            }
            Some("{") => {
                self.at += 1;
                let body = self.nested(|p| p.list(&["}"]))?;
                self.expect("}")?;
                Command::Group(body, Vec::new())
            }
            Some(k @ ("then" | "elif" | "else" | "fi" | "do" | "done" | "in" | "}" | "esac")) => {
                return Err(ParseError::Syntax(format!("unexpected '{k}'")));
            }
            _ => Command::Simple(self.simple()?),
        };
        // Redirects after a compound apply to all of it.
        if let Command::Simple(_) = cmd {
            return Ok(cmd);
        }
        let mut redirects = Vec::new();
        while let Some(r) = self.redirect()? {
            redirects.push(r);
        }
        Ok(match cmd {
            Command::Group(body, _) => Command::Group(body, redirects),
            other if redirects.is_empty() => other,
            other => Command::Group(
                vec![Pipeline {
                    join: Join::Always,
                    negate: false,
                    commands: vec![other],
                }],
                redirects,
            ),
        })
    }

    fn redirect(&mut self) -> Result<Option<Redirect>, ParseError> {
        let op = match self.peek() {
            Some(Tok::Op(op @ (">" | ">>" | "2>" | "2>>" | "<" | "2>&1" | ">&2"))) => *op,
            _ => return Ok(None),
        };
        self.at += 1;
        match op {
            "2>&1" => return Ok(Some(Redirect::ErrToOut)),
            ">&2" => return Ok(Some(Redirect::OutToErr)),
            _ => {}
        }
        let path = match self.peek() {
            Some(Tok::Word(w, _)) => w.clone(),
            None => return Err(incomplete(&format!("'{op}' needs a file name"))),
            _ => return Err(ParseError::Syntax(format!("'{op}' needs a file name"))),
        };
        self.at += 1;
        Ok(Some(match op {
            ">" => Redirect::Out {
                path,
                append: false,
            },
            ">>" => Redirect::Out { path, append: true },
            "2>" => Redirect::Err {
                path,
                append: false,
            },
            "2>>" => Redirect::Err { path, append: true },
            _ => Redirect::In { path },
        }))
    }

    fn simple(&mut self) -> Result<Simple, ParseError> {
        let mut cur = Simple::default();
        loop {
            if let Some(r) = self.redirect()? {
                cur.redirects.push(r);
                continue;
            }
            match self.peek() {
                Some(Tok::Word(w, _)) => {
                    if cur.words.is_empty()
                        && let Some((name, value)) = assignment(w)
                    {
                        cur.assigns.push((name, value));
                    } else {
                        cur.words.push(w.clone());
                    }
                    self.at += 1;
                }
                _ => break,
            }
        }
        if cur.words.is_empty() && cur.assigns.is_empty() && cur.redirects.is_empty() {
            return Err(match self.peek() {
                Some(Tok::Op(op)) => ParseError::Syntax(format!("unexpected '{op}'")),
                _ => incomplete("a command is missing"),
            });
        }
        Ok(cur)
    }
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=value` as a word: the name and the value's parts.
fn assignment(w: &Word) -> Option<(String, Word)> {
    let Some(Part::Lit(first)) = w.first() else {
        return None;
    };
    let (name, rest) = first.split_once('=')?;
    if !is_name(name) {
        return None;
    }
    let mut value: Word = Vec::new();
    if !rest.is_empty() {
        value.push(Part::Lit(rest.to_owned()));
    }
    value.extend(w[1..].iter().cloned());
    Some((name.to_owned(), value))
}

/// Parses a script into pipelines joined by `;`, newlines, `&&` and `||`.
pub fn parse(script: &str) -> Result<Vec<Pipeline>, ParseError> {
    let toks = tokenize(script)?;
    let mut p = Parser {
        toks,
        at: 0,
        depth: 0,
    };
    let list = p.list(&[])?;
    match p.peek() {
        None => Ok(list),
        Some(_) => Err(ParseError::Syntax(format!(
            "unexpected '{}'",
            p.keyword().unwrap_or("token")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple(line: &str) -> Simple {
        match parse(line).unwrap().remove(0).commands.remove(0) {
            Command::Simple(s) => s,
            other => panic!("not a simple command: {other:?}"),
        }
    }

    fn words(line: &str) -> Vec<Vec<Part>> {
        simple(line).words
    }

    fn lit(s: &str) -> Word {
        vec![Part::Lit(s.into())]
    }

    #[test]
    fn quotes_and_escapes_split_like_a_shell() {
        assert_eq!(
            words("input text 'hello%sworld'"),
            vec![lit("input"), lit("text"), lit("hello%sworld")]
        );
        assert_eq!(
            words(r#"echo "a b" c\ d ''"#),
            vec![lit("echo"), lit("a b"), lit("c d"), lit("")]
        );
        assert_eq!(words("exec:screencap '-p'")[1], lit("-p"));
        assert_eq!(
            words("echo \"x$?y\"")[1],
            vec![
                Part::Lit("x".into()),
                Part::Var("?".into()),
                Part::Lit("y".into())
            ]
        );
        assert_eq!(
            words("echo $(getprop ro.x) `id`")[1..],
            [
                vec![Part::Command("getprop ro.x".into())],
                vec![Part::Command("id".into())]
            ]
        );
        assert_eq!(
            words("echo $((1 + 2))")[1],
            vec![Part::Arith("1 + 2".into())]
        );
        assert_eq!(simple("A=1 B=x$C env").assigns.len(), 2);
    }

    #[test]
    fn lists_pipes_and_redirects_parse() {
        let p = parse("false || echo a && echo b; ls | grep x > /sdcard/o 2>&1").unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[1].join, Join::Or);
        assert_eq!(p[2].join, Join::And);
        assert_eq!(p[3].commands.len(), 2);
        let Command::Simple(grep) = &p[3].commands[1] else {
            panic!()
        };
        assert_eq!(grep.redirects.len(), 2);
        assert_eq!(simple("echo e >&2").redirects, vec![Redirect::OutToErr]);
        assert_eq!(simple("echo e 1>&2").redirects, vec![Redirect::OutToErr]);
        assert!(matches!(
            simple("ls 2>>/sdcard/e").redirects[..],
            [Redirect::Err { append: true, .. }]
        ));
        assert!(matches!(
            parse("echo 'open"),
            Err(ParseError::Incomplete(_))
        ));
        assert!(matches!(parse("| x"), Err(ParseError::Syntax(_))));
        assert!(matches!(parse("a &&"), Err(ParseError::Incomplete(_))));
        assert!(parse("").unwrap().is_empty());
        assert_eq!(words("echo hi # a comment").len(), 2);
        assert!(parse("echo a\n# note\necho b").unwrap().len() == 2);
    }

    #[test]
    fn compounds_parse_and_open_ones_are_incomplete() {
        let p = parse("for i in 1 2 3; do echo $i; done").unwrap();
        assert!(
            matches!(&p[0].commands[0], Command::For { var, items, body } if var == "i" && items.len() == 3 && body.len() == 1)
        );
        let p = parse("while true\ndo\n  echo x\ndone > /sdcard/o").unwrap();
        assert!(matches!(&p[0].commands[0], Command::Group(_, r) if r.len() == 1));
        let p =
            parse("if [ -f /x ]; then echo a; elif false; then echo b; else echo c; fi").unwrap();
        assert!(
            matches!(&p[0].commands[0], Command::If { arms, otherwise } if arms.len() == 2 && otherwise.len() == 1)
        );
        assert!(parse("! false").unwrap()[0].negate);
        assert!(parse("{ echo a; echo b; } 2>&1").is_ok());
        for open in [
            "for i in a b",
            "for i in a b; do echo $i",
            "if true; then",
            "while true; do",
            "echo \"x",
            "echo $(ls",
        ] {
            assert!(
                matches!(parse(open), Err(ParseError::Incomplete(_))),
                "{open}"
            );
        }
        for bad in [
            "done",
            "fi",
            "for 1 in a; do :; done",
            "if; then :; fi x",
            "echo a )",
            "echo a ;;",
        ] {
            assert!(matches!(parse(bad), Err(ParseError::Syntax(_))), "{bad}");
        }
        let deep = "if true; then ".repeat(40) + &"fi; ".repeat(40);
        assert!(matches!(parse(&deep), Err(ParseError::Syntax(e)) if e.contains("nested")));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(line in ".{0,200}") {
            let _ = parse(&line);
        }

        #[test]
        fn shell_shaped_input_never_panics(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "for", "i", "in", "do", "done", "if", "then", "fi", "else", "while", "{", "}",
                    ";", "\n", "|", "&&", "||", ">", "2>&1", ">&2", "'", "\"", "$(", ")", "`", "!",
                    "echo", "x=1", "$x", "$((", "<",
                ]),
                0..40,
            )
        ) {
            let _ = parse(&parts.join(" "));
        }
    }
}
