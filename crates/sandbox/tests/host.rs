//! Host functions: validation, errors, blocking handlers, large strings, signatures, sleep.

use std::{sync::Arc, time::Duration};

use droidmesh_sandbox::{
    Capabilities, ErrorKind, HostFunction, ParamSpec, ParamType, SandboxLimits, Session,
    tool_signatures,
};
use serde_json::{Value, json};

use crate::common::{Recorder, fails, ok, session, timed, tools, value};

#[test]
fn host_functions_work_with_and_without_await() {
    let (s, rec) = session();
    assert_eq!(value(&s, "tap(3).tapped"), json!(3));
    assert_eq!(value(&s, "(await tap(4)).tapped"), json!(4));
    assert_eq!(
        value(&s, "echo({ nested: [1, { deep: 'x' }] })"),
        json!({ "nested": [1, { "deep": "x" }] })
    );
    assert_eq!(rec.calls()[0], ("tap".to_string(), vec![json!(3)]));
}

#[test]
fn wrong_argument_types_are_type_errors_naming_function_and_parameter() {
    let (s, rec) = session();
    let cases = [
        (
            "tap('1')",
            "tap(index: number): argument `index` must be an integer, got string",
        ),
        (
            "tap(1.5)",
            "argument `index` must be an integer, got number",
        ),
        ("tap(null)", "argument `index` must be an integer, got null"),
        (
            "tap(() => 1)",
            "argument `index` must be an integer, got a function",
        ),
        (
            "tap(Symbol('s'))",
            "argument `index` must be an integer, got a symbol",
        ),
        (
            "tap(1n)",
            "argument `index` must be an integer, got a bigint",
        ),
        (
            "tap(NaN)",
            "argument `index` must be an integer, got a non-finite number",
        ),
        (
            "tap({ valueOf() { return 1 } })",
            "argument `index` must be an integer, got object",
        ),
        (
            "echo({ f() {} })",
            "echo(value: any): argument `value` must be JSON data, but it contains a function",
        ),
        (
            "tap({ n: 1 })",
            "argument `index` must be an integer, got object",
        ),
        (
            "swipe(1, 2, 3, '4')",
            "swipe(x1: number, y1: number, x2: number, y2: number, duration_ms?: number): argument `y2` must be a number, got string",
        ),
        (
            "input_text(42)",
            "input_text(text: string): argument `text` must be a string, got number",
        ),
    ];
    for (code, message) in cases {
        fails(&s, code, ErrorKind::Runtime, "TypeError: ");
        fails(&s, code, ErrorKind::Runtime, message);
    }
    assert_eq!(rec.count(), 0, "no handler ran");
}

#[test]
fn wrong_argument_counts_are_type_errors() {
    let (s, rec) = session();
    fails(
        &s,
        "tap()",
        ErrorKind::Runtime,
        "tap(index: number): missing required argument `index`",
    );
    fails(
        &s,
        "tap(undefined)",
        ErrorKind::Runtime,
        "missing required argument `index`",
    );
    fails(
        &s,
        "tap(1, 2)",
        ErrorKind::Runtime,
        "tap(index: number) takes 1 argument but 2 were given",
    );
    fails(
        &s,
        "swipe(1, 2, 3)",
        ErrorKind::Runtime,
        "missing required argument `y2`",
    );
    assert_eq!(rec.count(), 0);
    ok(
        &s,
        "swipe(1, 2, 3, 4); swipe(1, 2, 3, 4, 300); tap(1, undefined)",
    );
    let calls = rec.calls();
    assert_eq!(
        calls[0].1,
        vec![json!(1), json!(2), json!(3), json!(4), Value::Null]
    );
    assert_eq!(calls[1].1[4], json!(300));
}

#[test]
fn the_error_can_be_caught_by_the_script() {
    let (s, _) = session();
    let v = value(
        &s,
        "try { tap('x') } catch (e) { e instanceof TypeError && e.message }",
    );
    assert_eq!(
        v,
        json!("tap(index: number): argument `index` must be an integer, got string")
    );
}

#[test]
fn host_failures_are_host_errors() {
    let (s, _) = session();
    let out = fails(
        &s,
        "\nawait fail('device offline')",
        ErrorKind::Host,
        "HostError: fail: device offline",
    );
    assert_eq!(out.error.unwrap().line, Some(2));
    assert_eq!(
        value(
            &s,
            "try { fail('x') } catch (e) { e.name + '|' + e.message }"
        ),
        json!("HostError|fail: x")
    );
    fails(
        &s,
        "explode()",
        ErrorKind::Host,
        "explode: the host function failed unexpectedly",
    );
    assert_eq!(value(&s, "tap(1).tapped"), json!(1));
}

