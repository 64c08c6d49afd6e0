//! Forms over a phone's records: a screen's edit fields start from templates when it opens
//! (an edit form from the record it was opened for, a new-record form empty), and buttons add,
//! update or delete records ([`crate::apps::Action`]'s record actions), so the apps change
//! their data the way a person does and a check reads it back through a provider.
use crate::apps::{Action, Assign, Widget};
use crate::device::Device;
use crate::records::{Record, id_of};

impl Device {
    /// The record set and `_id` of the record the screen in front was opened from: the list
    /// it came from is, going down the back stack within the app, the first list whose rows
    /// open the screen above it (a screen may hold several lists, each opening its own).
    pub(crate) fn current_source(&self) -> Option<(usize, String, u64)> {
        self.source_at(self.stack.len().checked_sub(1)?)
    }

    /// [`Device::current_source`] for the frame at `at` in the back stack. A list's source may
    /// name `{item:..}` of the record its own screen is about (a folder's files:
    /// `dir:{item:path}`), filled from the frame below it.
    fn source_at(&self, at: usize) -> Option<(usize, String, u64)> {
        let frames = self.stack.get(..=at)?;
        let top = frames.last()?;
        let id = u64::try_from(top.item?).ok()?;
        let app = self.apps.apps.get(top.app)?;
        let depth = frames.iter().rev().take_while(|f| f.app == top.app).count();
        (1..depth).find_map(|back| {
            let above = frames.get(at + 1 - back)?;
            let below = frames.get(at - back)?;
            let opened = &app.screens.get(above.screen)?.id;
            let source = app
                .screens
                .get(below.screen)?
                .widgets
                .iter()
                .find_map(|w| match w {
                    Widget::List { source, goto, .. } if goto == opened => Some(source.as_str()),
                    _ => None,
                })?;
            let source = if source.contains('{') {
                let record = self.record_at(at - back);
                self.expand_with(source, record.as_deref())
            } else {
                source.to_owned()
            };
            Some((top.app, source, id))
        })
    }

    /// The list record the frame at `at` was opened from.
    pub(crate) fn record_at(&self, at: usize) -> Option<std::borrow::Cow<'_, Record>> {
        let (app, source, id) = self.source_at(at)?;
        match crate::dirs::folder(&source) {
            Some(dir) => self.folder_file(dir, id).map(std::borrow::Cow::Owned),
            None => self
                .records
                .get(app, &source, id)
                .map(std::borrow::Cow::Borrowed),
        }
    }

    /// Whether the widget shows on the screen in front: always, unless its `when` names
    /// values the record the screen is about must hold.
    pub(crate) fn shown(&self, w: &Widget) -> bool {
        let Some(when) = w.when().filter(|w| !w.is_empty()) else {
            return true;
        };
        let Some(record) = self.current_record() else {
            return false;
        };
        when.iter()
            .all(|(column, values)| record.get(column).is_some_and(|v| values.contains(v)))
    }

    /// Fills the fields that have a `value` on the screen in front: called as it opens.
    pub(crate) fn open_form(&mut self) {
        let top = self.top();
        let Some(screen) = self
            .apps
            .apps
            .get(top.app)
            .and_then(|a| a.screens.get(top.screen))
        else {
            return;
        };
        let starts: Vec<(String, String)> = screen
            .widgets
            .iter()
            .filter_map(|w| match w {
                Widget::Edit {
                    id, value: Some(v), ..
                } => Some((self.field_key(id), self.expand(v))),
                _ => None,
            })
            .collect();
        self.fields.extend(starts);
    }

    fn status(&mut self, text: String) {
        let key = self.field_key("status");
        self.fields.insert(key, text);
    }

    fn filled(&self, set: &[Assign]) -> Record {
        set.iter()
            .map(|(column, template)| (column.clone(), self.expand(template)))
            .collect()
    }

    /// Runs a record action; `false` stops the actions after it (the `status` field says why).
    pub(crate) fn act_on_records(&mut self, action: &Action) -> bool {
        let app = self.top().app;
        let done = match action {
            Action::Need { fields } => {
                let empty = fields.iter().find(|f| {
                    self.fields
                        .get(&self.field_key(f))
                        .is_none_or(|v| v.trim().is_empty())
                });
                match empty {
                    Some(f) => Err(format!("{} is empty", self.hint(f))),
                    None => Ok(()),
                }
            }
            Action::AddRecord { source, set } if crate::dirs::folder(source).is_some() => {
                let record = self.filled(set);
                let source = self.expand(source);
                let dir = crate::dirs::folder(&source).unwrap_or_default().to_owned();
                self.add_file(&dir, &record)
            }
            Action::AddRecord { source, set } => {
                let record = self.filled(set);
                self.records
                    .add(app, source, record)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Action::PutRecord {
                source,
                set,
                insert_only,
            } => {
                let record = self.filled(set);
                let key = set.first().map(|(c, _)| c.clone()).unwrap_or_default();
                let value = record.get(&key).cloned();
                let existing = self
                    .records
                    .rows(app, source)
                    .iter()
                    .find(|r| r.get(&key) == value.as_ref())
                    .and_then(id_of);
                match existing {
                    Some(id) => {
                        let changes: Vec<(String, Option<String>)> =
                            record.into_iter().map(|(k, v)| (k, Some(v))).collect();
                        self.records
                            .update(app, source, &changes, |r| id_of(r) == Some(id))
                            .map(drop)
                            .map_err(|e| e.to_string())
                    }
                    None => {
                        let mut record = record;
                        record.extend(self.filled(insert_only));
                        self.records
                            .add(app, source, record)
                            .map(drop)
                            .map_err(|e| e.to_string())
                    }
                }
            }
            Action::UpdateRecord { set } => match self.current_source() {
                Some((_, source, id)) if crate::dirs::folder(&source).is_some() => {
                    let dir = crate::dirs::folder(&source).unwrap_or_default().to_owned();
                    let changes = self.filled(set);
                    self.update_file(&dir, id, &changes)
                }
                Some((app, source, id)) => {
                    let changes: Vec<(String, Option<String>)> = self
                        .filled(set)
                        .into_iter()
                        .map(|(k, v)| (k, Some(v)))
                        .collect();
                    self.records
                        .update(app, &source, &changes, |r| id_of(r) == Some(id))
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
                None => Err("this screen shows no record".into()),
            },
            Action::DeleteRecord => match self.current_source() {
                Some((_, source, id)) if crate::dirs::folder(&source).is_some() => {
                    let dir = crate::dirs::folder(&source).unwrap_or_default().to_owned();
                    self.delete_file(&dir, id)
                }
                Some((app, source, id)) => self
                    .records
                    .delete(app, &source, |r| id_of(r) == Some(id))
                    .map(drop)
                    .map_err(|e| e.to_string()),
                None => Err("this screen shows no record".into()),
            },
            _ => Ok(()),
        };
        match done {
            Ok(()) => true,
            Err(why) => {
                self.status(format!("Could not save: {why}"));
                false
            }
        }
    }

    /// What the field `id` on the screen in front is called (its hint), else its id.
    fn hint(&self, id: &str) -> String {
        let top = self.top();
        self.apps
            .apps
            .get(top.app)
            .and_then(|a| a.screens.get(top.screen))
            .and_then(|s| {
                s.widgets.iter().find_map(|w| match w {
                    Widget::Edit { id: i, hint, .. } if i == id && !hint.is_empty() => {
                        Some(hint.clone())
                    }
                    _ => None,
                })
            })
            .unwrap_or_else(|| id.to_owned())
    }
}
