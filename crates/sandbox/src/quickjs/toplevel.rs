//! Top-level declarations that a later run may declare again, as in a notebook.
//!
//! QuickJS keeps a global `let`, `const` or `class` binding for the life of the context and
//! refuses a second declaration of the name ("redeclaration of 'x'"). A run that failed after
//! its bindings were created therefore left them behind, and the corrected retry of the same
//! code failed on them. Each run's top-level declarations are rewritten to `var`, which a later
//! run may declare again and which persists the same way: `const x` becomes `var   x`,
//! `let x` becomes `var x` and `class C {…}` becomes `var C = class C {…};`. Line numbers are
//! kept. What is given up: a top-level `const` can be reassigned.
//!
//! Names the host defined (granted functions, globals it set) are left as written, so
//! declaring one still fails with "redeclaration of …" instead of silently not replacing it.
//! Only statements at the top level are touched; blocks, functions, loops and strings are
//! skipped with a small scanner that never fails: on text it cannot follow it rewrites less.

/// One edit: replace `len` bytes at `at` with `with`.
struct Edit {
    at: usize,
    len: usize,
    with: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    Brace,
    /// The body of a top-level class declaration: a `;` goes after its closing brace.
    ClassBody,
    Paren,
    Bracket,
    /// `${ … }` inside a template literal.
    TemplateExpr,
}

/// The previous significant token, to tell a regex from a division and a statement start.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    Start,
    Punct(char),
    /// A keyword after which an expression starts (`return`, `typeof`, ...).
    Keyword,
    /// An identifier, number, string, template, regex or closing bracket: a value.
    Value,
}

const EXPRESSION_KEYWORDS: &[&str] = &[
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
];

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// Rewrites the top-level `let`/`const`/`class` declarations of `code` whose names are not
/// `protected`; `None` when there is nothing to rewrite.
pub(super) fn rewrite(code: &str, protected: impl Fn(&str) -> bool) -> Option<String> {
    let edits = Scanner::new(code, &protected).scan();
    if edits.is_empty() {
        return None;
    }
    let extra: usize = edits.iter().map(|e| e.with.len()).sum();
    let mut out = String::with_capacity(code.len() + extra);
    let mut at = 0;
    for edit in edits {
        out.push_str(code.get(at..edit.at)?);
        out.push_str(&edit.with);
        at = edit.at + edit.len;
    }
    out.push_str(code.get(at..)?);
    Some(out)
}

struct Scanner<'a, P> {
    code: &'a str,
    i: usize,
    stack: Vec<Frame>,
    prev: Prev,
    newline: bool,
    /// A class declaration was seen; its body is the next top-level `{`.
    class_pending: bool,
    protected: &'a P,
    edits: Vec<Edit>,
}

impl<'a, P: Fn(&str) -> bool> Scanner<'a, P> {
    fn new(code: &'a str, protected: &'a P) -> Self {
        Self {
            code,
            i: 0,
            stack: Vec::new(),
            prev: Prev::Start,
            newline: false,
            class_pending: false,
            protected,
            edits: Vec::new(),
        }
    }

    fn peek(&self, offset: usize) -> Option<char> {
        self.code.get(self.i + offset..)?.chars().next()
    }

    fn token(&mut self, prev: Prev) {
        self.prev = prev;
        self.newline = false;
    }

    fn scan(mut self) -> Vec<Edit> {
        while let Some(c) = self.peek(0) {
            match c {
                '\n' | '\r' | '\u{2028}' | '\u{2029}' => {
                    self.newline = true;
                    self.i += c.len_utf8();
                }
                c if c.is_whitespace() => self.i += c.len_utf8(),
                '/' if self.peek(1) == Some('/') => self.skip_line_comment(),
                '/' if self.peek(1) == Some('*') => self.skip_block_comment(),
                '/' if self.regex_allowed() => {
                    self.skip_regex();
                    self.token(Prev::Value);
                }
                '\'' | '"' => {
                    self.skip_string(c);
                    self.token(Prev::Value);
                }
                '`' => {
                    self.i += 1;
                    self.skip_template();
                }
                c if is_word(c) => self.word(),
                _ => self.punct(c),
            }
        }
        self.edits
    }

