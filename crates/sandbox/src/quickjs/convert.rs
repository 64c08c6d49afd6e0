//! Conversions between JavaScript values and JSON (`serde_json::Value`).
//!
//! Values are read by walking own enumerable properties (no `toJSON`, nothing inherited), so
//! tampering with prototypes cannot change what the host receives.

use rquickjs::{Ctx, Object, String as JsString, Type, Value, object::Filter};
use serde_json::{Map, Number, Value as Json};

/// Nesting deeper than this is refused (it is most likely a cycle).
const MAX_DEPTH: usize = 64;

/// Why a JavaScript value could not become JSON.
#[derive(Debug)]
pub(crate) enum ConvertError {
    /// A value with no JSON form (function, symbol, bigint, non-finite number), and whether it
    /// is nested inside the value rather than the value itself.
    NotJson(&'static str, bool),
    /// More than the byte budget.
    TooLarge,
    /// Deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A string with unpaired surrogates.
    NotUnicode,
    /// JavaScript threw (a getter or proxy trap); the exception is pending on the context.
    Js(rquickjs::Error),
}

impl From<rquickjs::Error> for ConvertError {
    fn from(error: rquickjs::Error) -> Self {
        match error {
            rquickjs::Error::Utf8(_) => ConvertError::NotUnicode,
            other => ConvertError::Js(other),
        }
    }
}

/// How values without a JSON form are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Refuse them (host-function arguments).
    Strict,
    /// As `JSON.stringify` does: left out of objects, `null` in arrays (completion values).
    Lenient,
}

/// Converts a host-function argument. `Ok(None)` for `undefined`. `budget` is the number of
/// bytes (roughly, of JSON text) the value may take.
pub(crate) fn arg_to_json<'js>(
    value: &Value<'js>,
    budget: usize,
) -> Result<Option<Json>, ConvertError> {
    let mut left = budget;
    walk(value, &mut left, 0, Mode::Strict)
}

/// Converts a completion value: `None` when it has no JSON form or is larger than `budget`.
/// Exceptions thrown by getters or proxy traps are left pending and reported as `Err`.
pub(crate) fn completion_to_json<'js>(
    value: &Value<'js>,
    budget: usize,
) -> Result<Option<Json>, rquickjs::Error> {
    let mut left = budget;
    match walk(value, &mut left, 0, Mode::Lenient) {
        Ok(json) => Ok(json),
        Err(ConvertError::Js(error)) => Err(error),
        Err(_) => Ok(None),
    }
}

fn spend(left: &mut usize, bytes: usize) -> Result<(), ConvertError> {
    *left = left.checked_sub(bytes).ok_or(ConvertError::TooLarge)?;
    Ok(())
}

fn walk<'js>(
    value: &Value<'js>,
    left: &mut usize,
    depth: usize,
    mode: Mode,
) -> Result<Option<Json>, ConvertError> {
    if depth > MAX_DEPTH {
        return Err(ConvertError::TooDeep);
    }
    let not_json = |what| match mode {
        Mode::Strict => Err(ConvertError::NotJson(what, depth > 0)),
        Mode::Lenient => Ok(None),
    };
    let json = match value.type_of() {
        Type::Uninitialized | Type::Undefined => return Ok(None),
        Type::Null => {
            spend(left, 4)?;
            Json::Null
        }
        Type::Bool => {
            spend(left, 5)?;
            Json::Bool(value.as_bool().unwrap_or_default())
        }
        Type::Int => {
            spend(left, 11)?;
            Json::from(value.as_int().unwrap_or_default())
        }
        Type::Float => {
            spend(left, 24)?;
            match number(value.as_float().unwrap_or(f64::NAN)) {
                Some(number) => number,
                None if mode == Mode::Lenient => Json::Null,
                None => return not_json("a non-finite number"),
            }
        }
        Type::String => {
            let text = string(value)?;
            spend(left, text.len() + 2)?;
            Json::String(text)
        }
        Type::Symbol => return not_json("a symbol"),
        Type::BigInt => return not_json("a bigint"),
        Type::Function | Type::Constructor => return not_json("a function"),
        Type::Module | Type::Unknown => return not_json("an engine value"),
        Type::Array | Type::Object | Type::Promise | Type::Exception | Type::Proxy => {
            let Some(object) = value.as_object() else {
                return not_json("an engine value");
            };
            if value.is_array() {
                array(object, left, depth, mode)?
            } else {
                self::object(object, left, depth, mode)?
            }
        }
    };
    Ok(Some(json))
}

