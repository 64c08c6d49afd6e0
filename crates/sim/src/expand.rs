//! Text on screens: the templates app files write (`{prop:..}`, `{setting:..}`, `{field:..}`,
//! `{item:..}`, `{clock:ms}`) filled from the phone's state and the record a screen is about.
use std::borrow::Cow;

use crate::device::Device;
use crate::records::Record;

impl Device {
    /// Resolves `{prop:..}`, `{setting:ns:key}`, `{field:id}`, `{item:name}` and `{clock:ms}`
    /// (the phone's time in ms) in `text`,
    /// items from the record the current screen was opened from.
    pub fn expand(&self, text: &str) -> String {
        self.expand_with(text, self.current_record().as_deref())
    }

    /// The list record the screen in front was opened from.
    pub(crate) fn current_record(&self) -> Option<Cow<'_, Record>> {
        self.record_at(self.stack.len().checked_sub(1)?)
    }

    /// [`Device::expand`] with `{item:..}` taken from `record`.
    pub fn expand_with(&self, text: &str, record: Option<&Record>) -> String {
        if !text.contains('{') {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                out.push_str(&rest[open..]);
                return out;
            };
            let name = &after[..close];
            let value = if let Some(p) = name.strip_prefix("prop:") {
                self.props.get(p).cloned().unwrap_or_default()
            } else if let Some(s) = name.strip_prefix("setting:") {
                self.settings
                    .get(s)
                    .cloned()
                    .unwrap_or_else(|| "null".into())
            } else if let Some(f) = name.strip_prefix("field:") {
                self.fields
                    .get(&self.field_key(f))
                    .cloned()
                    .unwrap_or_default()
            } else if name == "clock:ms" {
                self.clock.now_ms().to_string()
            } else if let Some(f) = name.strip_prefix("item:") {
                record.and_then(|r| r.get(f)).cloned().unwrap_or_default()
            } else {
                format!("{{{name}}}")
            };
            out.push_str(&value);
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The records of set `source` of the app in front.
    pub fn records(&self, source: &str) -> &[Record] {
        self.records.rows(self.top().app, source)
    }
}