    fn regex_allowed(&self) -> bool {
        match self.prev {
            Prev::Start | Prev::Keyword => true,
            Prev::Punct(p) => p != ')' && p != ']',
            Prev::Value => false,
        }
    }

    fn punct(&mut self, c: char) {
        self.i += c.len_utf8();
        match c {
            '{' => {
                let frame = if self.stack.is_empty() && self.class_pending {
                    self.class_pending = false;
                    Frame::ClassBody
                } else {
                    Frame::Brace
                };
                self.stack.push(frame);
            }
            '(' => self.stack.push(Frame::Paren),
            '[' => self.stack.push(Frame::Bracket),
            '}' => match self.stack.pop() {
                Some(Frame::TemplateExpr) => {
                    self.skip_template();
                    return;
                }
                Some(Frame::ClassBody) if self.stack.is_empty() => self.edits.push(Edit {
                    at: self.i,
                    len: 0,
                    with: ";".into(),
                }),
                _ => {}
            },
            ')' | ']' => {
                self.stack.pop();
                self.token(Prev::Value);
                return;
            }
            _ => {}
        }
        self.token(Prev::Punct(c));
    }

    fn word(&mut self) {
        let start = self.i;
        let end = self.code[start..]
            .char_indices()
            .find(|&(_, c)| !is_word(c))
            .map_or(self.code.len(), |(n, _)| start + n);
        let word = &self.code[start..end];
        self.i = end;
        let statement_start = self.stack.is_empty()
            && (self.newline || matches!(self.prev, Prev::Start | Prev::Punct(';' | '}')));
        if statement_start {
            match word {
                "let" | "const" => self.declaration(start, word),
                "class" => self.class(start),
                _ => {}
            }
        }
        let prev = if EXPRESSION_KEYWORDS.contains(&word) {
            Prev::Keyword
        } else {
            Prev::Value
        };
        self.token(prev);
    }

    /// The next significant character after `from` and where it is.
    fn next_significant(&self, from: usize) -> Option<(usize, char)> {
        self.code[from..]
            .char_indices()
            .find(|&(_, c)| !c.is_whitespace())
            .map(|(n, c)| (from + n, c))
    }

