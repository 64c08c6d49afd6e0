//! The globals a session grants: host functions, `console` and `sleep`.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    rc::Rc,
    time::Duration,
};

use rquickjs::{
    Coerced, Ctx, Exception, Function, Object, Type, Value, function::Rest, object::Property,
};

use super::{
    convert::{ConvertError, arg_to_json, js_type_name, json_to_js},
    state::Shared,
};
use crate::{HostFunction, ParamType, capability::is_identifier, limits::human_bytes};

/// Throws a `TypeError`/`RangeError`/`Error` built by the engine (so prototypes the script may
/// have changed do not matter), with the full message and optionally another `name`.
pub(crate) fn throw<'js>(
    ctx: &Ctx<'js>,
    make: fn(&Ctx<'js>, &str) -> rquickjs::Error,
    message: &str,
    name: Option<&str>,
) -> rquickjs::Error {
    let _ = make(ctx, "");
    let error = ctx.catch();
    if let Some(object) = error.as_object() {
        let _ = object.prop("message", Property::from(message).writable().configurable());
        if let Some(name) = name {
            let _ = object.prop("name", Property::from(name).writable().configurable());
        }
    }
    ctx.throw(error)
}

fn interrupted<'js>(ctx: &Ctx<'js>) -> rquickjs::Error {
    Exception::throw_internal(ctx, "interrupted")
}

/// Defines `value` as a read-only, non-configurable global after freezing it.
pub(crate) fn define_frozen<'js>(
    ctx: &Ctx<'js>,
    freeze: &Function<'js>,
    name: &str,
    value: Value<'js>,
) -> rquickjs::Result<()> {
    let _: Value = freeze.call((value.clone(),))?;
    ctx.globals().prop(name, Property::from(value).enumerable())
}

/// Creates the JavaScript function for a host function.
pub(crate) fn host_function<'js>(
    ctx: &Ctx<'js>,
    function: HostFunction,
    shared: Rc<Shared>,
    max_arg_bytes: usize,
) -> rquickjs::Result<Function<'js>> {
    let name = function.name.clone();
    let length = function.params.len();
    let signature = function.signature();
    let f = Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Rest<Value<'js>>| {
        call_host(&ctx, &function, &signature, &shared, max_arg_bytes, args.0)
    })?;
    f.set_name(&name)?;
    f.set_length(length)?;
    Ok(f)
}

fn call_host<'js>(
    ctx: &Ctx<'js>,
    function: &HostFunction,
    signature: &str,
    shared: &Shared,
    max_arg_bytes: usize,
    args: Vec<Value<'js>>,
) -> rquickjs::Result<Value<'js>> {
    if shared.stop_reason().is_some() {
        return Err(interrupted(ctx));
    }
    let given = args
        .iter()
        .rposition(|a| !a.is_undefined())
        .map_or(0, |i| i + 1);
    let mut converted = Vec::with_capacity(given);
    for (index, arg) in args.iter().take(given).enumerate() {
        let Some(param) = function.params.get(index) else {
            // Too many arguments: `check_args` words the error.
            converted.push(Some(serde_json::Value::Null));
            continue;
        };
        let bad = |what: &str| format!("{signature}: argument `{}` {what}", param.name);
        if arg.is_undefined() {
            converted.push(None);
            continue;
        }
        let got = js_type_name(arg);
        if !accepts(param.ty, got) {
            let message = bad(&format!("must be {}, got {got}", param.ty.expected()));
            return Err(throw(ctx, Exception::throw_type, &message, None));
        }
        match arg_to_json(arg, max_arg_bytes) {
            Ok(value) => converted.push(value),
            Err(ConvertError::Js(error)) => return Err(error),
            Err(ConvertError::NotJson(what, nested)) => {
                let message = if nested {
                    bad(&format!("must be JSON data, but it contains {what}"))
                } else {
                    bad(&format!("must be {}, got {what}", param.ty.expected()))
                };
                return Err(throw(ctx, Exception::throw_type, &message, None));
            }
            Err(ConvertError::TooLarge) => {
                let limit = human_bytes(max_arg_bytes);
                let message = bad(&format!("is larger than the limit of {limit}"));
                return Err(throw(ctx, Exception::throw_range, &message, None));
            }
            Err(ConvertError::TooDeep) => {
                let message = bad("is nested too deeply (or contains a cycle)");
                return Err(throw(ctx, Exception::throw_type, &message, None));
            }
            Err(ConvertError::NotUnicode) => {
                let message = bad("contains a string with unpaired surrogates");
                return Err(throw(ctx, Exception::throw_type, &message, None));
            }
        }
    }
    let args = function
        .check_args(converted)
        .map_err(|message| throw(ctx, Exception::throw_type, &message, None))?;
    if shared.stop_reason().is_some() {
        return Err(interrupted(ctx));
    }
    let name = &function.name;
    match catch_unwind(AssertUnwindSafe(|| (function.handler)(args))) {
        Ok(Ok(value)) => json_to_js(ctx, &value),
        Ok(Err(message)) => Err(throw(
            ctx,
            Exception::throw_message,
            &format!("{name}: {message}"),
            Some("HostError"),
        )),
        Err(_) => {
            let message = format!("{name}: the host function failed unexpectedly");
            Err(throw(
                ctx,
                Exception::throw_message,
                &message,
                Some("HostError"),
            ))
        }
    }
}

