//! Fields a secret was typed into stay masked in every later read of the device.
//!
//! A phone masks a password field itself, but a secret typed into an ordinary field (a PIN
//! box, a search field) would come back in the next UI dump and reach the next prompt. The
//! device service remembers each such field (by resource id and class, or by bounds when it
//! has no id) and a salted digest of the secret, never the secret, and masks both in every
//! dump it parses afterwards: the field's text, and any element whose text is exactly the
//! secret, become one `•` per character, as Android shows a password. Masks stay with the
//! device while the service runs (the next lease's holder must not read the field either),
//! at most [`MAX_FIELDS`] per device, the oldest dropped first.
use std::collections::VecDeque;
use std::sync::Mutex;

use droidmesh_proto::v1::{Bounds, UiElement};
use sha1::{Digest, Sha1};

use crate::ui_dump::ParsedUi;

/// Masked fields kept per device.
pub const MAX_FIELDS: usize = 16;

/// The character Android shows for each character of a password.
pub const BULLET: char = '\u{2022}';

#[derive(Debug, PartialEq, Eq)]
enum Key {
    Id {
        resource_id: String,
        class_name: String,
    },
    Place(Bounds),
    /// No field was focused: only the secret's text is matched.
    None,
}

#[derive(Debug)]
struct Masked {
    key: Key,
    digest: [u8; 20],
}

#[derive(Debug)]
pub struct SecretFields {
    salt: [u8; 16],
    masked: Mutex<VecDeque<Masked>>,
}

impl Default for SecretFields {
    fn default() -> Self {
        Self {
            salt: *uuid::Uuid::new_v4().as_bytes(),
            masked: Mutex::new(VecDeque::new()),
        }
    }
}

impl SecretFields {
    fn digest(&self, text: &str) -> [u8; 20] {
        let mut h = Sha1::new();
        h.update(self.salt);
        h.update(text.as_bytes());
        h.finalize().into()
    }

    /// Remembers that `secret` was typed into `field` (the element focused afterwards).
    pub fn remember(&self, field: Option<&UiElement>, secret: &str) {
        let key = match field {
            Some(e) if !e.resource_id.is_empty() => Key::Id {
                resource_id: e.resource_id.clone(),
                class_name: e.class_name.clone(),
            },
            Some(e) => e.bounds.map_or(Key::None, Key::Place),
            None => Key::None,
        };
        let masked = Masked {
            key,
            digest: self.digest(secret),
        };
        let mut all = self.masked.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|m| m.key != masked.key || m.key == Key::None && m.digest != masked.digest);
        if all.len() >= MAX_FIELDS {
            all.pop_front();
        }
        all.push_back(masked);
    }

    /// Masks the remembered fields, and any text equal to a remembered secret, in `ui`.
    pub fn apply(&self, ui: &mut ParsedUi) {
        let all = self.masked.lock().unwrap_or_else(|p| p.into_inner());
        if all.is_empty() {
            return;
        }
        for e in &mut ui.elements {
            if e.text.is_empty() {
                continue;
            }
            let digest = self.digest(&e.text);
            let hit = all.iter().any(|m| {
                m.digest == digest
                    || match &m.key {
                        Key::Id {
                            resource_id,
                            class_name,
                        } => &e.resource_id == resource_id && &e.class_name == class_name,
                        Key::Place(b) => e.resource_id.is_empty() && e.bounds.as_ref() == Some(b),
                        Key::None => false,
                    }
            });
            if hit {
                e.text = BULLET.to_string().repeat(e.text.chars().count());
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn field(id: &str, text: &str, top: i32) -> UiElement {
        UiElement {
            class_name: "android.widget.EditText".into(),
            resource_id: id.into(),
            text: text.into(),
            bounds: Some(Bounds {
                left: 0,
                top,
                right: 100,
                bottom: top + 50,
            }),
            ..UiElement::default()
        }
    }

    fn masked(fields: &SecretFields, elements: Vec<UiElement>) -> Vec<String> {
        let mut ui = ParsedUi {
            elements,
            focused_index: None,
            total_nodes: 0,
        };
        fields.apply(&mut ui);
        ui.elements.into_iter().map(|e| e.text).collect()
    }

    #[test]
    fn the_field_and_the_secret_anywhere_are_masked_and_nothing_else() {
        let f = SecretFields::default();
        f.remember(Some(&field("app:id/pin", "4711", 0)), "4711");
        let texts = masked(
            &f,
            vec![
                field("app:id/pin", "47119", 0),
                field("", "4711", 100),
                field("app:id/name", "Ada", 200),
            ],
        );
        assert_eq!(texts, ["•••••", "••••", "Ada"]);
    }

    #[test]
    fn a_field_without_an_id_is_known_by_its_place_and_the_list_is_bounded() {
        let f = SecretFields::default();
        f.remember(Some(&field("", "s3cret", 300)), "s3cret");
        assert_eq!(masked(&f, vec![field("", "changed", 300)]), ["•••••••"]);
        for i in 0..MAX_FIELDS {
            f.remember(Some(&field(&format!("id/{i}"), "x", 0)), &format!("v{i}"));
        }
        // The oldest (the field at 300) was dropped; the newest are kept.
        assert_eq!(masked(&f, vec![field("", "changed", 300)]), ["changed"]);
        assert_eq!(masked(&f, vec![field("id/15", "typed", 0)]), ["•••••"]);
    }
}
