//! Tools the operator defines in config (the executor's `[executor.tools.<name>]`), as the
//! CodeAct prompt shows them: one function taking one object of named arguments, its type
//! read from the tool's JSON Schema.
//!
//! ```text
//! weather(args: { city: string, units?: "metric" | "imperial" }): any — The weather now.
//!     city: the city's name
//!     units: metric (the default) or imperial
//! ```
use std::fmt::Write as _;

use serde_json::Value;

/// Most values of an `enum` written out as a union; a longer one is shown as its type.
const MAX_ENUM_SHOWN: usize = 8;
/// Longest property description shown; longer ones are cut with an ellipsis.
const MAX_DESCRIPTION: usize = 200;

/// One operator-defined tool, as a prompt shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomToolSpec {
    /// The sandbox function's name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of its one argument (an object schema).
    pub parameters: Value,
}

impl CustomToolSpec {
    /// Whether a call must pass the argument object (its schema requires a property).
    pub fn args_required(&self) -> bool {
        self.parameters
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| !r.is_empty())
    }

    /// `name(args: { a: string, b?: number }): any`.
    pub fn signature(&self) -> String {
        let optional = if self.args_required() { "" } else { "?" };
        format!(
            "{}(args{optional}: {}): any",
            self.name,
            object_type(&self.parameters, 0)
        )
    }
}

/// The tools' signatures, one per line with the description, described properties indented
/// below (the layout of [`super::js_signatures`]).
pub fn custom_signatures(tools: &[CustomToolSpec]) -> String {
    let mut out = String::new();
    for tool in tools {
        let _ = writeln!(
            out,
            "{} — {}",
            tool.signature(),
            one_line(&tool.description)
        );
        for (name, property) in properties(&tool.parameters) {
            if let Some(text) = property.get("description").and_then(Value::as_str) {
                let _ = writeln!(out, "    {name}: {}", shortened(&one_line(text)));
            }
        }
    }
    out
}

/// An object schema's properties: the required ones first, in the order `required` lists
/// them, then the others by name (JSON objects are read without their order).
fn properties(schema: &Value) -> Vec<(&String, &Value)> {
    let Some(all) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required = required(schema);
    let mut out: Vec<(&String, &Value)> = required
        .iter()
        .filter_map(|name| all.get_key_value(*name))
        .collect();
    out.extend(all.iter().filter(|(k, _)| !required.contains(&k.as_str())));
    out
}

fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `{ a: string, b?: number }` of an object schema; `{}` when it names no properties.
/// `depth` is the object's own nesting: the argument object is 0.
fn object_type(schema: &Value, depth: usize) -> String {
    let required = required(schema);
    let fields: Vec<String> = properties(schema)
        .into_iter()
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{optional}: {}", value_type_at(property, depth + 1))
        })
        .collect();
    if fields.is_empty() {
        "{}".into()
    } else {
        format!("{{ {} }}", fields.join(", "))
    }
}

/// A property's type as TypeScript writes it: `string`, `number`, `"a" | "b"`, `string[]`,
/// `{ x: number }` (for a property of the argument; objects nested deeper are `object`),
/// `any`. `depth`: 1 for the argument's own properties.
fn value_type_at(schema: &Value, depth: usize) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.is_empty()
        && values.len() <= MAX_ENUM_SHOWN
    {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    match schema.get("type") {
        Some(Value::String(t)) => named_type(t, schema, depth),
        Some(Value::Array(types)) => {
            let names: Vec<String> = types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| named_type(t, schema, depth))
                .collect();
            if names.is_empty() {
                "any".into()
            } else {
                names.join(" | ")
            }
        }
        _ => "any".into(),
    }
}

fn named_type(name: &str, schema: &Value, depth: usize) -> String {
    match name {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match schema.get("items") {
            Some(items @ Value::Object(_)) => {
                let inner = value_type_at(items, depth + 1);
                if inner.contains(' ') {
                    format!("({inner})[]")
                } else {
                    format!("{inner}[]")
                }
            }
            _ => "any[]".into(),
        },
        "object" if depth <= 1 && schema.get("properties").is_some() => object_type(schema, depth),
        "object" => "object".into(),
        _ => "any".into(),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn shortened(text: &str) -> String {
    if text.chars().count() <= MAX_DESCRIPTION {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_DESCRIPTION).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn weather() -> CustomToolSpec {
        CustomToolSpec {
            name: "weather".into(),
            description: "The weather now\n  in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "the city's name"},
                    "units": {"enum": ["metric", "imperial"]},
                    "days": {"type": "integer", "description": "days ahead, 0 for today"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "at": {"type": "object", "properties": {"lat": {"type": "number"}}},
                    "note": {"type": ["string", "null"]},
                    "free": {}
                },
                "required": ["city"]
            }),
        }
    }

    #[test]
    fn a_schema_becomes_one_object_argument_with_its_properties() {
        assert_eq!(
            weather().signature(),
            "weather(args: { city: string, at?: { lat?: number }, days?: number, free?: any, note?: string | null, tags?: string[], units?: \"metric\" | \"imperial\" }): any"
        );
        assert_eq!(
            custom_signatures(&[weather()]),
            format!(
                "{} — The weather now in a city.\n    city: the city's name\n    days: days ahead, 0 for today\n",
                weather().signature()
            )
        );
    }

    #[test]
    fn without_required_properties_the_argument_is_optional() {
        let ping = CustomToolSpec {
            name: "ping".into(),
            description: "Is the service up?".into(),
            parameters: json!({"type": "object"}),
        };
        assert!(!ping.args_required());
        assert_eq!(ping.signature(), "ping(args?: {}): any");
        let long = CustomToolSpec {
            parameters: json!({"type": "object", "properties": {
                "x": {"type": "string", "description": "y".repeat(300)},
                "deep": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}}
            }}),
            ..ping
        };
        assert_eq!(
            long.signature(),
            "ping(args?: { deep?: { a?: object }, x?: string }): any"
        );
        let text = custom_signatures(&[long]);
        assert!(
            text.contains(&format!("    x: {}…\n", "y".repeat(200))),
            "{text}"
        );
    }
}
