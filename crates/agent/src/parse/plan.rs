//! Splits the body of a Manager `<plan>` into routed subgoals.
//!
//! - Each item starts with a list marker: `1.`, `1)`, `1:`, `(1)`, `Step 1:`, `-`, `*`, `+`,
//!   `•`, optionally followed by a `[ ]`/`[x]` checkbox or a second marker (`2. - Tap`). Numbers are not trusted: subgoals are
//!   renumbered 1, 2, 3 in the order written.
//! - When the plan uses markers, a line without one continues the item above it; when it uses
//!   none, every non-blank line is an item.
//! - `<script>…</script>` (closed or not) is one Scripter subgoal holding the script task; any
//!   marker in front of the tag is dropped.
//! - A line that starts with `TEXT_TASK:` (after its marker, any case, emphasis allowed) is a
//!   TextManipulator subgoal; it is always its own item.
//! - A bare `DONE` item ends the plan's list and is not a subgoal: completion is declared with
//!   `<request_accomplished>`.

use super::tags::Tags;

/// One step of the Manager's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subgoal {
    /// Position in the plan, from 1.
    pub index: usize,
    /// The subgoal as written, without its list marker.
    pub text: String,
    /// Which agent it goes to.
    pub kind: SubgoalKind,
}

/// Where a subgoal is routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubgoalKind {
    /// An on-device action, for the Executor.
    Action,
    /// An off-device task for the Scripter: the body of the `<script>` element.
    Script(String),
    /// A rewrite of the focused text field for the TextManipulator: the text after
    /// `TEXT_TASK:`.
    TextTask(String),
}

/// Parses a plan body into subgoals, with warnings for what was tolerated.
pub fn parse_plan(body: &str) -> (Vec<Subgoal>, Vec<String>) {
    let lower = body.to_ascii_lowercase();
    let mut subgoals: Vec<Subgoal> = Vec::new();
    let mut warnings = Vec::new();
    let marked = body.lines().any(|l| strip_marker(l).0);
    let tags = Tags::new(&lower, &["script"]);
    let mut pos = 0;
    while pos <= body.len() {
        let script = tags.next_element(pos);
        let segment_end = script.as_ref().map_or(body.len(), |s| {
            lower[..s.attrs.start].rfind('<').unwrap_or(s.attrs.start)
        });
        push_lines(&body[pos..segment_end], marked, &mut subgoals);
        let Some(script) = script else { break };
        if !script.closed {
            warnings.push("<script> was not closed".to_owned());
        }
        let task = body[script.body.clone()].trim();
        if task.is_empty() {
            warnings.push("an empty <script> was skipped".to_owned());
        } else {
            subgoals.push(Subgoal {
                index: 0,
                text: task.to_owned(),
                kind: SubgoalKind::Script(task.to_owned()),
            });
        }
        pos = script.end.max(pos + 1);
    }
    for (i, subgoal) in subgoals.iter_mut().enumerate() {
        subgoal.index = i + 1;
    }
    (subgoals, warnings)
}

fn push_lines(segment: &str, marked: bool, subgoals: &mut Vec<Subgoal>) {
    for line in segment.lines() {
        let (has_marker, rest) = strip_marker(line);
        // "2. - Tap" has two markers; drop both.
        let rest = if has_marker {
            strip_marker(rest).1
        } else {
            rest
        };
        let rest = rest.trim();
        if rest.is_empty() || is_done(rest) {
            continue;
        }
        if let Some(task) = text_task(rest) {
            subgoals.push(Subgoal {
                index: 0,
                text: rest.to_owned(),
                kind: SubgoalKind::TextTask(task.to_owned()),
            });
            continue;
        }
        let continues = marked && !has_marker;
        match subgoals.last_mut() {
            Some(last) if continues && last.kind == SubgoalKind::Action => {
                last.text.push(' ');
                last.text.push_str(rest);
            }
            Some(Subgoal {
                kind: SubgoalKind::TextTask(task),
                text,
                ..
            }) if continues => {
                text.push('\n');
                text.push_str(rest);
                task.push('\n');
                task.push_str(rest);
            }
            _ => subgoals.push(Subgoal {
                index: 0,
                text: rest.to_owned(),
                kind: SubgoalKind::Action,
            }),
        }
    }
}

fn is_done(item: &str) -> bool {
    let word = item.trim_matches(|c: char| c == '*' || c == '_' || c == '.' || c == '!');
    word.eq_ignore_ascii_case("done")
}

/// The task after a `TEXT_TASK:` prefix (emphasis such as `**TEXT_TASK:**` allowed).
fn text_task(item: &str) -> Option<&str> {
    let item = item.trim_start_matches(['*', '_', '`']);
    let head = item.get(..9)?;
    if !head.eq_ignore_ascii_case("text_task") {
        return None;
    }
    let rest = item[9..].trim_start_matches(['*', '_', '`', ' ']);
    let rest = rest.strip_prefix(':')?;
    Some(rest.trim_start_matches(['*', '_', '`']).trim())
}

/// Removes a list marker: (whether there was one, the rest of the line).
fn strip_marker(line: &str) -> (bool, &str) {
    let s = line.trim_start();
    // Bullets.
    for bullet in ["- ", "* ", "+ ", "• ", "– "] {
        if let Some(rest) = s.strip_prefix(bullet) {
            return (true, strip_checkbox(rest));
        }
    }
    // "Step 3:" / "Step 3."
    let mut t = s;
    if t.get(..4).is_some_and(|w| w.eq_ignore_ascii_case("step")) {
        t = t[4..].trim_start();
    }
    // "(3)"
    let parenthesised = t.starts_with('(');
    if parenthesised {
        t = &t[1..];
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 3 {
        return (false, s);
    }
    let after = &t[digits..];
    let after = if parenthesised {
        match after.strip_prefix(')') {
            Some(a) => a,
            None => return (false, s),
        }
    } else {
        match after.strip_prefix(['.', ')', ':']) {
            Some(a) => a,
            None => return (false, s),
        }
    };
    if after.is_empty() || after.starts_with(char::is_whitespace) {
        (true, strip_checkbox(after.trim_start()))
    } else {
        (false, s)
    }
}

fn strip_checkbox(rest: &str) -> &str {
    for box_ in ["[ ] ", "[x] ", "[X] "] {
        if let Some(r) = rest.strip_prefix(box_) {
            return r;
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        for (line, rest) in [
            ("1. Open Settings", "Open Settings"),
            ("  12) Tap Wi-Fi", "Tap Wi-Fi"),
            ("3: Wait", "Wait"),
            ("(4) Go back", "Go back"),
            ("Step 5: Swipe up", "Swipe up"),
            ("- Open Notes", "Open Notes"),
            ("* [x] Type the title", "Type the title"),
            ("• Send", "Send"),
        ] {
            assert_eq!(strip_marker(line), (true, rest), "{line}");
        }
        for line in [
            "1.5 litres of water",
            "Open it",
            "2024-01-15 is today",
            "-5 degrees",
        ] {
            assert!(!strip_marker(line).0, "{line}");
        }
    }

    #[test]
    fn text_task_prefixes() {
        assert_eq!(text_task("TEXT_TASK: Add a title"), Some("Add a title"));
        assert_eq!(text_task("**TEXT_TASK:** Add a title"), Some("Add a title"));
        assert_eq!(text_task("text_task : trim it"), Some("trim it"));
        assert_eq!(text_task("TEXT_TASKS are nice"), None);
        assert_eq!(text_task("Type it"), None);
    }
}
