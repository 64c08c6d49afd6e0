//! Which code in a reply the model wrote for this step. Weak models often copy their prompt
//! back: the examples of the system prompt, the code of earlier steps, with the headings around
//! them. Such code must not run as if the model meant it (an example's `complete(true, …)`
//! would end a task that was never done). The prompt asks for exactly one block, so:
//!
//! - A block is **copied** when its code is a code block of the prompt (or a long part of the
//!   prompt's text) *and* something says it was copied rather than written again: a prose
//!   line between it and the reply's block before it (any of them, not only the last) is a
//!   line the prompt shows with that same code, before it, and the model did not write itself
//!   (a heading of an example, "### Step 2" of the history, even when the model's own earlier
//!   thought follows it); or the reply copies two or more of the prompt's own blocks
//!   (examples, not the model's earlier code). A prompt line shown elsewhere (the goal, a line
//!   of the screen) is no evidence: a model restates those in its own reasoning. A model that
//!   repeats an earlier action of its own (`swipe(...)` again, with the same words) is not
//!   stopped.
//! - A block that **ends the task as an example does** never runs, whatever introduces it:
//!   its code is one of the prompt's own blocks (an example, not the model's earlier code)
//!   and it calls the task's ending function ([`PromptEcho::with_task_end`]: CodeAct's
//!   `complete`). Run, it would end a task with the example's answer (`complete(true, "Wi-Fi
//!   is on.")` for "Turn off Bluetooth"). This is a decision: an example's *other* blocks
//!   (`open_app("Settings")`, `tap(4)`) keep the evidence rule above, because a real model
//!   writes them for its own goal; an example's ending is never the answer to another goal,
//!   and a model that reached the example's very goal can word its answer itself.
//! - Of the blocks that are left, the **last** runs; earlier ones are reported as not run.
//! - Blocks in other languages never run ([`super::CodeExtraction::ignored_languages`]).
//!
//! Every block left out is listed in [`CodeChoice::ignored`], so the step can say what was
//! ignored and the model can be told to write one block of its own.
//!
//! What a copy brought never becomes the model's own words: a history shows the model
//! [`CodeChoice::own_prose`] (nothing, when the reply only copied), never the copied heading,
//! so the next step cannot take that heading for the model's own ([`PromptEcho::with_own_words`])
//! and let the same copy run. The evidence stays as strong at every step.
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use super::code::extract_code;

/// Shortest prompt line that counts as evidence of copying (shorter ones, like "Step 1", are
/// too common to tell).
const MIN_LINE: usize = 8;
/// Shortest code that counts as copied when it is a part of the prompt's text rather than one
/// of its blocks.
const MIN_PART: usize = 24;
/// Most prompt texts [`EchoText::shared`] keeps read (more: it starts over).
const MAX_SHARED: usize = 32;

/// One text of the prompt (the system prompt, a step's message), read for echoes as far as a
/// question needs: its code blocks, its lines and its whole text, whitespace collapsed, each
/// worked out once, on first use. A system prompt that every step and every task shows is read
/// once for all of them ([`EchoText::shared`]).
#[derive(Debug, Default)]
pub struct EchoText {
    raw: String,
    /// Each code block (normalised), and the lines the text shows before it (since the block
    /// before it), as written, one a line (for every place the block stands).
    blocks: OnceLock<HashMap<String, String>>,
    lines: OnceLock<HashSet<String>>,
    text: OnceLock<String>,
}

