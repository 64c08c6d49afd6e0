//! Conversions between `serde_json::Value` and protobuf `Struct`/`Value`, used for the free-form
//! `data` and `handoff_context` fields of `ActionResult`.
use prost_types::{ListValue, Struct, Value, value::Kind};
use serde_json::{Map, Number};

/// Converts a JSON value to a protobuf `Value`. Numbers become doubles, as in protobuf JSON.
pub fn json_to_value(json: &serde_json::Value) -> Value {
    let kind = match json {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(json_to_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(object_to_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// Converts a JSON value to a protobuf `Struct`. A value that is not an object is wrapped as
/// `{"value": ...}` so that nothing is lost.
pub fn json_to_struct(json: &serde_json::Value) -> Struct {
    match json {
        serde_json::Value::Object(map) => object_to_struct(map),
        other => {
            let mut s = Struct::default();
            s.fields.insert("value".to_owned(), json_to_value(other));
            s
        }
    }
}

fn object_to_struct(map: &Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: map
            .iter()
            .map(|(k, v)| (k.clone(), json_to_value(v)))
            .collect(),
    }
}

/// Converts a protobuf `Value` to JSON. Whole numbers that fit an i64 come back as integers.
pub fn value_to_json(value: &Value) -> serde_json::Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number_to_json(*n),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(list)) => {
            serde_json::Value::Array(list.values.iter().map(value_to_json).collect())
        }
        Some(Kind::StructValue(s)) => struct_to_json(s),
    }
}

/// Converts a protobuf `Struct` to a JSON object.
pub fn struct_to_json(s: &Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect(),
    )
}

fn number_to_json(n: f64) -> serde_json::Value {
    const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= MAX_EXACT {
        // Whole and exactly representable: the cast is lossless.
        #[allow(clippy::cast_possible_truncation)]
        let i = n as i64;
        return serde_json::Value::Number(i.into());
    }
    Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_nested_json() {
        let original =
            json!({"x": 540, "ok": true, "name": "Wi-Fi", "list": [1.5, null, {"a": "b"}]});
        let back = struct_to_json(&json_to_struct(&original));
        assert_eq!(back, original);
    }

    #[test]
    fn wraps_non_objects() {
        let s = json_to_struct(&json!([1, 2]));
        assert_eq!(struct_to_json(&s), json!({"value": [1, 2]}));
    }
}
