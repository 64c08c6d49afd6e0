//! A webhook's header values: literal text with `{secret:ID}` placeholders, filled from the
//! executor's secrets at each call. A filled value is sent and never shown: errors name the
//! header and the secret's id, never the value.
use reqwest::header::{HeaderName, HeaderValue};

use super::secret_text::SecretText;
use crate::secrets::Secrets;

pub use super::secret_text::redact;

/// One configured header.
#[derive(Debug, Clone)]
pub struct HeaderTemplate {
    pub name: HeaderName,
    value: SecretText,
}

/// A header filled for one call: what is sent, and the secret values it holds (to be cut out
/// of whatever comes back).
#[derive(Debug)]
pub struct Filled {
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub secrets: Vec<String>,
}

impl HeaderTemplate {
    /// Reads `name = value`; the error is worded to follow the header's key.
    pub fn parse(name: &str, value: &str) -> Result<Self, String> {
        let header = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| "is not a valid header name".to_owned())?;
        if header == reqwest::header::HOST || header == reqwest::header::CONTENT_LENGTH {
            return Err("is set from the request itself and cannot be configured".into());
        }
        let value = SecretText::parse(value)?;
        HeaderValue::from_str(&value.sample())
            .map_err(|_| "has characters a header value cannot hold".to_owned())?;
        Ok(Self {
            name: header,
            value,
        })
    }

    /// The secret ids the value names.
    pub fn secret_ids(&self) -> impl Iterator<Item = &str> {
        self.value.secret_ids()
    }
}

/// Fills `templates` from `secrets` as they are now (a renewed secret file is used at once).
pub fn fill(templates: &[HeaderTemplate], secrets: &Secrets) -> Result<Filled, String> {
    let mut filled = Filled {
        headers: Vec::with_capacity(templates.len()),
        secrets: Vec::new(),
    };
    for template in templates {
        let value = template
            .value
            .fill(secrets, &mut filled.secrets)
            .map_err(|e| format!("the header {} cannot be filled: {e}", template.name))?;
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            format!(
                "the header {} holds characters a header value cannot hold once its secrets are put in",
                template.name
            )
        })?;
        value.set_sensitive(true);
        filled.headers.push((template.name.clone(), value));
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn placeholders_are_filled_from_the_secrets_and_never_shown() {
        let t = HeaderTemplate::parse("Authorization", "Bearer {secret:weather_token}").unwrap();
        assert_eq!(t.secret_ids().collect::<Vec<_>>(), ["weather_token"]);
        let secrets = Secrets::from(HashMap::from([(
            "WEATHER_TOKEN".to_owned(),
            "s3cr3t".to_owned(),
        )]));
        let filled = fill(std::slice::from_ref(&t), &secrets).unwrap();
        assert_eq!(filled.headers[0].1, "Bearer s3cr3t");
        assert!(filled.headers[0].1.is_sensitive());
        assert_eq!(filled.secrets, ["s3cr3t"]);
        assert_eq!(
            redact("got Bearer s3cr3t twice: s3cr3t", &filled.secrets),
            "got Bearer [REDACTED] twice: [REDACTED]"
        );
        let quoted = Secrets::from(HashMap::from([("q".to_owned(), "a\"b".to_owned())]));
        let t = HeaderTemplate::parse("X-Key", "{secret:q}").unwrap();
        let filled_q = fill(&[t], &quoted).unwrap();
        assert_eq!(
            redact(r#"{"echo": "a\"b"} a"b"#, &filled_q.secrets),
            r#"{"echo": "[REDACTED]"} [REDACTED]"#
        );
        let other = HeaderTemplate::parse("X-Key", "{secret:other}").unwrap();
        let e = fill(&[other], &secrets).unwrap_err();
        assert!(
            e.starts_with("the header x-key cannot be filled: ") && e.contains("'other'"),
            "{e}"
        );
    }

    #[test]
    fn bad_headers_are_refused_with_what_is_wrong() {
        let err = |n: &str, v: &str| HeaderTemplate::parse(n, v).unwrap_err();
        assert_eq!(err("a b", "x"), "is not a valid header name");
        assert!(err("Host", "x").contains("cannot be configured"));
        assert!(err("X", "Bearer {secret:tok").contains("closing"));
        assert!(err("X", "{secret:}").contains("not an id"));
        assert!(err("X", "{secret:a-b}").contains("not an id"));
        assert!(err("X", "a\nb").contains("cannot hold"));
        assert!(HeaderTemplate::parse("Accept", "application/json").is_ok());
        assert!(HeaderTemplate::parse("X", "{literal braces}").is_ok());
    }
}