impl EchoText {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            raw: text.into(),
            ..Self::default()
        }
    }

    /// The text read once for the whole process: the same text asked again (a system prompt
    /// shared by steps and tasks) is the same reading.
    pub fn shared(text: &str) -> Arc<Self> {
        static SHARED: OnceLock<Mutex<HashMap<String, Arc<EchoText>>>> = OnceLock::new();
        let map = SHARED.get_or_init(Mutex::default);
        let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(text) {
            return t.clone();
        }
        if map.len() >= MAX_SHARED {
            map.clear();
        }
        let t = Arc::new(Self::new(text));
        map.insert(text.to_owned(), t.clone());
        t
    }

    fn blocks(&self) -> &HashMap<String, String> {
        self.blocks.get_or_init(|| {
            let read = extract_code(&self.raw);
            let mut blocks: HashMap<String, String> = HashMap::new();
            for (block, lead_in) in read.blocks.iter().zip(read.lead_ins) {
                match blocks.entry(normal(block)) {
                    Entry::Vacant(e) => {
                        e.insert(lead_in);
                    }
                    Entry::Occupied(mut e) => {
                        e.get_mut().push('\n');
                        e.get_mut().push_str(&lead_in);
                    }
                }
            }
            blocks
        })
    }

    /// Whether `line` (normalised) is a line of this text. Most lines are not even a part of
    /// it, which is quick to tell, and then the text's lines need not be read.
    fn has_line(&self, line: &str) -> bool {
        self.text().contains(line) && self.lines().contains(line)
    }

    fn lines(&self) -> &HashSet<String> {
        self.lines.get_or_init(|| {
            self.raw
                .lines()
                .map(normal)
                .filter(|l| l.chars().count() >= MIN_LINE)
                .collect()
        })
    }

    fn text(&self) -> &str {
        self.text.get_or_init(|| normal(&self.raw))
    }
}

/// What the model was shown this step, kept in a form that answers "was this copied?".
#[derive(Debug, Clone, Default)]
pub struct PromptEcho {
    /// The texts of the prompt.
    parts: Vec<Arc<EchoText>>,
    /// Code the model wrote in earlier steps, shown back to it (its own to repeat).
    own_blocks: HashSet<String>,
    /// Lines the model wrote itself: no evidence of copying.
    own_lines: HashSet<String>,
    /// The function whose call ends the task, if the agent has one (`complete`).
    task_end: Option<String>,
}

/// Where a block's code comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The model's own earlier code, shown back to it.
    Own,
    /// One of the prompt's code blocks.
    Block,
    /// A long part of a prompt text.
    Text,
}

/// Collapses every run of whitespace to one space and trims.
fn normal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

