//! Parses a shell script the way a POSIX shell does, for the subset that adb clients and people
//! send: quoting, unquoted pattern characters, `$VAR`/`${VAR}`/`$?`, `$(...)`, `$((...))`, assignments, pipes, `!`,
//! `;`/`&&`/`||`/newlines, `{ ...; }` groups, `for`/`while`/`until`/`if` compounds, and
//! `>`/`>>`/`<` redirects of fd 1 and 2 (`2>`, `2>>`, `2>&1`, `>&2`, `1>&2`).
mod grammar;
mod lex;

pub use grammar::parse;

/// A piece of a word: literal text, a variable, or a substitution to expand when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    /// Unquoted `*`, `?`, `[` and `]`: active in pathname expansion and `case` patterns.
    Pattern(String),
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

fn incomplete(what: &str) -> ParseError {
    ParseError::Incomplete(what.to_owned())
}

#[cfg(test)]
mod tests;
