//! Pulls the JavaScript out of a CodeAct or Scripter reply; a reply without code is an answer.
//!
//! Rules, in the order they apply:
//! - A fenced block opens with three or more backticks (or tildes), possibly indented, and a
//!   language tag. Blocks tagged `js`, `javascript`, `ts`, `typescript`, `jsx`, `tsx`, `mjs`,
//!   `node` or `ecmascript` (any case), or untagged, are code; the fence's indentation is
//!   removed from each line. Blocks in any other language (`json`, `python`, `text`, ...) are
//!   left in the prose and their tags are listed in [`CodeExtraction::ignored_languages`], so
//!   the caller can tell the model that only JavaScript runs.
//! - A block closes at a line holding only a fence at least as long as the opening one, or at a
//!   code line that ends with the fence (`complete(true, "ok")```` `). A block still open at the
//!   end of the reply runs to the end (the reply was cut off).
//! - A one-line block at a line start (```` ```tap(3)``` ````) is code too; fences in the middle
//!   of a sentence are not fences.
//! - Several code blocks are kept in order; [`CodeExtraction::code`] joins them.
//! - Only when there is no fenced code at all, a `<code>` element whose opening tag starts a
//!   line is taken as code (to its `</code>`, or to the end). A `<code>` inside a sentence stays
//!   prose: an answer may quote code without asking to run it.

const JS_TAGS: &[&str] = &[
    "",
    "js",
    "javascript",
    "ts",
    "typescript",
    "jsx",
    "tsx",
    "mjs",
    "node",
    "ecmascript",
];

/// What a reply holds: code to run, and the words around it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeExtraction {
    /// The code blocks, in order, without their fences; blank blocks are dropped.
    pub blocks: Vec<String>,
    /// Everything that is not code, trimmed; with no code, this is the final answer.
    pub prose: String,
    /// Language tags of fenced blocks that were not taken as JavaScript, in order.
    pub ignored_languages: Vec<String>,
    /// For each of [`CodeExtraction::blocks`], the non-blank prose lines between it and the
    /// block before it (or the reply's start), each trimmed, one a line, in order; empty when
    /// there are none. Tells a block the model introduced from one it copied with its heading
    /// from a prompt.
    pub lead_ins: Vec<String>,
}

impl CodeExtraction {
    /// The blocks joined by newlines, or `None` when the reply has no code.
    pub fn code(&self) -> Option<String> {
        (!self.blocks.is_empty()).then(|| self.blocks.join("\n"))
    }

    /// Whether the reply has no code, and is therefore a final answer.
    pub fn is_final_answer(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// A reply without code that ends a Scripter run: its status and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalMessage {
    /// False when the reply starts with `FAILED:` (or `FAILURE:`, `ERROR:`), any case.
    pub success: bool,
    /// The reply without that prefix (or a leading `SUCCESS:`), trimmed.
    pub message: String,
}

/// Reads the status of a final reply (the [`CodeExtraction::prose`] of a reply without code).
pub fn final_message(prose: &str) -> FinalMessage {
    let text = prose.trim();
    let bare = text.trim_start_matches(['*', '_', '#', ' ']);
    for (prefix, success) in [
        ("failed", false),
        ("failure", false),
        ("error", false),
        ("success", true),
    ] {
        let Some(head) = bare.get(..prefix.len()) else {
            continue;
        };
        let rest = bare[prefix.len()..].trim_start_matches(['*', '_']);
        if head.eq_ignore_ascii_case(prefix) && rest.starts_with(':') {
            let message = rest[1..].trim_start_matches(['*', '_']).trim();
            return FinalMessage {
                success,
                message: message.to_owned(),
            };
        }
    }
    FinalMessage {
        success: true,
        message: text.to_owned(),
    }
}

struct OpenFence {
    marker: u8,
    len: usize,
    indent: usize,
    is_js: bool,
    /// Byte offset of the opening line, for prose when the block is not JavaScript.
    start: usize,
    content: String,
}

/// Splits a reply into code blocks and prose (see the module documentation for the rules).
pub fn extract_code(text: &str) -> CodeExtraction {
    let mut out = CodeExtraction::default();
    let mut prose = String::new();
    let mut open: Option<OpenFence> = None;
    // The non-blank prose lines since the last code block.
    let mut lead_in = String::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        if open.is_some()
            && let Some(Opening::Block { lang, .. }) = opening(line)
            && !lang.is_empty()
        {
            // A tagged fence inside a block: the model forgot to close the previous one.
            if let Some(fence) = open.take() {
                finish(
                    fence,
                    &text[..line_start],
                    &mut out,
                    &mut prose,
                    &mut lead_in,
                );
            }
        }
        if let Some(fence) = open.as_mut() {
            if let Some(before) = closing(line, fence.marker, fence.len) {
                push_line(&mut fence.content, before, fence.indent);
                if let Some(fence) = open.take() {
                    finish(fence, &text[..offset], &mut out, &mut prose, &mut lead_in);
                }
            } else {
                push_line(&mut fence.content, line, fence.indent);
            }
            continue;
        }
        match opening(line) {
            Some(Opening::Inline { lang, code, after }) => {
                if is_js(&lang) {
                    push_block(&mut out, code.to_owned(), &mut lead_in);
                    prose.push_str(after);
                    note_line(&mut lead_in, after);
                } else {
                    out.ignored_languages.push(lang);
                    prose.push_str(line);
                    note_line(&mut lead_in, line);
                }
            }
            Some(Opening::Block {
                marker,
                len,
                indent,
                lang,
            }) => {
                let is_js = is_js(&lang);
                if !is_js {
                    out.ignored_languages.push(lang);
                }
                open = Some(OpenFence {
                    marker,
                    len,
                    indent,
                    is_js,
                    start: line_start,
                    content: String::new(),
                });
            }
            None => {
                prose.push_str(line);
                note_line(&mut lead_in, line);
            }
        }
    }
    if let Some(fence) = open.take() {
        finish(fence, text, &mut out, &mut prose, &mut lead_in);
    }
    if out.blocks.is_empty()
        && out.ignored_languages.is_empty()
        && let Some((code, rest)) = code_element(&prose)
        && !code.trim().is_empty()
    {
        push_block(&mut out, code, &mut String::new());
        prose = rest;
    }
    out.prose = prose.trim().to_owned();
    out
}

