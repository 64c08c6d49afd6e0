//! Task files: one TOML file per family of tasks, each `[[task]]` a template with a goal, its
//! parameters, the shell commands that set up its initial state, a step budget, its check, and
//! its oracle (a scripted solution, one CodeAct block per step). A file is checked whole when it
//! loads, and every problem names the file and the field.
use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::check::Check;
use crate::params::{self, ParamSpec, Rng, Values};
use crate::render::render;

/// Most steps a task may budget.
pub const MAX_STEPS: u32 = 100;

/// A problem with a task file, naming the file and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct SuiteError {
    pub file: String,
    pub field: String,
    pub message: String,
}

/// One task template as a file writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    /// Unique in its family; the template's full id is `family/id`.
    pub id: String,
    /// What the agent is asked, with `{{param}}` placeholders.
    pub goal: String,
    #[serde(default)]
    pub params: BTreeMap<String, ParamSpec>,
    /// Shell commands run on the freshly reset phone before the task starts.
    #[serde(default)]
    pub setup: Vec<String>,
    /// The step budget (about twice what a person needs).
    pub max_steps: u32,
    pub check: Check,
    /// A scripted solution: one CodeAct block per step.
    pub oracle: Vec<String>,
    /// A wrong solution the check must catch (a wrong value, the wrong record).
    #[serde(default)]
    pub near_miss: Vec<String>,
    /// The goal already holds when the task starts: an agent that does nothing succeeds, and
    /// one that changes the wrong thing fails.
    #[serde(default)]
    pub satisfied_at_start: bool,
}

/// A file's templates.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub description: String,
    /// Where it was read from (`builtin:settings.toml` for the suite in the binary).
    pub file: String,
    pub templates: Vec<Template>,
}

/// One task to run: a template with its seed's values filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// `family/template#seed`.
    pub id: String,
    /// `family/template`.
    pub template: String,
    pub seed: u64,
    pub values: Values,
    pub goal: String,
    pub setup: Vec<String>,
    pub max_steps: u32,
    pub check: Check,
    pub oracle: Vec<String>,
    pub near_miss: Vec<String>,
    pub satisfied_at_start: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHead {
    family: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    task: Vec<toml::Value>,
}

/// Reads one task file's text; `file` names it in errors.
pub fn parse_family(file: &str, text: &str) -> Result<Family, SuiteError> {
    let err = |field: String, message: String| SuiteError {
        file: file.to_owned(),
        field,
        message,
    };
    let head: FileHead = toml::from_str(text).map_err(|e| {
        err(
            "(file)".into(),
            e.to_string().lines().collect::<Vec<_>>().join(" "),
        )
    })?;
    if !is_name(&head.family) {
        return Err(err(
            "family".into(),
            format!("`{}` is not a name: use a-z, 0-9, _ and -", head.family),
        ));
    }
    if head.task.is_empty() {
        return Err(err("task".into(), "the file has no [[task]]".into()));
    }
    let mut templates: Vec<Template> = Vec::with_capacity(head.task.len());
    for (i, value) in head.task.into_iter().enumerate() {
        let label = value
            .get("id")
            .and_then(toml::Value::as_str)
            .map_or(format!("task[{i}]"), |id| format!("task[{i}] ({id})"));
        let t =
            Template::deserialize(value).map_err(|e| err(label.clone(), e.message().to_owned()))?;
        if let Some((field, message)) = problem(&t) {
            return Err(err(format!("{label}.{field}"), message));
        }
        if templates.iter().any(|o| o.id == t.id) {
            return Err(err(
                format!("{label}.id"),
                "another task of this file has the same id".into(),
            ));
        }
        templates.push(t);
    }
    Ok(Family {
        name: head.family,
        description: head.description,
        file: file.to_owned(),
        templates,
    })
}

