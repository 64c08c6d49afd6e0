//! What a button or row does when tapped, as the app files write it (`save FIELD PATH`,
//! `add_record SET COLUMN=TEMPLATE…`, `a; b`): parsed and checked once at load.
use crate::apps::App;

/// What a button or row does when tapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write the field's text to a file and report it in the `status` field.
    Save {
        field: String,
        path: String,
    },
    /// Empty a field.
    Clear {
        field: String,
    },
    /// Put the expanded template on the clipboard (a copy button).
    Copy {
        template: String,
    },
    /// Append a field's text as a new line of another field, then empty it.
    Append {
        field: String,
        target: String,
    },
    Back,
    /// Stop (the actions after it do not run) with a `status` line unless every field has text.
    Need {
        fields: Vec<String>,
    },
    /// Add a record to a set of this app, columns set from expanded templates.
    AddRecord {
        source: String,
        set: Vec<Assign>,
    },
    /// Update the first record of `source` whose first assigned column has that value, or add
    /// one; `insert_only` columns are set only when it is added.
    PutRecord {
        source: String,
        set: Vec<Assign>,
        insert_only: Vec<Assign>,
    },
    /// Change the record the screen was opened from.
    UpdateRecord {
        set: Vec<Assign>,
    },
    /// Delete the record the screen was opened from.
    DeleteRecord,
    /// Several actions in order (`a; b`), stopping at the first that fails.
    Seq(Vec<Action>),
}

/// `COLUMN=TEMPLATE`: a record column and the text (expanded like a widget's) it gets.
pub type Assign = (String, String);

/// Most actions one `;` sequence holds.
pub const MAX_ACTIONS: usize = 16;

fn assigns(words: &[&str], s: &str) -> Result<(Vec<Assign>, Vec<Assign>), String> {
    let mut set = Vec::new();
    let mut insert_only = Vec::new();
    for w in words {
        let (column, template) = w
            .split_once('=')
            .filter(|(c, _)| !c.is_empty())
            .ok_or_else(|| format!("action '{s}': expected COLUMN=TEMPLATE, found '{w}'"))?;
        match column.strip_prefix('?') {
            Some(c) if !c.is_empty() => insert_only.push((c.to_owned(), template.to_owned())),
            _ => set.push((column.to_owned(), template.to_owned())),
        }
    }
    Ok((set, insert_only))
}

impl Action {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.contains(';') {
            let parts: Vec<&str> = s.split(';').filter(|p| !p.trim().is_empty()).collect();
            if parts.len() > MAX_ACTIONS {
                return Err(format!(
                    "action '{s}' has {} steps; at most {MAX_ACTIONS} are allowed",
                    parts.len()
                ));
            }
            let steps = parts
                .into_iter()
                .map(Self::parse_one)
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Self::Seq(steps));
        }
        Self::parse_one(s)
    }

    fn parse_one(s: &str) -> Result<Self, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let plain = |w: &[&str]| -> Result<Vec<Assign>, String> {
            let (set, insert_only) = assigns(w, s)?;
            if insert_only.is_empty() {
                Ok(set)
            } else {
                Err(format!(
                    "action '{s}': only put_record takes ?COLUMN=TEMPLATE"
                ))
            }
        };
        match words.as_slice() {
            ["need", fields @ ..] if !fields.is_empty() => Ok(Self::Need {
                fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            }),
            ["add_record", source, rest @ ..] if !rest.is_empty() => Ok(Self::AddRecord {
                source: (*source).into(),
                set: plain(rest)?,
            }),
            ["put_record", source, rest @ ..] => {
                let (set, insert_only) = assigns(rest, s)?;
                if set.is_empty() {
                    return Err(format!(
                        "action '{s}': put_record needs a KEY=TEMPLATE first"
                    ));
                }
                Ok(Self::PutRecord {
                    source: (*source).into(),
                    set,
                    insert_only,
                })
            }
            ["update_record", rest @ ..] if !rest.is_empty() => {
                Ok(Self::UpdateRecord { set: plain(rest)? })
            }
            ["delete_record"] => Ok(Self::DeleteRecord),
            ["save", field, path] => Ok(Self::Save {
                field: (*field).into(),
                path: (*path).into(),
            }),
            ["clear", field] => Ok(Self::Clear {
                field: (*field).into(),
            }),
            ["copy", template] => Ok(Self::Copy {
                template: (*template).into(),
            }),
            ["append", field, target] => Ok(Self::Append {
                field: (*field).into(),
                target: (*target).into(),
            }),
            ["back"] => Ok(Self::Back),
            _ => Err(format!(
                "unknown action '{s}': expected 'save FIELD PATH', 'clear FIELD', 'copy TEMPLATE', 'append FIELD TARGET', 'back', 'need FIELD...', 'add_record SET COLUMN=TEMPLATE...', 'put_record SET KEY=TEMPLATE [?]COLUMN=TEMPLATE...', 'update_record COLUMN=TEMPLATE...' or 'delete_record'"
            )),
        }
    }
}

/// Refuses an action that names a record set the app does not have.
pub(crate) fn check_action(app: &App, action: &Action) -> Result<(), String> {
    match action {
        Action::AddRecord { source, .. }
            if crate::dirs::folder(source).is_none() && !app.data.contains_key(source) =>
        {
            Err(format!(
                "action names record set '{source}', which is not in its data"
            ))
        }
        Action::PutRecord { source, .. } if !app.data.contains_key(source) => Err(format!(
            "action names record set '{source}', which is not in its data"
        )),
        Action::Seq(steps) => steps.iter().try_for_each(|a| check_action(app, a)),
        _ => Ok(()),
    }
}
