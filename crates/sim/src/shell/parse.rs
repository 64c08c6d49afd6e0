//! Splits a shell command line the way a POSIX shell does, for the subset that adb clients
//! send: quoting, `$VAR`/`$?`, pipes, `;`/`&&`/`||`, and `>`/`>>`/`2>`/`2>&1`/`<` redirects.

/// A piece of a word: literal text or a variable to expand when the command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Var(String),
}

pub type Word = Vec<Part>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    Out { path: Word, append: bool },
    Err { path: Word },
    ErrToOut,
    In { path: Word },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Simple {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

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
    pub commands: Vec<Simple>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(Word),
    Op(&'static str),
}

fn push_lit(word: &mut Word, c: char) {
    if let Some(Part::Lit(s)) = word.last_mut() {
        s.push(c);
    } else {
        word.push(Part::Lit(c.to_string()));
    }
}

/// Reads a `$NAME`, `${NAME}` or `$?` after the `$`.
fn read_var(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    match chars.peek().copied() {
        Some('?') => {
            chars.next();
            Some("?".into())
        }
        Some('{') => {
            chars.next();
            let mut name = String::new();
            for c in chars.by_ref() {
                if c == '}' {
                    break;
                }
                name.push(c);
            }
            Some(name)
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
            Some(name)
        }
        _ => None,
    }
}

fn tokenize(line: &str) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word: Word = Vec::new();
    let mut in_word = false;
    let flush = |toks: &mut Vec<Tok>, word: &mut Word, in_word: &mut bool| {
        if *in_word {
            toks.push(Tok::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => flush(&mut toks, &mut word, &mut in_word),
            '\n' | ';' => {
                flush(&mut toks, &mut word, &mut in_word);
                toks.push(Tok::Op(";"));
            }
            '#' if !in_word => break,
            '|' | '&' | '>' | '<' => {
                // `2>` and `2>&1` when the word so far is exactly "2".
                let is_fd2 = c == '>' && in_word && word == vec![Part::Lit("2".into())];
                if is_fd2 {
                    word.clear();
                    in_word = false;
                    if chars.peek() == Some(&'&') {
                        chars.next();
                        if chars.next() != Some('1') {
                            return Err("syntax error: only 2>&1 is supported".into());
                        }
                        toks.push(Tok::Op("2>&1"));
                    } else {
                        toks.push(Tok::Op("2>"));
                    }
                    continue;
                }
                flush(&mut toks, &mut word, &mut in_word);
                let op = match (c, chars.peek().copied()) {
                    ('|', Some('|')) => "||",
                    ('&', Some('&')) => "&&",
                    ('>', Some('>')) => ">>",
                    ('|', _) => "|",
                    ('>', _) => ">",
                    ('<', _) => "<",
                    _ => "&",
                };
                if op.len() == 2 {
                    chars.next();
                }
                toks.push(Tok::Op(op));
            }
            '\'' => {
                in_word = true;
                word.push(Part::Lit(String::new()));
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => push_lit(&mut word, c),
                        None => return Err("syntax error: unterminated quoted string".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                word.push(Part::Lit(String::new()));
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => push_lit(&mut word, c),
                            Some(c) => {
                                push_lit(&mut word, '\\');
                                push_lit(&mut word, c);
                            }
                            None => return Err("syntax error: unterminated quoted string".into()),
                        },
                        Some('$') => match read_var(&mut chars) {
                            Some(v) => word.push(Part::Var(v)),
                            None => push_lit(&mut word, '$'),
                        },
                        Some(c) => push_lit(&mut word, c),
                        None => return Err("syntax error: unterminated quoted string".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => push_lit(&mut word, c),
                }
            }
            '$' => {
                in_word = true;
                match read_var(&mut chars) {
                    Some(v) => word.push(Part::Var(v)),
                    None => push_lit(&mut word, '$'),
                }
            }
            c => {
                in_word = true;
                push_lit(&mut word, c);
            }
        }
    }
    flush(&mut toks, &mut word, &mut in_word);
    Ok(toks)
}

/// Parses a command line into pipelines joined by `;`, `&&` and `||`.
pub fn parse(line: &str) -> Result<Vec<Pipeline>, String> {
    let toks = tokenize(line)?;
    let mut out: Vec<Pipeline> = Vec::new();
    let mut join = Join::Always;
    let mut commands: Vec<Simple> = Vec::new();
    let mut cur = Simple::default();
    let mut it = toks.into_iter().peekable();
    let syntax = |t: &str| format!("syntax error: unexpected '{t}'");
    while let Some(tok) = it.next() {
        match tok {
            Tok::Word(w) => cur.words.push(w),
            Tok::Op(op @ (">" | ">>" | "2>" | "<")) => {
                let Some(Tok::Word(path)) = it.next() else {
                    return Err(format!("syntax error: '{op}' needs a file name"));
                };
                cur.redirects.push(match op {
                    ">" => Redirect::Out {
                        path,
                        append: false,
                    },
                    ">>" => Redirect::Out { path, append: true },
                    "2>" => Redirect::Err { path },
                    _ => Redirect::In { path },
                });
            }
            Tok::Op("2>&1") => cur.redirects.push(Redirect::ErrToOut),
            Tok::Op("|") => {
                if cur.words.is_empty() {
                    return Err(syntax("|"));
                }
                commands.push(std::mem::take(&mut cur));
            }
            Tok::Op(op @ (";" | "&&" | "||" | "&")) => {
                if cur.words.is_empty() && cur.redirects.is_empty() {
                    if commands.is_empty() && op == ";" {
                        continue;
                    }
                    return Err(syntax(op));
                }
                commands.push(std::mem::take(&mut cur));
                out.push(Pipeline {
                    join,
                    commands: std::mem::take(&mut commands),
                });
                join = match op {
                    "&&" => Join::And,
                    "||" => Join::Or,
                    _ => Join::Always,
                };
                if op != ";" && op != "&" && it.peek().is_none() {
                    return Err(syntax(op));
                }
            }
            Tok::Op(op) => return Err(syntax(op)),
        }
    }
    if !cur.words.is_empty() || !cur.redirects.is_empty() {
        commands.push(cur);
    } else if !commands.is_empty() {
        return Err(syntax("|"));
    }
    if !commands.is_empty() {
        out.push(Pipeline { join, commands });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<Part>> {
        parse(line).unwrap().remove(0).commands.remove(0).words
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
    }

    #[test]
    fn lists_pipes_and_redirects_parse() {
        let p = parse("false || echo a && echo b; ls | grep x > /sdcard/o 2>&1").unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[1].join, Join::Or);
        assert_eq!(p[2].join, Join::And);
        assert_eq!(p[3].commands.len(), 2);
        assert_eq!(p[3].commands[1].redirects.len(), 2);
        assert!(parse("echo 'open").is_err());
        assert!(parse("| x").is_err());
        assert!(parse("a &&").is_err());
        assert!(parse("").unwrap().is_empty());
        assert_eq!(
            parse("echo hi # a comment").unwrap()[0].commands[0]
                .words
                .len(),
            2
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(line in ".{0,200}") {
            let _ = parse(&line);
        }
    }
}
