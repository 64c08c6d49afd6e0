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
        /// Shown only while the record the screen is about holds one of the listed values
        /// in each named column (`when = { state = ["running"] }`); always when empty.
        #[serde(default)]
        when: When,
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
        /// Shown only while the record the screen is about holds one of the listed values
        /// in each named column (`when = { state = ["running"] }`); always when empty.
        #[serde(default)]
        when: When,
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
        /// Shown only while the record the screen is about holds one of the listed values
        /// in each named column (`when = { state = ["running"] }`); always when empty.
        #[serde(default)]
        when: When,
    },
    Button {
        #[serde(default)]
        id: String,
        text: String,
        action: String,
        /// Shown only while the record the screen is about holds one of the listed values
        /// in each named column (`when = { state = ["running"] }`); always when empty.
        #[serde(default)]
        when: When,
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

/// A widget's condition: column → the values that show it.
pub type When = BTreeMap<String, Vec<String>>;

impl Widget {
    /// The condition the widget is shown under (empty: always).
    pub fn when(&self) -> Option<&When> {
        match self {
            Widget::Text { when, .. }
            | Widget::Row { when, .. }
            | Widget::Edit { when, .. }
            | Widget::Button { when, .. } => Some(when),
            _ => None,
        }
    }
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

pub use crate::actions::{Action, Assign, MAX_ACTIONS};

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
                    if let Some((column, _)) =
                        w.when().into_iter().flatten().find(|(_, v)| v.is_empty())
                    {
                        return Err(at(format!(
                            "screen '{}': when.{column} lists no values: give at least one",
                            screen.id
                        )));
                    }
                    let target = match w {
                        Widget::Row { goto, action, .. } => {
                            if !action.is_empty() {
                                crate::actions::check_action(
                                    app,
                                    &Action::parse(action).map_err(&at)?,
                                )
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
                            crate::actions::check_action(app, &Action::parse(action).map_err(&at)?)
                                .map_err(&at)?;
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
            "copy",
            "copy {item:a} {item:b}",
            &"back;".repeat(MAX_ACTIONS + 1),
        ] {
            assert!(Action::parse(bad).is_err(), "{bad}");
        }
        let unknown_set = DEFAULT_APPS.replace("add_record contacts", "add_record friends");
        let err = AppSet::from_toml(&unknown_set).unwrap_err().to_string();
        assert!(err.contains("'friends'"), "{err}");
        assert_eq!(
            Action::parse("copy {item:number}"),
            Ok(Action::Copy {
                template: "{item:number}".into()
            })
        );
        let never_shown =
            DEFAULT_APPS.replace("when = { state = [\"paused\"] }", "when = { state = [] }");
        let err = AppSet::from_toml(&never_shown).unwrap_err().to_string();
        assert!(
            err.contains("screen 'timer': when.state lists no values"),
            "{err}"
        );
        let bad_provider = DEFAULT_APPS.replace("source = \"sms\"", "source = \"mms\"");
        let err = AppSet::from_toml(&bad_provider).unwrap_err().to_string();
        assert!(
            err.contains("provider content://sms") && err.contains("'mms'"),
            "{err}"
        );
    }
}