/// Whether a parameter of type `ty` can take a JavaScript value of type `got` (checked before
/// reading the value, so an object is never walked where a number is expected).
fn accepts(ty: ParamType, got: &str) -> bool {
    match ty {
        ParamType::String => got == "string",
        ParamType::Number | ParamType::Integer => got == "number",
        ParamType::Boolean => got == "boolean",
        ParamType::Object => got == "object",
        ParamType::Array => got == "array",
        ParamType::Any => true,
    }
}

/// Creates the frozen `console` object.
pub(crate) fn console<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<Object<'js>> {
    let console = Object::new(ctx.clone())?;
    for (method, prefix) in [
        ("log", ""),
        ("info", ""),
        ("debug", ""),
        ("warn", "[warn] "),
        ("error", "[error] "),
    ] {
        let shared = Rc::clone(shared);
        let f = Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Rest<Value<'js>>| {
            let line: Vec<String> = args.0.iter().map(|v| display(&ctx, v)).collect();
            if shared.stop_reason().is_some() {
                return Err(interrupted(&ctx));
            }
            shared.console.borrow_mut().push(prefix, &line.join(" "));
            Ok(())
        })?;
        f.set_name(method)?;
        console.prop(method, Property::from(f).enumerable())?;
    }
    Ok(console)
}

/// Creates `sleep(ms)`, blocking at most `max` and never past the run's deadline.
pub(crate) fn sleep<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    max: Duration,
) -> rquickjs::Result<Function<'js>> {
    let shared = Rc::clone(shared);
    let f = Function::new(ctx.clone(), move |ctx: Ctx<'js>, ms: Value<'js>| {
        let Some(ms) = ms.as_number().filter(|ms| ms.is_finite() && *ms >= 0.0) else {
            let message = "sleep(ms: number): argument `ms` must be a non-negative number";
            return Err(throw(&ctx, Exception::throw_type, message, None));
        };
        let wanted = Duration::from_secs_f64(ms / 1000.0).min(max);
        let until = std::time::Instant::now() + wanted.min(shared.remaining());
        loop {
            if shared.stop_reason().is_some() {
                return Err(interrupted(&ctx));
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    })?;
    f.set_name("sleep")?;
    f.set_length(1)?;
    Ok(f)
}

/// Renders a value the way `console.log` shows it: strings as they are, objects as JSON.
pub(crate) fn display<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> String {
    match value.type_of() {
        Type::Uninitialized | Type::Undefined => "undefined".into(),
        Type::String => value
            .as_string()
            .and_then(|s| s.to_string().ok())
            .unwrap_or_else(|| "[string with unpaired surrogates]".into()),
        Type::Symbol => value
            .as_symbol()
            .and_then(|s| s.description().ok())
            .and_then(|d| d.as_string().and_then(|s| s.to_string().ok()))
            .map_or_else(|| "Symbol()".into(), |d| format!("Symbol({d})")),
        Type::BigInt => coerce(ctx, value).map_or_else(|| "[bigint]".into(), |s| format!("{s}n")),
        Type::Null | Type::Bool | Type::Int | Type::Float => {
            coerce(ctx, value).unwrap_or_else(|| "[number]".into())
        }
        Type::Function | Type::Constructor => {
            let name = value
                .as_object()
                .and_then(|o| o.get::<_, String>("name").ok());
            let _ = ctx.catch();
            match name {
                Some(name) if is_identifier(&name) => format!("[Function: {name}]"),
                _ => "[Function]".into(),
            }
        }
        Type::Exception => {
            let object = value.as_object();
            let field = |key: &str| object.and_then(|o| o.get::<_, Coerced<String>>(key).ok());
            let text = match (field("name"), field("message")) {
                (Some(name), Some(message)) => format!("{}: {}", name.0, message.0),
                (Some(name), None) => name.0,
                _ => "Error".into(),
            };
            let _ = ctx.catch();
            text
        }
        _ => match ctx.json_stringify(value.clone()) {
            Ok(Some(text)) => text.to_string().unwrap_or_else(|_| "[object]".into()),
            Ok(None) => "undefined".into(),
            Err(_) => {
                let _ = ctx.catch();
                "[object]".into()
            }
        },
    }
}

fn coerce<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> Option<String> {
    let text = value.get::<Coerced<String>>().ok().map(|c| c.0);
    if text.is_none() {
        let _ = ctx.catch();
    }
    text
}