fn finish(
    fence: OpenFence,
    text_so_far: &str,
    out: &mut CodeExtraction,
    prose: &mut String,
    lead_in: &mut String,
) {
    if fence.is_js {
        push_block(out, fence.content, lead_in);
    } else {
        let block = text_so_far.get(fence.start..).unwrap_or_default();
        prose.push_str(block);
        block.lines().for_each(|l| note_line(lead_in, l));
    }
}

/// Keeps a non-blank block with the lead-in lines before it; the next block's lead-in starts
/// empty.
fn push_block(out: &mut CodeExtraction, block: String, lead_in: &mut String) {
    let trimmed = block.trim_end();
    if !trimmed.trim_start().is_empty() {
        out.blocks
            .push(trimmed.trim_start_matches(['\n', '\r']).to_owned());
        out.lead_ins.push(std::mem::take(lead_in));
    }
}

/// Adds `line` to the lead-in, a line of its own, when it is not blank.
fn note_line(lead_in: &mut String, line: &str) {
    let line = line.trim();
    if !line.is_empty() {
        if !lead_in.is_empty() {
            lead_in.push('\n');
        }
        lead_in.push_str(line);
    }
}

fn is_js(lang: &str) -> bool {
    JS_TAGS.iter().any(|t| t.eq_ignore_ascii_case(lang))
}

/// Appends a code line with up to `indent` leading spaces removed.
fn push_line(content: &mut String, line: &str, indent: usize) {
    let strip = line
        .bytes()
        .take(indent)
        .take_while(|&b| b == b' ' || b == b'\t')
        .count();
    content.push_str(&line[strip..]);
}

enum Opening<'a> {
    Block {
        marker: u8,
        len: usize,
        indent: usize,
        lang: String,
    },
    Inline {
        lang: String,
        code: &'a str,
        after: &'a str,
    },
}

fn fence_run(s: &str) -> Option<(u8, usize)> {
    let marker = *s.as_bytes().first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let len = s.bytes().take_while(|&b| b == marker).count();
    (len >= 3).then_some((marker, len))
}

fn opening(line: &str) -> Option<Opening<'_>> {
    let trimmed = line.trim_start_matches([' ', '\t']);
    let indent = line.len() - trimmed.len();
    let (marker, len) = fence_run(trimmed)?;
    let info = &trimmed[len..];
    let fence = &trimmed[..len];
    if marker == b'`'
        && let Some(end) = info.find(fence)
    {
        let inner = &info[..end];
        let after = &info[end + len..];
        let after = after.trim_start_matches('`');
        let (lang, code) = match inner.split_once(char::is_whitespace) {
            Some((word, rest)) if is_known_tag(word) => (word.to_owned(), rest),
            _ => (String::new(), inner),
        };
        return Some(Opening::Inline { lang, code, after });
    }
    let word = info.split_whitespace().next().unwrap_or_default();
    let lang = word
        .trim_start_matches(['{', '.'])
        .trim_end_matches('}')
        .to_owned();
    Some(Opening::Block {
        marker,
        len,
        indent,
        lang,
    })
}

/// Language words that may start a one-line block.
fn is_known_tag(word: &str) -> bool {
    is_js(word)
        || ["json", "python", "py", "text", "bash", "sh", "xml", "html"]
            .iter()
            .any(|t| t.eq_ignore_ascii_case(word))
}

/// If `line` closes the block, the part of it that is still code ("" for a fence-only line).
fn closing(line: &str, marker: u8, len: usize) -> Option<&str> {
    let trimmed = line.trim();
    if let Some((m, n)) = fence_run(trimmed)
        && m == marker
        && n >= len
        && trimmed.len() == n
    {
        return Some("");
    }
    if marker == b'`' {
        let fence = "`".repeat(len);
        let body = line.trim_end();
        if let Some(code) = body.strip_suffix(fence.as_str())
            && !code.trim().is_empty()
            && !code.ends_with('`')
        {
            return Some(code);
        }
    }
    None
}

/// A `<code>` element whose opening tag starts a line: (its content, the prose without it).
fn code_element(prose: &str) -> Option<(String, String)> {
    let lower = prose.to_ascii_lowercase();
    let mut search = 0;
    while let Some(found) = lower[search..].find("<code") {
        let at = search + found;
        search = at + 5;
        let line_start = lower[..at].rfind('\n').map_or(0, |i| i + 1);
        let after_tag = lower.as_bytes().get(at + 5).copied();
        let starts_line = lower[line_start..at].trim().is_empty();
        if !starts_line || !matches!(after_tag, Some(b'>' | b' ' | b'\t')) {
            continue;
        }
        let open_end = lower[at..].find('>').map(|i| at + i + 1)?;
        let (code_end, close_end) = match lower[open_end..].find("</code>") {
            Some(i) => (open_end + i, open_end + i + "</code>".len()),
            None => (prose.len(), prose.len()),
        };
        let code = prose[open_end..code_end].to_owned();
        let rest = format!("{}{}", &prose[..at], &prose[close_end..]);
        return Some((code, rest));
    }
    None
}

#[cfg(test)]
#[path = "code_tests.rs"]
mod tests;