fn array<'js>(
    object: &Object<'js>,
    left: &mut usize,
    depth: usize,
    mode: Mode,
) -> Result<Json, ConvertError> {
    let length: Value = object.get("length")?;
    let length = length.as_number().unwrap_or(0.0);
    // Each element takes at least one byte of JSON; refuse before walking a huge sparse array.
    if length.is_nan() || length < 0.0 || length > *left as f64 {
        return Err(ConvertError::TooLarge);
    }
    let length = length as usize;
    spend(left, 2)?;
    let mut items = Vec::with_capacity(length.min(1024));
    for index in 0..length {
        let item: Value = object.get(index as u32)?;
        spend(left, 1)?;
        items.push(walk(&item, left, depth + 1, mode)?.unwrap_or(Json::Null));
    }
    Ok(Json::Array(items))
}

fn object<'js>(
    object: &Object<'js>,
    left: &mut usize,
    depth: usize,
    mode: Mode,
) -> Result<Json, ConvertError> {
    spend(left, 2)?;
    let mut map = Map::new();
    for key in object.own_keys::<String>(Filter::new().string().enum_only()) {
        let key = key?;
        let item: Value = object.get(key.as_str())?;
        spend(left, key.len() + 4)?;
        if let Some(item) = walk(&item, left, depth + 1, mode)? {
            map.insert(key, item);
        }
    }
    Ok(Json::Object(map))
}

fn string<'js>(value: &Value<'js>) -> Result<String, ConvertError> {
    match value.as_string() {
        Some(text) => Ok(text.to_string()?),
        None => Err(ConvertError::NotJson("an engine value", false)),
    }
}

/// The type of a JavaScript value as error messages name it (`string`, `a function`).
pub(crate) fn js_type_name(value: &Value<'_>) -> &'static str {
    match value.type_of() {
        Type::Uninitialized | Type::Undefined => "undefined",
        Type::Null => "null",
        Type::Bool => "boolean",
        Type::Int | Type::Float => "number",
        Type::String => "string",
        Type::Symbol => "a symbol",
        Type::BigInt => "a bigint",
        Type::Function | Type::Constructor => "a function",
        Type::Array => "array",
        _ => "object",
    }
}

/// A JSON number for `f`, as an integer when it is one (so `3` stays `3`, not `3.0`).
pub(crate) fn number(f: f64) -> Option<Json> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.fract() == 0.0 && f.abs() <= EXACT {
        Some(Json::from(f as i64))
    } else {
        Number::from_f64(f).map(Json::Number)
    }
}

/// Converts JSON into a JavaScript value.
pub(crate) fn json_to_js<'js>(ctx: &Ctx<'js>, json: &Json) -> rquickjs::Result<Value<'js>> {
    Ok(match json {
        Json::Null => Value::new_null(ctx.clone()),
        Json::Bool(b) => Value::new_bool(ctx.clone(), *b),
        Json::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => Value::new_int(ctx.clone(), i),
            None => Value::new_float(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => JsString::from_str(ctx.clone(), s)?.into_value(),
        Json::Array(_) | Json::Object(_) => {
            let text = serde_json::to_string(json).map_err(|e| {
                rquickjs::Error::new_into_js_message("json", "value", e.to_string())
            })?;
            ctx.json_parse(text)?
        }
    })
}
