//! Structured output: JSON pulled from a reply and validated against the caller's JSON Schema.
//!
//! Candidates are tried in order until one validates: the whole reply as JSON, then the
//! contents of each fenced block, then every object or array found in the prose, all read
//! leniently (see [`super::json`]), and last the whole reply as a string (for schemas that want
//! one). When none validates, the errors of the first JSON candidate are returned, each with
//! its JSON pointer, so the caller can show them to the model and retry.

use std::fmt;

use jsonschema::Validator;
use serde_json::Value;

use super::json::{find_json_values, parse_lenient};

/// Why no valid structured output could be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StructuredError {
    /// The schema itself is not a valid JSON Schema.
    #[error("invalid JSON Schema: {0}")]
    InvalidSchema(String),
    /// The reply holds no JSON at all.
    #[error("expected a JSON value matching the schema, found no JSON in the reply")]
    NoJson,
    /// JSON was found but does not match the schema.
    #[error("the JSON does not match the schema: {}", list(.errors))]
    Invalid {
        /// The JSON that was checked (the first candidate found).
        value: Value,
        /// What is wrong with it, one entry per violation.
        errors: Vec<Violation>,
    },
}

/// One schema violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer to the offending value (`/items/0/name`), empty for the root.
    pub path: String,
    /// What is wrong, e.g. `"22" is not of type "integer"`.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(root)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

fn list(errors: &[Violation]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks that `schema` is a JSON Schema this crate can validate against (no remote `$ref`s).
/// Meant for refusing a bad schema before a task starts.
pub fn validate_schema(schema: &Value) -> Result<(), String> {
    OutputSchema::new(schema).map(|_| ()).map_err(|e| match e {
        StructuredError::InvalidSchema(message) => message,
        other => other.to_string(),
    })
}

/// Compiles `schema`, pulls JSON out of `text` and validates it. Compile once with
/// [`OutputSchema`] when retrying.
pub fn structured_output(text: &str, schema: &Value) -> Result<Value, StructuredError> {
    OutputSchema::new(schema)?.extract(text)
}

/// A compiled output schema.
#[derive(Debug)]
pub struct OutputSchema {
    validator: Validator,
}

impl OutputSchema {
    /// Compiles a JSON Schema (draft detected from `$schema`, 2020-12 by default).
    pub fn new(schema: &Value) -> Result<Self, StructuredError> {
        if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
            return Err(StructuredError::InvalidSchema(format!(
                "expected an object or a boolean, found {}",
                crate::tools::json_type(schema)
            )));
        }
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|e| {
                let path = e.instance_path().as_str();
                StructuredError::InvalidSchema(if path.is_empty() {
                    e.to_string()
                } else {
                    format!("at {path}: {e}")
                })
            })
    }

    /// The violations of `value`, empty when it is valid.
    pub fn violations(&self, value: &Value) -> Vec<Violation> {
        self.validator
            .iter_errors(value)
            .map(|e| Violation {
                path: e.instance_path().as_str().to_owned(),
                message: e.to_string(),
            })
            .collect()
    }

    /// Pulls the first JSON value that validates out of `text`.
    pub fn extract(&self, text: &str) -> Result<Value, StructuredError> {
        let candidates = candidates(text);
        for candidate in &candidates {
            if self.validator.is_valid(candidate) {
                return Ok(candidate.clone());
            }
        }
        // A schema that wants a plain string accepts the reply itself.
        let whole = Value::String(text.trim().to_owned());
        if !text.trim().is_empty() && self.validator.is_valid(&whole) {
            return Ok(whole);
        }
        match candidates.into_iter().next() {
            Some(value) => Err(StructuredError::Invalid {
                errors: self.violations(&value),
                value,
            }),
            None => Err(StructuredError::NoJson),
        }
    }
}

fn candidates(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    if let Ok(value) = parse_lenient(text) {
        out.push(value);
    }
    for block in fenced_blocks(text) {
        if let Ok(value) = parse_lenient(block) {
            push_new(&mut out, value);
        }
    }
    for (value, _) in find_json_values(text) {
        push_new(&mut out, value);
    }
    out
}

