//! The apps of a simulated device, as data: loaded from TOML (the default set is embedded),
//! checked once at start so a bad file fails with a message rather than a broken screen.
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::SimError;

/// The embedded default app set.
pub const DEFAULT_APPS: &str = include_str!("../apps/default.toml");

/// Every app of a device and the settings it starts with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSet {
    /// Initial values of `settings`, keyed `namespace:key`.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    pub apps: Vec<App>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    pub package: String,
    pub label: String,
    /// Whether the launcher shows an icon for it.
    #[serde(default = "yes")]
    pub launcher: bool,
    pub screens: Vec<Screen>,
    /// Record sets that `list` widgets show, by name.
    #[serde(default)]
    pub data: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// How long its screens take to change when the simulator runs in real time.
    #[serde(default)]
    pub timing: Timing,
    /// Content providers over its record sets (`content query --uri …`).
    #[serde(default)]
    pub providers: Vec<crate::providers::Provider>,
}

/// An app's transition times, in milliseconds; used only when the simulator runs in real
/// time (`SimOptions::realtime`), else every change is instant.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// A launch shows the app's starting window this long before its first screen.
    #[serde(default)]
    pub launch_ms: u64,
    /// A screen opened from a row or a list item slides in over this long.
    #[serde(default)]
    pub open_ms: u64,
    /// A switch's setting changes this long after the tap.
    #[serde(default)]
    pub switch_ms: u64,
}

/// Longest transition an app file may ask for.
pub const MAX_TRANSITION_MS: u64 = 60_000;

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Screen {
    pub id: String,
    /// Activity class, `.Name` relative to the package or fully qualified.
    pub activity: String,
    #[serde(default)]
    pub title: String,
    /// Whether the screen has an app bar (the launcher has none).
    #[serde(default = "yes")]
    pub chrome: bool,
    /// In real time, the screen shows a progress spinner instead of its widgets this long
    /// after it appears (content fetched from a network).
    #[serde(default)]
    pub loading_ms: u64,
    pub widgets: Vec<Widget>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Widget {
    Text {
        #[serde(default)]
        id: String,
        #[serde(default)]
        text: String,
        /// Show this field's value instead of `text`.
        #[serde(default)]
        field: String,
        /// Content description (expanded like `text`), as an app labels a view for
        /// accessibility.
        #[serde(default)]
        desc: String,
    },
    Row {
        #[serde(default)]
        id: String,
        text: String,
        #[serde(default)]
        summary: String,
        #[serde(default)]
        goto: String,
        #[serde(default)]
        action: String,
    },
    Switch {
        #[serde(default)]
        id: String,
        text: String,
        #[serde(default)]
        summary: String,
        /// `namespace:key` of the setting the switch shows and flips.
        setting: String,
        #[serde(default = "one")]
        on: String,
        #[serde(default = "zero")]
        off: String,
    },
    /// A row with a slider over an integer setting: a touch or a drag sets it in proportion
    /// to where the finger is (`min` at the left end, `max` at the right).
    Slider {
        #[serde(default)]
        id: String,
        text: String,
        #[serde(default)]
        summary: String,
        setting: String,
        #[serde(default)]
        min: i64,
        max: i64,
    },
    /// A row with a radio button: checked while the setting holds `value`, a tap sets it (a
    /// screen of these is a picker).
    Radio {
        #[serde(default)]
        id: String,
        text: String,
        #[serde(default)]
        summary: String,
        setting: String,
        value: String,
    },
    Edit {
        id: String,
        #[serde(default)]
        hint: String,
        #[serde(default = "one_line")]
        lines: u32,
        #[serde(default)]
        password: bool,
        /// The text the field holds each time its screen opens (expanded like `text`, so
        /// `{item:COLUMN}` starts an edit form with the record's value); without it the
        /// field keeps what was typed.
        #[serde(default)]
        value: Option<String>,
    },
    Button {
        #[serde(default)]
        id: String,
        text: String,
        action: String,
    },
    List {
        #[serde(default)]
        id: String,
        source: String,
        text: String,
        #[serde(default)]
        summary: String,
        #[serde(default)]
        goto: String,
        /// Only records whose column equals the expanded template (`{ address =
        /// "{item:address}" }`).
        #[serde(default)]
        filter: BTreeMap<String, String>,
        /// Order by this column (`COLUMN` or `COLUMN DESC`); records' own order otherwise.
        #[serde(default)]
        sort: String,
    },
    Grid,
}

fn one() -> String {
    "1".into()
}
fn zero() -> String {
    "0".into()
}
fn one_line() -> u32 {
    1
}

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
            ["append", field, target] => Ok(Self::Append {
                field: (*field).into(),
                target: (*target).into(),
            }),
            ["back"] => Ok(Self::Back),
            _ => Err(format!(
                "unknown action '{s}': expected 'save FIELD PATH', 'clear FIELD', 'append FIELD TARGET', 'back', 'need FIELD...', 'add_record SET COLUMN=TEMPLATE...', 'put_record SET KEY=TEMPLATE [?]COLUMN=TEMPLATE...', 'update_record COLUMN=TEMPLATE...' or 'delete_record'"
            )),
        }
    }
}

impl AppSet {
    /// Parses and checks an app set.
    pub fn from_toml(text: &str) -> Result<Self, SimError> {
        let set: Self = toml::from_str(text).map_err(|e| SimError::Apps(e.to_string()))?;
        set.check().map_err(SimError::Apps)?;
        Ok(set)
    }