    fn name_at(&self, at: usize) -> &'a str {
        let rest = &self.code[at..];
        let end = rest.find(|c: char| !is_word(c)).unwrap_or(rest.len());
        &rest[..end]
    }

    fn declaration(&mut self, start: usize, keyword: &str) {
        let Some((at, next)) = self.next_significant(self.i) else {
            return;
        };
        let names: Vec<&str> = match next {
            '{' | '[' if keyword == "const" || at > self.i => self.pattern_names(at),
            c if is_word(c) && !c.is_ascii_digit() => vec![self.name_at(at)],
            _ => return,
        };
        if names.is_empty() || names.iter().any(|n| (self.protected)(n)) {
            return;
        }
        let with = format!("var{}", " ".repeat(keyword.len() - 3));
        self.edits.push(Edit {
            at: start,
            len: keyword.len(),
            with,
        });
    }

    /// Every word inside a destructuring pattern (keys and defaults too: a name wrongly
    /// counted only keeps the declaration as written).
    fn pattern_names(&self, at: usize) -> Vec<&'a str> {
        let mut depth = 0usize;
        let mut names = Vec::new();
        let mut j = at;
        while let Some(c) = self.code[j..].chars().next() {
            match c {
                '{' | '[' | '(' => depth += 1,
                '}' | ']' | ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return names;
                    }
                }
                '\'' | '"' | '`' | '/' => return Vec::new(),
                c if is_word(c) => {
                    let name = self.name_at(j);
                    names.push(name);
                    j += name.len();
                    continue;
                }
                _ => {}
            }
            j += c.len_utf8();
        }
        Vec::new()
    }

    fn class(&mut self, start: usize) {
        let Some((at, next)) = self.next_significant(self.i) else {
            return;
        };
        if !is_word(next) || next.is_ascii_digit() {
            return;
        }
        let name = self.name_at(at);
        if (self.protected)(name) || name == "extends" {
            return;
        }
        self.edits.push(Edit {
            at: start,
            len: 0,
            with: format!("var {name} = "),
        });
        self.class_pending = true;
    }

    fn skip_line_comment(&mut self) {
        let rest = &self.code[self.i..];
        self.i += rest.find(['\n', '\r']).unwrap_or(rest.len());
    }

    fn skip_block_comment(&mut self) {
        let rest = &self.code[self.i + 2..];
        let len = rest.find("*/").map_or(rest.len(), |n| n + 2);
        if rest[..len.min(rest.len())].contains(['\n', '\r']) {
            self.newline = true;
        }
        self.i += 2 + len;
    }

    /// Skips a quoted string; an unterminated one ends at the line's end.
    fn skip_string(&mut self, quote: char) {
        self.i += 1;
        while let Some(c) = self.peek(0) {
            self.i += c.len_utf8();
            match c {
                '\\' => self.skip_escaped(),
                '\n' | '\r' => return,
                c if c == quote => return,
                _ => {}
            }
        }
    }

    fn skip_escaped(&mut self) {
        if let Some(c) = self.peek(0) {
            self.i += c.len_utf8();
        }
    }

    fn skip_regex(&mut self) {
        self.i += 1;
        let mut in_class = false;
        while let Some(c) = self.peek(0) {
            self.i += c.len_utf8();
            match c {
                '\\' => self.skip_escaped(),
                '\n' | '\r' => return,
                '[' => in_class = true,
                ']' => in_class = false,
                '/' if !in_class => break,
                _ => {}
            }
        }
        while let Some(flag) = self.peek(0).filter(|&c| is_word(c)) {
            self.i += flag.len_utf8();
        }
    }

    /// Skips template text up to its closing backtick, or up to `${`, where code resumes.
    fn skip_template(&mut self) {
        while let Some(c) = self.peek(0) {
            self.i += c.len_utf8();
            match c {
                '\\' => self.skip_escaped(),
                '`' => break,
                '$' if self.peek(0) == Some('{') => {
                    self.i += 1;
                    self.stack.push(Frame::TemplateExpr);
                    self.token(Prev::Punct('{'));
                    return;
                }
                _ => {}
            }
        }
        self.token(Prev::Value);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::rewrite;

    fn open(code: &str) -> String {
        rewrite(code, |n| n == "tap" || n == "ORIGINAL").unwrap_or_else(|| code.to_owned())
    }

    #[test]
    fn top_level_declarations_become_var_and_keep_their_lines() {
        assert_eq!(open("const a = 1;\nlet b = 2"), "var   a = 1;\nvar b = 2");
        assert_eq!(open("let {x, y: z} = o"), "var {x, y: z} = o");
        assert_eq!(open("const [p, q] = r"), "var   [p, q] = r");
        assert_eq!(
            open("class C { m() { return 1 } }\n(f)()"),
            "var C = class C { m() { return 1 } };\n(f)()"
        );
        assert_eq!(open("x()\nconst k = 1"), "x()\nvar   k = 1");
    }

    #[test]
    fn nested_quoted_and_commented_declarations_are_left_alone() {
        for code in [
            "if (a) { const x = 1 }",
            "for (const x of xs) {}",
            "function f() { let y = 2 }",
            "'const s = 1'",
            "`${ a }const t = 1`",
            "// const c = 1",
            "/* let c = 1 */",
            "x = /const r = 1/",
            "a.let = 1",
            "let = 5",
            "let tap = () => 1",
            "const { ORIGINAL } = o",
        ] {
            assert_eq!(open(code), code, "{code}");
        }
    }

    #[test]
    fn a_template_expression_with_braces_ends_where_the_template_does() {
        assert_eq!(
            open("const s = `a${ {b: 1}.b }c`; const t = 2"),
            "var   s = `a${ {b: 1}.b }c`; var   t = 2"
        );
        assert_eq!(open("x = a / b; const d = 1"), "x = a / b; var   d = 1");
    }

    proptest::proptest! {
        // PROPTEST_CASES=1000000 runs a longer search than CI's.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
        ))]
        #[test]
        fn never_panics_and_keeps_the_line_count(code in "(const |let |class |[a-z{}()\\[\\]`'\"/$;=\n\\\\ ]|\u{e9}|\u{2028})*") {
            let out = open(&code);
            proptest::prop_assert_eq!(out.lines().count(), code.lines().count());
        }
    }
}
