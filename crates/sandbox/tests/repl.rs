//! REPL behaviour: persistence, top-level await, completion values, console, errors, globals.

use droidmesh_sandbox::{Capabilities, ErrorKind, SandboxLimits, Session};
use serde_json::json;

use crate::common::{fails, ok, session, session_with, value};

#[test]
fn let_const_function_and_class_persist_across_runs() {
    let (s, _) = session();
    ok(
        &s,
        "let counter = 1;\nconst name = 'droid';\nfunction twice(x) { return 2 * x }\nclass P { hi() { return 'hi' } }",
    );
    assert_eq!(value(&s, "counter += 1; counter"), json!(2));
    assert_eq!(value(&s, "twice(counter) + name.length"), json!(9));
    assert_eq!(value(&s, "new P().hi()"), json!("hi"));
}

#[test]
fn a_failed_runs_declarations_do_not_block_its_corrected_retry() {
    let (s, _) = session();
    // The first attempt fails after its bindings exist; the retry declares them again.
    fails(
        &s,
        "const items = [1, 2];\nlet total = 0;\nclass Box {}\nitems.nope();",
        ErrorKind::Runtime,
        "TypeError",
    );
    assert_eq!(
        value(
            &s,
            "const items = [1, 2];\nlet total = 0;\nclass Box { get n() { return 3 } }\ntotal = items.length + new Box().n; total"
        ),
        json!(5)
    );
}

#[test]
fn declaring_a_name_again_in_a_later_run_replaces_it() {
    let (s, _) = session();
    ok(&s, "const name = 'droid'; let n = 1;");
    ok(&s, "const name = 'mesh'; let n = 2;");
    assert_eq!(value(&s, "name + n"), json!("mesh2"));
    // Declarations inside blocks and functions keep their block scope.
    assert_eq!(
        value(
            &s,
            "const fs = []; for (let i = 0; i < 2; i++) { const k = i; fs.push(() => k) } fs.map(f => f())"
        ),
        json!([0, 1])
    );
}

#[test]
fn var_and_implicit_globals_persist() {
    let (s, _) = session();
    ok(&s, "var a = 1; b = 2;");
    assert_eq!(value(&s, "a + b"), json!(3));
}

#[test]
fn top_level_await_and_persistence_work_together() {
    let (s, _) = session();
    ok(
        &s,
        "let first = await tap(4);\nconst second = await Promise.resolve(5);",
    );
    assert_eq!(value(&s, "first.tapped + second"), json!(9));
    assert_eq!(value(&s, "const r = tap(1); r.tapped"), json!(1));
}

#[test]
fn completion_values() {
    let (s, _) = session();
    assert_eq!(value(&s, "1 + 1"), json!(2));
    assert_eq!(value(&s, "0.5"), json!(0.5));
    assert_eq!(value(&s, "'text'"), json!("text"));
    assert_eq!(
        value(&s, "({ a: [1, 'b', null], f() {} })"),
        json!({ "a": [1, "b", null] })
    );
    assert_eq!(
        value(&s, "if (true) { 'then' } else { 'else' }"),
        json!("then")
    );
    assert_eq!(ok(&s, "undefined").value, None);
    assert_eq!(ok(&s, "() => 1").value, None);
    assert_eq!(ok(&s, "let declared = 1").value, None);
    assert_eq!(value(&s, "[NaN, Infinity]"), json!([null, null]));
}

#[test]
fn a_trailing_promise_is_awaited() {
    let (s, _) = session();
    assert_eq!(
        value(
            &s,
            "(async () => { const r = await tap(7); return r.tapped })()"
        ),
        json!(7)
    );
    fails(
        &s,
        "(async () => { await null; throw new Error('inside') })()",
        ErrorKind::Runtime,
        "Error: inside",
    );
}

#[test]
fn un_awaited_async_work_finishes_within_the_run() {
    let (s, rec) = session();
    ok(
        &s,
        "(async () => { await null; tap(1); await null; tap(2) })(); 'started'",
    );
    assert_eq!(rec.count(), 2);
}

#[test]
fn console_is_captured_per_run() {
    let (s, _) = session();
    let out = ok(
        &s,
        "console.log('a', 1, {b: [2]}, null, undefined);\nconsole.info('i'); console.debug('d');\nconsole.warn('w'); console.error(new TypeError('bad'))",
    );
    assert_eq!(
        out.console,
        "a 1 {\"b\":[2]} null undefined\ni\nd\n[warn] w\n[error] TypeError: bad\n"
    );
    assert_eq!(ok(&s, "1").console, "");
}

#[test]
fn console_output_is_capped_with_a_marker() {
    let limits = SandboxLimits {
        console_bytes: 100,
        ..crate::common::quick_limits()
    };
    let (s, _) = session_with(limits);
    let out = ok(&s, "for (let i = 0; i < 50; i++) console.log('line ' + i)");
    let (kept, marker) = out
        .console
        .split_at(out.console.find("[truncated").unwrap());
    assert_eq!(kept.len(), 101, "100 bytes then a newline: {kept:?}");
    let total: usize = (0..50).map(|i| format!("line {i}\n").len()).sum();
    assert_eq!(marker, format!("[truncated {} bytes]\n", total - 100));
}