/// Every `*.toml` file of `dir`, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Family>, SuiteError> {
    let shown = dir.display().to_string();
    let io = |e: std::io::Error| SuiteError {
        file: shown.clone(),
        field: "(directory)".into(),
        message: format!("cannot be read: {e}"),
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(SuiteError {
            file: shown,
            field: "(directory)".into(),
            message: "holds no .toml task files".into(),
        });
    }
    paths
        .iter()
        .map(|p| {
            let name = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|e| SuiteError {
                file: name.clone(),
                field: "(file)".into(),
                message: format!("cannot be read: {e}"),
            })?;
            parse_family(&name, &text)
        })
        .collect()
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The first problem of a template: the field and what is wrong.
fn problem(t: &Template) -> Option<(String, String)> {
    if !is_name(&t.id) {
        return Some((
            "id".into(),
            format!("`{}` is not a name: use a-z, 0-9, _ and -", t.id),
        ));
    }
    if t.goal.trim().is_empty() {
        return Some(("goal".into(), "is empty".into()));
    }
    if !(1..=MAX_STEPS).contains(&t.max_steps) {
        return Some((
            "max_steps".into(),
            format!("must be 1 to {MAX_STEPS}, got {}", t.max_steps),
        ));
    }
    if t.oracle.is_empty() {
        return Some(("oracle".into(), "is empty: give at least one step".into()));
    }
    for (name, spec) in &t.params {
        if let Some(p) = params::problem(spec) {
            return Some((format!("params.{name}"), p));
        }
    }
    if let Some(p) = t.check.problem() {
        return Some(("check".into(), p));
    }
    // Every placeholder must name a value: filled with the first value of each parameter
    // (the tables of one parameter have the same fields, so one sample shows them all).
    let sample: Values = t
        .params
        .iter()
        .map(|(n, s)| (n.clone(), sample(s)))
        .collect();
    let texts = std::iter::once(("goal".to_owned(), &t.goal))
        .chain(
            t.setup
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("setup[{i}]"), s)),
        )
        .chain(
            t.oracle
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("oracle[{i}]"), s)),
        )
        .chain(
            t.near_miss
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("near_miss[{i}]"), s)),
        );
    for (field, text) in texts {
        if let Err(e) = render(text, &sample) {
            return Some((field, e));
        }
    }
    t.check.render(&sample).err().map(|e| ("check".into(), e))
}

fn sample(spec: &ParamSpec) -> params::Value {
    match spec {
        ParamSpec::OneOf(choices) => match choices.first() {
            Some(params::Choice::Fields(f)) => params::Value::Fields(f.clone()),
            Some(params::Choice::Word(w)) => params::Value::Word(w.clone()),
            None => params::Value::Word(String::new()),
        },
        ParamSpec::Int([lo, _]) => params::Value::Word(lo.to_string()),
    }
}

impl Family {
    /// Instance `seed` of the template at `index`.
    pub fn instance(&self, index: usize, seed: u64) -> Result<Instance, SuiteError> {
        let t = self.templates.get(index).ok_or_else(|| SuiteError {
            file: self.file.clone(),
            field: format!("task[{index}]"),
            message: "no such task".into(),
        })?;
        let template = format!("{}/{}", self.name, t.id);
        let values = params::draw(&t.params, &mut Rng::for_instance(&template, seed));
        let err = |field: &str, message: String| SuiteError {
            file: self.file.clone(),
            field: format!("task[{index}] ({}).{field}", t.id),
            message,
        };
        let all = |texts: &[String], field: &str| -> Result<Vec<String>, SuiteError> {
            texts
                .iter()
                .map(|s| render(s, &values).map_err(|e| err(field, e)))
                .collect()
        };
        Ok(Instance {
            id: format!("{template}#{seed}"),
            seed,
            goal: render(&t.goal, &values).map_err(|e| err("goal", e))?,
            setup: all(&t.setup, "setup")?,
            oracle: all(&t.oracle, "oracle")?,
            near_miss: all(&t.near_miss, "near_miss")?,
            check: t.check.render(&values).map_err(|e| err("check", e))?,
            max_steps: t.max_steps,
            satisfied_at_start: t.satisfied_at_start,
            values,
            template,
        })
    }
}

/// Whether `name` matches `pattern` (`*` any run of characters, `?` one character); linear
/// in practice, at most `pattern × name` steps whatever the pattern.
pub fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // The last `*` seen and where in the name its match ends so far.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The instances to run: every template whose `family/id` matches one of `patterns` (all when
/// there are none), seeds `0..seeds` each, in file and template order.
pub fn select(
    families: &[Family],
    patterns: &[String],
    seeds: u64,
) -> Result<Vec<Instance>, SuiteError> {
    let mut out = Vec::new();
    for family in families {
        for (i, t) in family.templates.iter().enumerate() {
            let id = format!("{}/{}", family.name, t.id);
            if patterns.is_empty() || patterns.iter().any(|p| glob(p, &id)) {
                for seed in 0..seeds {
                    out.push(family.instance(i, seed)?);
                }
            }
        }
    }
    Ok(out)
}
