//! What a session may reach: host functions with typed parameters, injected globals, console.

use std::{collections::HashSet, fmt, sync::Arc, time::Duration};

use serde_json::{Map, Value};

use crate::error::{Result, SandboxError};

/// The Rust side of a host function: receives one JSON value per declared parameter (absent
/// optional parameters are `null`), returns the value the script sees or an error message that
/// the script sees as a thrown `HostError`.
///
/// It runs on the session's own thread and may block (for example on
/// `tokio::runtime::Handle::block_on` of a gRPC call); while it blocks, the run's wall clock keeps
/// counting but the script cannot be interrupted, so handlers should apply their own timeouts.
pub type HostHandler = Arc<dyn Fn(Vec<Value>) -> Result<Value, String> + Send + Sync>;

/// The JSON type a parameter accepts.
///
/// Serializes as its lower-case name (`"integer"`), so tool tables that carry it can be
/// rendered or exported as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ParamType {
    /// A string.
    String,
    /// A finite number.
    Number,
    /// A finite number without a fractional part.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A plain object.
    Object,
    /// An array.
    Array,
    /// Any JSON value.
    Any,
}

impl ParamType {
    /// The type as written in a JavaScript-style signature.
    pub fn js_name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Number | ParamType::Integer => "number",
            ParamType::Boolean => "boolean",
            ParamType::Object => "object",
            ParamType::Array => "array",
            ParamType::Any => "any",
        }
    }

    /// Whether a JSON value has this type (`Integer` takes `3` and `3.0`, not `2.7`).
    pub fn accepts(self, value: &Value) -> bool {
        match (self, value) {
            (ParamType::Any, _) => true,
            (ParamType::String, Value::String(_)) => true,
            (ParamType::Number, Value::Number(_)) => true,
            (ParamType::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            (ParamType::Boolean, Value::Bool(_)) => true,
            (ParamType::Object, Value::Object(_)) => true,
            (ParamType::Array, Value::Array(_)) => true,
            _ => false,
        }
    }

    /// The type with its article, for error messages: "an integer", "a string".
    pub fn expected(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Number => "a number",
            ParamType::Integer => "an integer",
            ParamType::Boolean => "a boolean",
            ParamType::Object => "an object",
            ParamType::Array => "an array",
            ParamType::Any => "a JSON value",
        }
    }
}

/// One parameter of a host function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSpec {
    /// The parameter's name, as shown in signatures and error messages.
    pub name: String,
    /// The accepted type.
    pub ty: ParamType,
    /// Whether a call must pass it (optional parameters come after required ones).
    pub required: bool,
    /// One line for the prompt; may be empty.
    pub description: String,
}

impl ParamSpec {
    /// A parameter every call must pass.
    pub fn required(
        name: impl Into<String>,
        ty: ParamType,
        description: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            ty,
            required: true,
            description: description.into(),
        }
    }

    /// A parameter a call may leave out (the handler then receives `null`).
    pub fn optional(
        name: impl Into<String>,
        ty: ParamType,
        description: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            ty,
            required: false,
            description: description.into(),
        }
    }
}

/// A function the script may call, implemented in Rust.
#[derive(Clone)]
pub struct HostFunction {
    /// The global name the script calls.
    pub name: String,
    /// The parameters, in order.
    pub params: Vec<ParamSpec>,
    /// One line for the prompt.
    pub description: String,
    /// The implementation.
    pub handler: HostHandler,
}