#[test]
fn errors_carry_the_line_of_the_submitted_code() {
    let (s, _) = session();
    let out = fails(
        &s,
        "const a = 1;\nconst b = 2;\nnot_defined(a + b);",
        ErrorKind::Runtime,
        "ReferenceError: not_defined is not defined",
    );
    assert_eq!(out.error.as_ref().unwrap().line, Some(3));
    assert!(out.error.unwrap().stack.unwrap().contains("<script>:3"));

    let out = fails(
        &s,
        "let x = 1;\nlet y = ;\n",
        ErrorKind::Syntax,
        "SyntaxError",
    );
    assert_eq!(out.error.unwrap().line, Some(2));

    let out = fails(
        &s,
        "await null;\n\nfunction f() {\n  throw new RangeError('deep');\n}\nf()",
        ErrorKind::Runtime,
        "RangeError: deep",
    );
    assert_eq!(out.error.unwrap().line, Some(4));
}

#[test]
fn errors_inside_functions_from_earlier_runs_point_at_this_run() {
    let (s, _) = session();
    ok(&s, "function boom() { return tap('x') }");
    let out = fails(
        &s,
        "\n\nboom()",
        ErrorKind::Runtime,
        "argument `index` must be an integer, got string",
    );
    // The frame of `boom` is in the earlier run's code; the first frame of <script> is line 1
    // of that run, which is all the engine knows.
    assert!(out.error.unwrap().line.is_some());
}

#[test]
fn set_global_refreshes_values_between_runs() {
    let (s, _) = session();
    assert_eq!(value(&s, "ui_state.elements.length"), json!(0));
    s.set_global_blocking(
        "ui_state",
        json!({ "elements": [{ "index": 1 }, { "index": 2 }] }),
    )
    .unwrap();
    assert_eq!(value(&s, "ui_state.elements.length"), json!(2));
    ok(&s, "ui_state = 'clobbered by the script'");
    s.set_global_blocking("ui_state", json!({ "elements": [] }))
        .unwrap();
    assert_eq!(value(&s, "ui_state.elements.length"), json!(0));
    s.set_global_blocking("ORIGINAL", json!("text")).unwrap();
    assert_eq!(value(&s, "ORIGINAL"), json!("text"));
    fails(&s, "let ORIGINAL = 1", ErrorKind::Runtime, "redeclaration");
}

#[test]
fn set_global_refuses_bad_names_and_tools() {
    let (s, _) = session();
    assert!(s.set_global_blocking("tap", json!(1)).is_err());
    assert!(s.set_global_blocking("not valid", json!(1)).is_err());
    assert!(s.set_global_blocking("", json!(1)).is_err());
    assert!(s.set_global_blocking("console", json!(1)).is_err());
    assert_eq!(value(&s, "typeof tap"), json!("function"));
}

#[tokio::test]
async fn async_set_global_and_run() {
    let s = Session::new(
        SandboxLimits::default(),
        Capabilities::new().global("ORIGINAL", json!("abc")),
    )
    .unwrap();
    assert_eq!(
        s.run("ORIGINAL.toUpperCase()").await.unwrap().value,
        Some(json!("ABC"))
    );
    s.set_global("ORIGINAL", json!("xyz")).await.unwrap();
    assert_eq!(s.run("ORIGINAL").await.unwrap().value, Some(json!("xyz")));
    assert!(s.memory_usage().await.unwrap().allocated_bytes > 0);
}

#[tokio::test]
async fn a_queued_global_is_seen_by_the_next_run_and_reports_its_outcome() {
    let s = Session::new(SandboxLimits::default(), Capabilities::new()).unwrap();
    let set = s
        .queue_global_json(
            "ui_state",
            r#"[{"index":1,"text":"OK"},{"index":2}]"#.into(),
        )
        .unwrap();
    let out = s
        .run("ui_state.length + ':' + ui_state[0].text")
        .await
        .unwrap();
    assert_eq!(out.value, Some(json!("2:OK")));
    set.outcome().await.unwrap();
    // Refused the way set_global refuses: a granted name, a non-identifier, text that is not
    // JSON. The next run goes on with what was there before.
    for (name, text) in [("console", "1"), ("not valid", "1"), ("ui_state", "[1,")] {
        let set = s.queue_global_json(name, text.into()).unwrap();
        assert_eq!(
            s.run("ui_state.length").await.unwrap().value,
            Some(json!(2)),
            "{name} = {text}"
        );
        let err = set.outcome().await.unwrap_err();
        assert!(
            matches!(err, droidmesh_sandbox::SandboxError::InvalidGlobal { .. }),
            "{name} = {text}: {err}"
        );
    }
    assert_eq!(
        value_async(&s, "typeof console.log").await,
        json!("function")
    );
}

async fn value_async(s: &Session, code: &str) -> serde_json::Value {
    s.run(code).await.unwrap().value.unwrap_or_default()
}

#[test]
fn console_can_be_withheld() {
    let s = Session::new(SandboxLimits::default(), Capabilities::new().console(false)).unwrap();
    assert_eq!(
        s.run_blocking("typeof console").unwrap().value,
        Some(json!("undefined"))
    );
}
