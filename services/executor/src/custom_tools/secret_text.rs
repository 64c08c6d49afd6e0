//! Configured text with `{secret:ID}` placeholders (a webhook's header value, an MCP server's
//! environment variable), filled from the executor's secrets when it is used. A filled value
//! is never shown: errors name the secret's id, and every secret a filled text holds is cut
//! out of whatever comes back ([`redact`]).
use crate::secrets::Secrets;

/// Longest secret id.
const MAX_ID: usize = 100;
const OPEN: &str = "{secret:";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Secret(String),
}

/// One configured text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretText {
    parts: Vec<Part>,
}

impl SecretText {
    /// Reads `value`; the error says what is wrong, worded to follow the value's key.
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = value;
        while let Some(at) = rest.find(OPEN) {
            if at > 0 {
                parts.push(Part::Text(rest[..at].to_owned()));
            }
            let after = &rest[at + OPEN.len()..];
            let Some(end) = after.find('}') else {
                return Err("has a `{secret:` without its closing `}`".into());
            };
            let id = &after[..end];
            let valid = !id.is_empty()
                && id.len() <= MAX_ID
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "names a secret `{}` that is not an id (1 to {MAX_ID} letters, digits or `_`)",
                    droidmesh_proto::text::shorten(id, 40)
                ));
            }
            parts.push(Part::Secret(id.to_owned()));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Self { parts })
    }

    /// The secret ids the text names.
    pub fn secret_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Secret(id) => Some(id.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The text with each secret as `x`: its shape, for checks made before any secret is read.
    pub fn sample(&self) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.as_str(),
                Part::Secret(_) => "x",
            })
            .collect()
    }

    /// The text filled from `secrets` as they are now (a renewed secret file is used at once);
    /// each secret put in is added to `used`, as written and as a JSON string holds it. The
    /// error says which secret is missing, never a value.
    pub fn fill(&self, secrets: &Secrets, used: &mut Vec<String>) -> Result<String, String> {
        let mut value = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => value.push_str(t),
                Part::Secret(id) => {
                    let found = secrets
                        .for_request(std::slice::from_ref(id))
                        .map_err(|e| e.to_string())?;
                    let secret = found.into_values().next().unwrap_or_default();
                    if !secret.is_empty() {
                        // As written in a JSON string too, where `"`, `\` and controls are
                        // escaped.
                        let escaped = serde_json::to_string(&secret).unwrap_or_default();
                        let escaped = escaped.trim_matches('"');
                        if escaped != secret {
                            used.push(escaped.to_owned());
                        }
                        used.push(secret.clone());
                    }
                    value.push_str(&secret);
                }
            }
        }
        Ok(value)
    }
}

/// `text` with every secret in `secrets` replaced by `[REDACTED]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for secret in secrets {
        if !secret.is_empty() && out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "[REDACTED]");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn placeholders_are_filled_and_every_form_of_a_secret_is_cut_out() {
        let t = SecretText::parse("Bearer {secret:tok} and {secret:q}.").unwrap();
        assert_eq!(t.secret_ids().collect::<Vec<_>>(), ["tok", "q"]);
        assert_eq!(t.sample(), "Bearer x and x.");
        let secrets = Secrets::from(HashMap::from([
            ("tok".to_owned(), "s3cr3t".to_owned()),
            ("q".to_owned(), "a\"b".to_owned()),
        ]));
        let mut used = Vec::new();
        assert_eq!(
            t.fill(&secrets, &mut used).unwrap(),
            "Bearer s3cr3t and a\"b."
        );
        assert_eq!(used, ["s3cr3t", "a\\\"b", "a\"b"]);
        assert_eq!(
            redact(r#"{"echo": "a\"b s3cr3t"} a"b"#, &used),
            r#"{"echo": "[REDACTED] [REDACTED]"} [REDACTED]"#
        );
        let e = SecretText::parse("{secret:other}")
            .unwrap()
            .fill(&secrets, &mut used)
            .unwrap_err();
        assert!(e.contains("'other'") && !e.contains("s3cr3t"), "{e}");
    }

    #[test]
    fn a_malformed_placeholder_is_refused_with_what_is_wrong() {
        let err = |v: &str| SecretText::parse(v).unwrap_err();
        assert!(err("Bearer {secret:tok").contains("closing"));
        assert!(err("{secret:}").contains("not an id"));
        assert!(err("{secret:a-b}").contains("not an id"));
        assert_eq!(
            SecretText::parse("{literal braces}").unwrap().sample(),
            "{literal braces}"
        );
    }
}