impl fmt::Debug for HostFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFunction")
            .field("name", &self.name)
            .field("params", &self.params)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl HostFunction {
    /// A host function without parameters; add them with [`HostFunction::param`].
    pub fn new<F>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Vec<Value>) -> Result<Value, String> + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            params: Vec::new(),
            description: description.into(),
            handler: Arc::new(handler),
        }
    }

    /// Appends a parameter.
    #[must_use]
    pub fn param(mut self, param: ParamSpec) -> Self {
        self.params.push(param);
        self
    }

    /// The JavaScript-style signature, e.g. `tap(index: number)`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                let optional = if p.required { "" } else { "?" };
                format!("{}{optional}: {}", p.name, p.ty.js_name())
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }

    /// Checks call arguments (already converted to JSON; `None` for `undefined` or missing) and
    /// returns one value per parameter, or a message for a `TypeError`.
    pub(crate) fn check_args(&self, args: Vec<Option<Value>>) -> Result<Vec<Value>, String> {
        let signature = self.signature();
        let given = args.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        if given > self.params.len() {
            let n = self.params.len();
            let plural = if n == 1 { "" } else { "s" };
            return Err(format!(
                "{signature} takes {n} argument{plural} but {given} were given"
            ));
        }
        let mut args = args.into_iter();
        let mut checked = Vec::with_capacity(self.params.len());
        for param in &self.params {
            match args.next().flatten() {
                None if param.required => {
                    return Err(format!(
                        "{signature}: missing required argument `{}`",
                        param.name
                    ));
                }
                None => checked.push(Value::Null),
                Some(value) if param.ty.accepts(&value) => checked.push(value),
                Some(value) => {
                    return Err(format!(
                        "{signature}: argument `{}` must be {}, got {}",
                        param.name,
                        param.ty.expected(),
                        json_type_name(&value)
                    ));
                }
            }
        }
        Ok(checked)
    }
}

/// The name of a JSON value's type, for error messages.
pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Everything a session grants its scripts. Nothing else is reachable: no modules, no file
/// system, network, environment or timers.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// Host functions, each a frozen, read-only global.
    pub functions: Vec<HostFunction>,
    /// Values injected as globals before the first run (e.g. `ui_state`, `ORIGINAL`).
    pub globals: Map<String, Value>,
    /// Whether `console.log/info/debug/warn/error` are available (captured, capped).
    pub console: bool,
    /// When set, a global `sleep(ms)` that blocks at most this long per call (and never past
    /// the run's wall clock).
    pub sleep: Option<Duration>,
}

impl Capabilities {
    /// No functions, no globals, with `console`, without `sleep`.
    pub fn new() -> Self {
        Self {
            console: true,
            ..Self::default()
        }
    }

    /// Adds a host function.
    #[must_use]
    pub fn function(mut self, function: HostFunction) -> Self {
        self.functions.push(function);
        self
    }

    /// Adds a global.
    #[must_use]
    pub fn global(mut self, name: impl Into<String>, value: Value) -> Self {
        self.globals.insert(name.into(), value);
        self
    }

    /// Grants or withdraws `console`.
    #[must_use]
    pub fn console(mut self, console: bool) -> Self {
        self.console = console;
        self
    }

    /// Grants `sleep(ms)`, capped at `max` per call.
    #[must_use]
    pub fn sleep(mut self, max: Duration) -> Self {
        self.sleep = Some(max);
        self
    }

    /// Checks names (identifiers, no duplicates, no clash with `console`/`sleep`) and parameter
    /// lists (named, required before optional).
    pub(crate) fn validate(&self) -> Result<()> {
        let mut seen = HashSet::new();
        let reserved = ["console", "sleep", "globalThis"];
        for function in &self.functions {
            let name = &function.name;
            if !is_identifier(name) {
                return Err(invalid(format!(
                    "function name `{name}` is not a JavaScript identifier"
                )));
            }
            if reserved.contains(&name.as_str()) {
                return Err(invalid(format!("function name `{name}` is reserved")));
            }
            if !seen.insert(name.as_str()) {
                return Err(invalid(format!("function `{name}` is defined twice")));
            }
            let mut optional_seen = false;
            let mut param_names = HashSet::new();
            for param in &function.params {
                if !is_identifier(&param.name) || !param_names.insert(param.name.as_str()) {
                    return Err(invalid(format!(
                        "function `{name}`: parameter `{}` is not a unique identifier",
                        param.name
                    )));
                }
                if param.required && optional_seen {
                    return Err(invalid(format!(
                        "function `{name}`: required parameter `{}` follows an optional one",
                        param.name
                    )));
                }
                optional_seen |= !param.required;
            }
        }
        for name in self.globals.keys() {
            if !is_identifier(name) {
                return Err(invalid(format!(
                    "global name `{name}` is not a JavaScript identifier"
                )));
            }
            if seen.contains(name.as_str()) || reserved.contains(&name.as_str()) {
                return Err(invalid(format!("global `{name}` clashes with a function")));
            }
        }
        Ok(())
    }
}