impl PromptEcho {
    /// From the texts of the prompt: the system prompt and this step's message, say.
    pub fn new<'a>(prompt: impl IntoIterator<Item = &'a str>) -> Self {
        Self::of(prompt.into_iter().map(|t| Arc::new(EchoText::new(t))))
    }

    /// From texts already read (a system prompt's [`EchoText::shared`], say).
    pub fn of(parts: impl IntoIterator<Item = Arc<EchoText>>) -> Self {
        Self {
            parts: parts.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Marks what the model itself wrote in earlier steps (their thoughts and code, as the
    /// prompt shows them back): its lines are no evidence of copying, and its code is the
    /// model's own to repeat.
    pub fn with_own_words<'a>(mut self, own: impl IntoIterator<Item = &'a str>) -> Self {
        for text in own {
            self.own_lines.extend(text.lines().map(normal));
            let code = normal(text);
            if !code.is_empty() {
                self.own_blocks.insert(code);
            }
        }
        self
    }

    /// Names the function whose call ends the task (CodeAct's `complete`): a prompt's own
    /// block that calls it never runs (see the module documentation).
    pub fn with_task_end(mut self, function: &str) -> Self {
        self.task_end = Some(function.to_owned());
        self
    }

    /// Where `code` comes from in the prompt; `None` when it is new.
    fn has_code(&self, code: &str) -> Option<Origin> {
        let code = normal(code);
        if code.is_empty() {
            return None;
        }
        if self.own_blocks.contains(&code) {
            return Some(Origin::Own);
        }
        if self.parts.iter().any(|p| p.blocks().contains_key(&code)) {
            return Some(Origin::Block);
        }
        (code.chars().count() >= MIN_PART && self.parts.iter().any(|p| p.text().contains(&code)))
            .then_some(Origin::Text)
    }

    /// Whether `code` calls the function that ends the task.
    fn ends_task(&self, code: &str) -> bool {
        self.task_end.as_deref().is_some_and(|f| calls(code, f))
    }

    fn has_line(&self, line: &str) -> bool {
        let line = normal(line);
        self.is_prompt_line(&line) && self.parts.iter().any(|p| p.has_line(&line))
    }

    /// Whether `line` (normalised) is long enough to tell and not the model's own.
    fn is_prompt_line(&self, line: &str) -> bool {
        line.chars().count() >= MIN_LINE && !self.own_lines.contains(line)
    }

    /// Whether one of `lead_in`, the reply's lines before `code`, is a line the prompt shows
    /// with that same code (before it, since the prompt's block before it) and the model did
    /// not write itself: the code was copied with its surroundings. For code that is a part
    /// of a prompt text rather than one of its blocks, any line of that text counts.
    fn copied_with(&self, code: &str, lead_in: &str) -> bool {
        let lines: HashSet<String> = lead_in
            .lines()
            .map(normal)
            .filter(|l| self.is_prompt_line(l))
            .collect();
        if lines.is_empty() {
            return false;
        }
        let code = normal(code);
        self.parts.iter().any(|p| match p.blocks().get(&code) {
            Some(around) => around.lines().any(|a| lines.contains(&normal(a))),
            None => {
                code.chars().count() >= MIN_PART
                    && p.text().contains(&code)
                    && lines.iter().any(|l| p.has_line(l))
            }
        })
    }
}

/// Why a block of the reply did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoredWhy {
    /// It repeats code of the prompt, copied with its surroundings.
    CopiedFromPrompt,
    /// It is a block of the prompt's own (an example) that ends the task: an example's answer
    /// never ends a task, whatever introduces it.
    ExampleEnd,
    /// Another block came after it: only the last block of the model's own runs.
    NotLast,
    /// It is not JavaScript (the tag it had).
    NotJavaScript(String),
}

/// A block of the reply that did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredBlock {
    pub why: IgnoredWhy,
    /// Its first non-blank line (empty for other languages), to say which block it was.
    pub first_line: String,
}

/// The code to run from a reply, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeChoice {
    /// The block that runs; `None` when the reply has no code of the model's own.
    pub code: Option<String>,
    /// The reply's prose (trimmed): what the model said, for the user.
    pub prose: String,
    /// The prose the model wrote itself, for a history that shows the model its own words:
    /// [`CodeChoice::prose`] without the lines that introduce a copied block and without the
    /// lines it copied from the prompt; empty when the reply ran nothing of its own because it
    /// copied. What a copy brought must never come back as the model's own words: the next
    /// step would take it for them ([`PromptEcho::with_own_words`]) and let the copy run.
    pub own_prose: String,
    /// Blocks that do not run, in the order of the reply.
    pub ignored: Vec<IgnoredBlock>,
}

impl CodeChoice {
    /// How many blocks were left out because they were copied from the prompt (an example's
    /// ending among them).
    pub fn copied(&self) -> usize {
        self.ignored
            .iter()
            .filter(|b| matches!(b.why, IgnoredWhy::CopiedFromPrompt | IgnoredWhy::ExampleEnd))
            .count()
    }

    /// How many blocks were left out because they end the task as an example of the prompt
    /// does.
    pub fn example_ends(&self) -> usize {
        self.ignored
            .iter()
            .filter(|b| b.why == IgnoredWhy::ExampleEnd)
            .count()
    }