#[test]
fn large_strings_pass_through_host_functions_up_to_the_cap() {
    let limits = SandboxLimits {
        max_string_arg_bytes: 2 * 1024 * 1024,
        ..SandboxLimits::default()
    };
    let recorder = Arc::new(Recorder::default());
    let s = Session::new(
        limits,
        Capabilities {
            functions: tools(&recorder),
            ..Capabilities::new()
        },
    )
    .unwrap();
    let (out, took) = timed(|| {
        s.run_blocking("input_text('é'.repeat(512 * 1024))")
            .unwrap()
    });
    assert_eq!(out.value, Some(json!(1024 * 1024)), "{out:?}");
    assert!(took < Duration::from_secs(1));
    fails(
        &s,
        "input_text('x'.repeat(2 * 1024 * 1024 + 1))",
        ErrorKind::Runtime,
        "RangeError: input_text(text: string): argument `text` is larger than the limit of 2 MiB",
    );
    fails(
        &s,
        "echo(['x'.repeat(1024 * 1024), 'y'.repeat(1024 * 1024)])",
        ErrorKind::Runtime,
        "is larger than the limit of 2 MiB",
    );
    assert_eq!(recorder.count(), 1);
}

#[test]
fn unicode_and_nul_characters_round_trip() {
    let (s, _) = session();
    assert_eq!(
        value(&s, "echo('héllo 🌍 \\u0000 end')"),
        json!("héllo 🌍 \u{0} end")
    );
    fails(
        &s,
        "echo('\\uD800')",
        ErrorKind::Runtime,
        "unpaired surrogates",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_may_block_on_async_work() {
    let handle = tokio::runtime::Handle::current();
    let slow = HostFunction::new("get_state", "Fetches the state.", move |_| {
        handle.block_on(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(json!({ "screen": "home" }))
        })
    });
    let s = Session::new(SandboxLimits::default(), Capabilities::new().function(slow)).unwrap();
    let ticker = tokio::spawn(async {
        let mut ticks = 0;
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            ticks += 1;
        }
        ticks
    });
    let out = s
        .run("(await get_state()).screen + (await get_state()).screen")
        .await
        .unwrap();
    assert_eq!(out.value, Some(json!("homehome")));
    assert_eq!(ticker.await.unwrap(), 5);
}

#[test]
fn signatures_render_for_prompts() {
    let recorder = Arc::new(Recorder::default());
    let text = tool_signatures(&tools(&recorder)[..3]);
    assert_eq!(
        text,
        "tap(index: number): Tap the element with this index.\n  index: the index shown in ui_state\n\
         swipe(x1: number, y1: number, x2: number, y2: number, duration_ms?: number): Swipe between two points.\n  duration_ms: how long the swipe takes\n\
         input_text(text: string): Type text into the focused field.\n  text: the text to type\n"
    );
}

#[test]
fn invalid_capabilities_are_refused() {
    let f = || HostFunction::new("go", "", |_| Ok(Value::Null));
    let twice = Capabilities::new().function(f()).function(f());
    assert!(Session::new(SandboxLimits::default(), twice).is_err());
    let bad_order = Capabilities::new().function(
        f().param(ParamSpec::optional("a", ParamType::Any, ""))
            .param(ParamSpec::required("b", ParamType::Any, "")),
    );
    assert!(Session::new(SandboxLimits::default(), bad_order).is_err());
    let reserved =
        Capabilities::new().function(HostFunction::new("console", "", |_| Ok(Value::Null)));
    assert!(Session::new(SandboxLimits::default(), reserved).is_err());
}

#[test]
fn sleep_is_granted_capped_and_bounded_by_the_wall_clock() {
    let sleepy = |wall_clock| {
        let limits = SandboxLimits {
            wall_clock,
            ..SandboxLimits::default()
        };
        Session::new(limits, Capabilities::new().sleep(Duration::from_millis(50))).unwrap()
    };
    let s = sleepy(Duration::from_secs(5));
    let (out, took) = timed(|| s.run_blocking("sleep(20); sleep(10000); 'done'").unwrap());
    assert_eq!(out.value, Some(json!("done")));
    assert!(
        took >= Duration::from_millis(70) && took < Duration::from_secs(2),
        "{took:?}"
    );
    let short = sleepy(Duration::from_millis(300));
    let (out, took) = timed(|| short.run_blocking("while (true) sleep(50)").unwrap());
    assert_eq!(out.error.unwrap().kind, ErrorKind::Timeout);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(
        s.run_blocking("sleep(-1)")
            .unwrap()
            .error
            .unwrap()
            .message
            .contains("TypeError")
    );

    let (plain, _) = session();
    assert_eq!(
        value(&plain, "typeof sleep + typeof setTimeout"),
        json!("undefinedundefined")
    );
}