fn invalid(message: String) -> SandboxError {
    SandboxError::InvalidCapability(message)
}

/// Whether `name` is a plain ASCII JavaScript identifier.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Renders the functions as JavaScript-style signatures with descriptions, one per line, with
/// described parameters indented below, e.g.
///
/// ```text
/// tap(index: number): Tap the element with this index.
///   index: the index shown in ui_state
/// ```
///
/// Prompts use this so that prompt and sandbox never disagree.
pub fn tool_signatures(functions: &[HostFunction]) -> String {
    let mut out = String::new();
    for function in functions {
        out.push_str(&function.signature());
        if !function.description.is_empty() {
            out.push_str(": ");
            out.push_str(&function.description);
        }
        out.push('\n');
        for param in function.params.iter().filter(|p| !p.description.is_empty()) {
            out.push_str(&format!("  {}: {}\n", param.name, param.description));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tap() -> HostFunction {
        HostFunction::new("tap", "Tap the element with this index.", |_| {
            Ok(Value::Null)
        })
        .param(ParamSpec::required("index", ParamType::Integer, ""))
        .param(ParamSpec::optional(
            "hold_ms",
            ParamType::Number,
            "hold this long",
        ))
    }

    #[test]
    fn renders_signatures() {
        assert_eq!(
            tool_signatures(&[tap()]),
            "tap(index: number, hold_ms?: number): Tap the element with this index.\n  hold_ms: hold this long\n"
        );
    }

    #[test]
    fn checks_arguments() {
        let f = tap();
        assert_eq!(
            f.check_args(vec![Some(json!(3))]),
            Ok(vec![json!(3), Value::Null])
        );
        assert_eq!(
            f.check_args(vec![Some(json!("3"))]),
            Err("tap(index: number, hold_ms?: number): argument `index` must be an integer, got string".into())
        );
        assert!(
            f.check_args(vec![])
                .is_err_and(|e| e.contains("missing required argument `index`"))
        );
        assert!(
            f.check_args(vec![Some(json!(1)), None, Some(json!(2))])
                .is_err_and(|e| e.contains("takes 2 arguments but 3 were given"))
        );
        assert!(f.check_args(vec![Some(json!(1.5))]).is_err());
        assert_eq!(
            f.check_args(vec![Some(json!(1)), None, None]),
            Ok(vec![json!(1), Value::Null])
        );
    }

    #[test]
    fn param_types_serialize_by_name_and_integers_refuse_fractions() {
        assert_eq!(
            serde_json::to_value(ParamType::Integer).unwrap(),
            json!("integer")
        );
        assert!(ParamType::Integer.accepts(&json!(3)));
        assert!(ParamType::Integer.accepts(&json!(3.0)));
        assert!(!ParamType::Integer.accepts(&json!(2.7)));
        assert!(ParamType::Number.accepts(&json!(2.7)));
        assert_eq!(ParamType::Integer.expected(), "an integer");
    }

    #[test]
    fn validates_names() {
        assert!(
            Capabilities::new()
                .function(tap())
                .function(tap())
                .validate()
                .is_err()
        );
        let bad = HostFunction::new("a-b", "", |_| Ok(Value::Null));
        assert!(Capabilities::new().function(bad).validate().is_err());
        assert!(
            Capabilities::new()
                .global("ui state", json!(1))
                .validate()
                .is_err()
        );
        assert!(
            Capabilities::new()
                .function(tap())
                .global("ui_state", json!(1))
                .validate()
                .is_ok()
        );
    }
}