    /// One sentence for the user saying what was left out and why, or `None`.
    pub fn summary(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let ends = self.example_ends();
        let copied = self.copied() - ends;
        let not_last = self
            .ignored
            .iter()
            .filter(|b| b.why == IgnoredWhy::NotLast)
            .count();
        let languages: Vec<&str> = self
            .ignored
            .iter()
            .filter_map(|b| match &b.why {
                IgnoredWhy::NotJavaScript(lang) => Some(lang.as_str()),
                _ => None,
            })
            .collect();
        let mut parts = Vec::new();
        if ends > 0 {
            parts.push(format!(
                "{ends} block{} copied from the prompt's example that would end the task with the example's answer",
                plural(ends)
            ));
        }
        if copied > 0 {
            parts.push(format!(
                "{copied} code block{} copied from the prompt",
                plural(copied)
            ));
        }
        if not_last > 0 {
            parts.push(format!(
                "{not_last} earlier block{} (only the last block runs)",
                plural(not_last)
            ));
        }
        if !languages.is_empty() {
            parts.push(format!(
                "{} block{} not in JavaScript ({})",
                languages.len(),
                plural(languages.len()),
                languages.join(", ")
            ));
        }
        Some(format!("ignored {}", parts.join("; ")))
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Picks the code to run from `reply` (see the module documentation for the rules).
pub fn choose_code(reply: &str, prompt: &PromptEcho) -> CodeChoice {
    let extraction = extract_code(reply);
    let copies: Vec<Option<Origin>> = extraction
        .blocks
        .iter()
        .map(|b| prompt.has_code(b))
        .collect();
    let echoing = copies
        .iter()
        .filter(|c| matches!(c, Some(Origin::Block | Origin::Text)))
        .count()
        >= 2;
    let mut ignored = Vec::new();
    let mut own: Vec<(usize, &String)> = Vec::new();
    for (i, block) in extraction.blocks.iter().enumerate() {
        let lead_in = extraction.lead_ins.get(i).map_or("", String::as_str);
        if copies[i] == Some(Origin::Block) && prompt.ends_task(block) {
            ignored.push((i, IgnoredWhy::ExampleEnd, block));
        } else if copies[i].is_some() && (echoing || prompt.copied_with(block, lead_in)) {
            ignored.push((i, IgnoredWhy::CopiedFromPrompt, block));
        } else {
            own.push((i, block));
        }
    }
    let code = own.pop().map(|(_, b)| b.clone());
    let own_prose = if code.is_none() && !ignored.is_empty() {
        String::new()
    } else {
        let copied_lead_ins: HashSet<String> = ignored
            .iter()
            .filter_map(|(i, _, _)| extraction.lead_ins.get(*i))
            .flat_map(|l| l.lines())
            .map(normal)
            .collect();
        own_lines(&extraction.prose, |line| {
            !copied_lead_ins.contains(&normal(line)) && !prompt.has_line(line)
        })
    };
    ignored.extend(own.into_iter().map(|(i, b)| (i, IgnoredWhy::NotLast, b)));
    ignored.sort_by_key(|(i, _, _)| *i);
    let mut ignored: Vec<IgnoredBlock> = ignored
        .into_iter()
        .map(|(_, why, block)| IgnoredBlock {
            why,
            first_line: first_line(block),
        })
        .collect();
    ignored.extend(
        extraction
            .ignored_languages
            .iter()
            .map(|lang| IgnoredBlock {
                why: IgnoredWhy::NotJavaScript(lang.clone()),
                first_line: String::new(),
            }),
    );
    CodeChoice {
        code,
        prose: extraction.prose,
        own_prose,
        ignored,
    }
}

/// Whether `code` calls `function`: its name, not part of a longer name or a method, then `(`.
fn calls(code: &str, function: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    code.match_indices(function).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + function.len()..].trim_start();
        !before.is_some_and(|c| ident(c) || c == '.') && after.starts_with('(')
    })
}

/// The lines of `prose` that `keep` keeps, trimmed as a whole.
fn own_lines(prose: &str, keep: impl Fn(&str) -> bool) -> String {
    let kept: Vec<&str> = prose.lines().filter(|l| keep(l)).collect();
    kept.join("\n").trim().to_owned()
}

fn first_line(block: &str) -> String {
    let line = block.lines().map(str::trim).find(|l| !l.is_empty());
    line.unwrap_or_default().chars().take(80).collect()
}

#[cfg(test)]
#[path = "echo_tests.rs"]
mod tests;