    /// The embedded default apps.
    pub fn default_set() -> Result<Self, SimError> {
        Self::from_toml(DEFAULT_APPS)
    }

    /// Index of the app with this package.
    pub fn app_index(&self, package: &str) -> Option<usize> {
        self.apps.iter().position(|a| a.package == package)
    }

    fn check(&self) -> Result<(), String> {
        if self
            .apps
            .first()
            .is_none_or(|a| !a.package.contains("launcher"))
        {
            return Err(
                "the first app must be the launcher (a package containing 'launcher')".into(),
            );
        }
        for key in self.settings.keys() {
            split_setting(key)?;
        }
        for app in &self.apps {
            let at = |what: String| format!("app {}: {what}", app.package);
            if app.screens.is_empty() {
                return Err(at("has no screens".into()));
            }
            let t = app.timing;
            let longest = [t.launch_ms, t.open_ms, t.switch_ms]
                .into_iter()
                .chain(app.screens.iter().map(|s| s.loading_ms))
                .max()
                .unwrap_or(0);
            if longest > MAX_TRANSITION_MS {
                return Err(at(format!(
                    "a transition of {longest} ms is longer than {MAX_TRANSITION_MS} ms"
                )));
            }
            for (name, rows) in &app.data {
                if rows.len() > crate::records::MAX_RECORDS {
                    return Err(at(format!(
                        "data '{name}' has {} records; at most {} are allowed",
                        rows.len(),
                        crate::records::MAX_RECORDS
                    )));
                }
            }
            for p in &app.providers {
                p.check(app).map_err(&at)?;
            }
            for screen in &app.screens {
                for w in &screen.widgets {
                    let target = match w {
                        Widget::Row { goto, action, .. } => {
                            if !action.is_empty() {
                                check_action(app, &Action::parse(action).map_err(&at)?)
                                    .map_err(&at)?;
                            }
                            goto
                        }
                        Widget::List { goto, source, .. } => {
                            if crate::dirs::folder(source).is_none()
                                && !app.data.contains_key(source)
                            {
                                return Err(at(format!(
                                    "list source '{source}' is not in its data"
                                )));
                            }
                            goto
                        }
                        Widget::Button { action, .. } => {
                            check_action(app, &Action::parse(action).map_err(&at)?).map_err(&at)?;
                            continue;
                        }
                        Widget::Switch { setting, .. } | Widget::Radio { setting, .. } => {
                            split_setting(setting).map_err(&at)?;
                            continue;
                        }
                        Widget::Slider {
                            setting, min, max, ..
                        } => {
                            split_setting(setting).map_err(&at)?;
                            if min >= max {
                                return Err(at(format!(
                                    "slider '{setting}' needs min < max, found {min} and {max}"
                                )));
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    if !target.is_empty() && !app.screens.iter().any(|s| &s.id == target) {
                        return Err(at(format!(
                            "screen '{}' goes to unknown screen '{target}'",
                            screen.id
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Refuses an action that names a record set the app does not have.
fn check_action(app: &App, action: &Action) -> Result<(), String> {
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

/// Splits `namespace:key`, checking the namespace.
pub fn split_setting(s: &str) -> Result<(&str, &str), String> {
    match s.split_once(':') {
        Some((ns @ ("global" | "secure" | "system"), key)) if !key.is_empty() => Ok((ns, key)),
        _ => Err(format!(
            "setting '{s}' must be global:KEY, secure:KEY or system:KEY"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_apps_load_and_have_what_the_tests_need() {
        let set = AppSet::default_set().unwrap();
        let settings = &set.apps[set.app_index("com.android.settings").unwrap()];
        assert!(
            settings.screens[0].widgets.len() > 12,
            "settings must scroll"
        );
        let contacts = &set.apps[set.app_index("com.android.contacts").unwrap()];
        assert!(contacts.data["contacts"].len() >= 30);
        assert!(set.app_index("com.droidmesh.notes").is_some());
    }

    #[test]
    fn bad_app_files_are_refused_with_a_reason() {
        let no_launcher = "[[apps]]\npackage = \"a.b\"\nlabel = \"A\"\n[[apps.screens]]\nid = \"m\"\nactivity = \".M\"\nwidgets = []\n";
        let err = AppSet::from_toml(no_launcher).unwrap_err().to_string();
        assert!(err.contains("launcher"), "{err}");
        let bad_goto = DEFAULT_APPS.replace("goto = \"display\"", "goto = \"nowhere\"");
        let err = AppSet::from_toml(&bad_goto).unwrap_err().to_string();
        assert!(err.contains("nowhere"), "{err}");
        assert!(AppSet::from_toml("apps = 3").is_err());
        assert!(Action::parse("launch rockets").is_err());
        for bad in [
            "add_record contacts",
            "add_record contacts name",
            "update_record ?name=x",
            "put_record conversations ?name=x",
            "need",
            &"back;".repeat(MAX_ACTIONS + 1),
        ] {
            assert!(Action::parse(bad).is_err(), "{bad}");
        }
        let unknown_set = DEFAULT_APPS.replace("add_record contacts", "add_record friends");
        let err = AppSet::from_toml(&unknown_set).unwrap_err().to_string();
        assert!(err.contains("'friends'"), "{err}");
        let bad_provider = DEFAULT_APPS.replace("source = \"sms\"", "source = \"mms\"");
        let err = AppSet::from_toml(&bad_provider).unwrap_err().to_string();
        assert!(
            err.contains("provider content://sms") && err.contains("'mms'"),
            "{err}"
        );
    }
}
