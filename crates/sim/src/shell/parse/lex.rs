//! The lexer: splits a script into words and operators, keeping quotes, backslashes, `$`
//! expansions, backquotes and comments, and reading redirect file descriptors (`2>`, `>&2`).
use super::{ParseError, Part, Word, incomplete};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
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

pub(super) fn tokenize(line: &str) -> Result<Vec<Tok>, ParseError> {
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
            '*' | '?' | '[' | ']' => {
                in_word = true;
                if let Some(Part::Pattern(s)) = word.last_mut() {
                    s.push(c);
                } else {
                    word.push(Part::Pattern(c.to_string()));
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