fn push_new(out: &mut Vec<Value>, value: Value) {
    if !out.contains(&value) {
        out.push(value);
    }
}

/// The contents of fenced blocks (any language), in order; an unclosed one runs to the end.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut start: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        if !line.trim_start().starts_with("```") {
            continue;
        }
        match start.take() {
            Some(s) => blocks.push(&text[s..line_start]),
            None => start = Some(offset),
        }
    }
    if let Some(s) = start {
        blocks.push(&text[s..]);
    }
    blocks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn weather() -> Value {
        json!({
            "type": "object",
            "properties": {
                "temperature": {"type": "integer"},
                "condition": {"type": "string"},
                "location": {"type": "string"}
            },
            "required": ["temperature", "condition", "location"],
            "additionalProperties": false
        })
    }

    #[test]
    fn bare_fenced_and_embedded_json_validate() {
        let expected = json!({"temperature": 22, "condition": "sunny", "location": "London"});
        for text in [
            r#"{"temperature": 22, "condition": "sunny", "location": "London"}"#,
            "Here you go:\n```json\n{\"temperature\": 22, \"condition\": \"sunny\", \"location\": \"London\",}\n```",
            "The result is {'temperature': 22, 'condition': 'sunny', 'location': 'London'} as asked.",
        ] {
            assert_eq!(
                structured_output(text, &weather()).unwrap(),
                expected,
                "{text}"
            );
        }
    }

    #[test]
    fn the_first_valid_candidate_wins() {
        let text = "An example: {\"temperature\": \"hot\"}. The answer: {\"temperature\": 5, \"condition\": \"rain\", \"location\": \"Oslo\"}";
        assert_eq!(
            structured_output(text, &weather()).unwrap()["location"],
            "Oslo"
        );
    }

    #[test]
    fn violations_have_paths_and_messages() {
        let err = structured_output(r#"{"temperature": "22", "condition": "sunny"}"#, &weather())
            .unwrap_err();
        let StructuredError::Invalid { errors, value } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(value["temperature"], "22");
        assert!(
            errors
                .iter()
                .any(|v| v.path == "/temperature" && v.message.contains("integer"))
        );
        assert!(
            errors
                .iter()
                .any(|v| v.path.is_empty() && v.message.contains("location"))
        );
        assert!(
            err.to_string()
                .starts_with("the JSON does not match the schema: ")
        );
        assert!(
            err.to_string()
                .contains("/temperature: \"22\" is not of type \"integer\"")
        );
    }

    #[test]
    fn no_json_and_bad_schemas() {
        assert_eq!(
            structured_output("It is sunny.", &weather()),
            Err(StructuredError::NoJson)
        );
        assert!(validate_schema(&weather()).is_ok());
        assert!(validate_schema(&json!(true)).is_ok());
        let err = validate_schema(&json!({"type": "nope"})).unwrap_err();
        assert!(err.contains("nope"), "{err}");
        let err = validate_schema(&json!(42)).unwrap_err();
        assert_eq!(err, "expected an object or a boolean, found number");
        assert!(matches!(
            structured_output("{}", &json!({"type": 5})),
            Err(StructuredError::InvalidSchema(_))
        ));
    }

    #[test]
    fn remote_references_are_refused() {
        let err = validate_schema(&json!({"$ref": "https://example.com/schema.json"})).unwrap_err();
        assert!(!err.is_empty());
        let local = json!({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"});
        assert!(validate_schema(&local).is_ok());
        assert_eq!(
            structured_output("```json\n7\n```", &local).unwrap(),
            json!(7)
        );
    }

    #[test]
    fn string_schemas_take_the_reply_itself() {
        let schema = json!({"type": "string", "minLength": 1});
        assert_eq!(
            structured_output("  sunny \n", &schema).unwrap(),
            json!("sunny")
        );
        assert_eq!(
            structured_output("\"rain\"", &schema).unwrap(),
            json!("rain")
        );
    }

    #[test]
    fn array_schemas() {
        let schema = json!({"type": "array", "items": {"type": "string"}, "minItems": 1});
        assert_eq!(
            structured_output("Apps: [\"Settings\", \"Notes\"]", &schema).unwrap(),
            json!(["Settings", "Notes"])
        );
    }
}
