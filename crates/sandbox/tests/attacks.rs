//! The attack suite: each hostile script must end within a bounded time with a clear result,
//! and the same session must then run a normal script (globals intact, tools working).

use std::time::Duration;

use droidmesh_sandbox::{ErrorKind, RunOutcome, SandboxLimits, Session};
use serde_json::{Value, json};

use crate::common::{Recorder, ok, quick_limits, session, session_with, timed, value};

/// Generous for debug builds on a busy machine: wall clock 400 ms + draining + teardown.
const BOUND: Duration = Duration::from_secs(4);

/// Attacks meant to hit a limit other than time get a long wall clock (and a small heap), so a
/// slow debug build on a loaded machine still reaches that limit first.
fn roomy() -> SandboxLimits {
    SandboxLimits {
        wall_clock: Duration::from_secs(20),
        memory_bytes: 16 * 1024 * 1024,
        ..quick_limits()
    }
}

/// Attacks that end with an outcome of their own (an error, a value) get a wall clock they
/// cannot reach, so a slow debug build on a loaded machine still reaches that outcome.
fn unhurried() -> SandboxLimits {
    SandboxLimits {
        wall_clock: Duration::from_secs(20),
        ..quick_limits()
    }
}

enum Expect {
    Error(ErrorKind, &'static str),
    AnyError(&'static [ErrorKind]),
    Value(Value),
    Check(fn(&RunOutcome) -> bool),
}

/// An attack the clock must stop: the short wall clock of [`quick_limits`] and no other limit
/// in reach (none of these scripts grows its heap), so the outcome is the same on any machine.
fn attack(code: &str, expect: Expect) {
    attack_with(quick_limits(), BOUND, code, expect);
}

fn unhurried_attack(code: &str, expect: Expect) {
    attack_with(unhurried(), Duration::from_secs(25), code, expect);
}

fn roomy_attack(code: &str, expect: Expect) {
    attack_with(roomy(), Duration::from_secs(25), code, expect);
}

fn attack_with(limits: SandboxLimits, bound: Duration, code: &str, expect: Expect) {
    let (s, rec) = session_with(limits);
    ok(&s, "let before = 'kept'");
    let (outcome, took) = timed(|| s.run_blocking(code).unwrap());
    assert!(took < bound, "{code:?} took {took:?}");
    let shown = |o: &RunOutcome| {
        let console: String = o.console.chars().take(300).collect();
        format!(
            "error {:?}, value {:?}, console {console:?}…",
            o.error, o.value
        )
    };
    match expect {
        Expect::Error(kind, needle) => {
            let error = outcome
                .error
                .clone()
                .unwrap_or_else(|| panic!("{code:?}: {outcome:?}"));
            assert_eq!(error.kind, kind, "{code:?}: {error:?}");
            assert!(
                error.message.contains(needle),
                "{code:?}: {error:?} lacks {needle:?}"
            );
        }
        Expect::AnyError(kinds) => {
            let error = outcome
                .error
                .clone()
                .unwrap_or_else(|| panic!("{code:?}: {outcome:?}"));
            assert!(kinds.contains(&error.kind), "{code:?}: {error:?}");
            assert!(!error.message.is_empty());
        }
        Expect::Value(expected) => {
            assert!(outcome.error.is_none(), "{code:?}: {}", shown(&outcome));
            assert_eq!(outcome.value, Some(expected), "{code:?}");
        }
        Expect::Check(check) => assert!(check(&outcome), "{code:?}: {}", shown(&outcome)),
    }
    assert_recovers(&s, &rec);
}

/// A normal script runs: the earlier global is intact and a tool receives exactly its argument.
fn assert_recovers(s: &Session, rec: &Recorder) {
    let before = rec.count();
    let (out, took) = timed(|| s.run_blocking("before + ':' + tap(2).tapped").unwrap());
    assert!(
        out.error.is_none(),
        "normal script after the attack failed: {out:?}"
    );
    assert_eq!(out.value, Some(json!("kept:2")));
    assert!(took < Duration::from_secs(2), "normal script took {took:?}");
    assert_eq!(rec.calls()[before], ("tap".to_string(), vec![json!(2)]));
}

macro_rules! attacks {
    ($($name:ident: $code:expr => $expect:expr;)*) => {
        $(#[test] fn $name() { attack($code, $expect) })*
    };
}

macro_rules! unhurried_attacks {
    ($($name:ident: $code:expr => $expect:expr;)*) => {
        $(#[test] fn $name() { unhurried_attack($code, $expect) })*
    };
}

macro_rules! roomy_attacks {
    ($($name:ident: $code:expr => $expect:expr;)*) => {
        $(#[test] fn $name() { roomy_attack($code, $expect) })*
    };
}

use ErrorKind::*;
use Expect::*;

attacks! {
    // Endless loops and job floods.
    endless_while: "while (true) {}" => Error(Timeout, "script stopped: it ran longer than 400ms");
    endless_for: "for (;;) {}" => Error(Timeout, "ran longer than");
    endless_do_while: "let i = 0; do { i++ } while (i > 0)" => Error(Timeout, "ran longer than");
    catch_and_finally_cannot_swallow_the_stop: "for (;;) { try { for (;;) {} } catch (e) {} finally { continue } }" => Error(Timeout, "ran longer than");
    swallowing_host_interruptions: "while (true) { try { tap(1) } catch (e) {} }" => Error(Timeout, "ran longer than");
    endless_loop_in_finally: "try { throw new Error('x') } finally { for (;;) {} }" => Error(Timeout, "ran longer than");
    many_parallel_microtask_chains: "for (let i = 0; i < 1000; i++) (function f() { Promise.resolve().then(f) })(); 'started'" => Error(Timeout, "ran longer than");
    async_loop: "(async () => { for (;;) await null })()" => Error(Timeout, "ran longer than");
    top_level_await_loop: "for (;;) { await 0 }" => Error(Timeout, "ran longer than");
    queue_microtask_flood: "function again() { queueMicrotask(again) } again()" => Error(Timeout, "ran longer than");
    regex_catastrophic_backtracking: "/^(a+)+$/.test('a'.repeat(40) + 'b')" => Error(Timeout, "ran longer than");

    // Console.
    endless_console_output: "for (;;) console.log('x'.repeat(1000))" => Check(|o| {
        o.error.as_ref().is_some_and(|e| e.kind == Timeout) && o.console.len() < 64 * 1024 + 40
    });

    // Thrown values that are not errors.
    throw_object_with_looping_getter: "throw { get message() { for (;;) {} } }" => AnyError(&[Runtime, Timeout]);

    // Host function arguments.
    looping_getter_in_host_arg: "echo({ get x() { for (;;) {} } })" => Error(Timeout, "ran longer than");

    // Completion values.
    looping_getter_in_completion_value: "({ get x() { for (;;) {} } })" => Error(Timeout, "ran longer than");

    // Odd code.
    prepare_stack_trace_loop: "Error.prepareStackTrace = () => { for (;;) {} }; null.x" => Error(Timeout, "ran longer than");

    // Leftover jobs run until the clock stops them.
    leftover_jobs_after_an_error: "(function f() { Promise.resolve().then(f) })();\nthrow new Error('after starting a chain')" => Error(Runtime, "Error: after starting a chain");
}

unhurried_attacks! {
    // Promises.
    never_settling_promise: "await new Promise(() => {})" => Error(Runtime, "can never settle");

    // Stack.
    deep_recursion: "function down(n) { return down(n + 1) + 1 }\ndown(0)" => Error(Stack, "script stopped: stack overflow");
    mutual_recursion: "function a(n) { const x = [n, n]; return b(x) } function b(x) { return a(x[0] + 1) } a(0)" => Error(Stack, "stack overflow");
    recursion_through_to_string: "const o = { toString() { return `${this}` } }; String(o)" => Error(Stack, "stack overflow");
    deeply_nested_json_parse: "JSON.parse('['.repeat(1e6) + ']'.repeat(1e6))" => AnyError(&[Stack, Runtime, Syntax]);
    deeply_nested_completion_value: "let deep = []; for (let i = 0; i < 100000; i++) deep = [deep]; deep" => Check(|o| o.error.is_none() && o.value.is_none());

    // Ambient authority.
    global_probing: "['std', 'os', 'process', 'Deno', 'Bun', 'fetch', 'XMLHttpRequest', 'WebSocket', 'setTimeout', 'setInterval', 'setImmediate', 'require', 'module', 'exports', 'print', 'scriptArgs', 'importScripts', 'navigator', 'gc', 'Worker', 'sleep', '__dirname']\n  .filter(n => typeof globalThis[n] !== 'undefined')" => Value(json!([]));
    static_import: "import fs from 'fs'\nfs.readFileSync('/etc/passwd')" => Error(Syntax, "this sandbox has no modules");
    dynamic_import: "const os = await import('os')" => Error(Runtime, "could not load module 'os' (this sandbox has no modules)");
    require_call: "require('child_process').execSync('id')" => Error(Runtime, "require is not defined");
    constructor_constructor: "[].constructor.constructor('return [typeof process, typeof std, typeof os, typeof fetch]')()" => Value(json!(["undefined", "undefined", "undefined", "undefined"]));
    function_constructor_of_a_tool: "tap.constructor('return this')() === globalThis && tap.constructor('return fetch')()" => Error(Runtime, "ReferenceError: fetch is not defined");
    eval_escape: "eval('typeof fetch') + (0, eval)('typeof XMLHttpRequest') + new Function('return typeof process')()" => Value(json!("undefinedundefinedundefined"));
    atomics_wait_cannot_block: "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)" => Error(Runtime, "cannot block");

    // Tampering.
    tampering_with_tool_prototypes: "Function.prototype.call = () => 'evil'; Function.prototype.apply = () => 'evil';\nObject.prototype.toJSON = () => 'evil'; Array.prototype.toJSON = () => 'evil';\ntap.call = 1; try { Object.setPrototypeOf(tap, null) } catch (e) {}\ntap(5).tapped" => Value(json!(5));
    replacing_tools: "tap = () => 'fake'; globalThis.tap = () => 'fake'; delete globalThis.tap;\ntry { Object.defineProperty(globalThis, 'tap', { value: () => 'fake' }) } catch (e) {}\ntap(6).tapped" => Value(json!(6));
    redeclaring_a_tool: "let tap = () => 'fake'" => Error(Runtime, "redeclaration of 'tap'");
    polluted_host_results: "Object.defineProperty(Object.prototype, 'tapped', { get() { return 'evil' } }); tap(7).tapped" => Value(json!(7));
    tampering_with_console: "console.log = () => {}; console.log('still captured'); 1" => Check(|o| o.console == "still captured\n");
    tampering_with_error_constructors: "TypeError = function () { return { evil: true } }; try { tap('x') } catch (e) { e.constructor.name + ': ' + e.message }" => Value(json!("TypeError: tap(index: number): argument `index` must be an integer, got string"));

    // Thrown values that are not errors.
    throw_string: "throw 'plain string'" => Error(Runtime, "Uncaught \"plain string\"");
    throw_number: "throw 42" => Error(Runtime, "Uncaught 42");
    throw_null: "throw null" => Error(Runtime, "Uncaught null");
    throw_undefined: "throw undefined" => Error(Runtime, "Uncaught undefined");
    throw_object: "throw { code: 7, reason: 'custom' }" => Error(Runtime, "Uncaught {\"code\":7,\"reason\":\"custom\"}");
    throw_symbol: "throw Symbol('sym')" => Error(Runtime, "Uncaught Symbol(sym)");
    error_with_throwing_name: "class E extends Error { get name() { throw 1 } }\nthrow new E('m')" => Error(Runtime, "m");

    // Host function arguments.
    one_megabyte_string_to_host: "input_text('a'.repeat(1 << 20))" => Value(json!(1 << 20));
    string_over_the_cap_to_host: "input_text('a'.repeat(4 * 1024 * 1024 + 1))" => Error(Runtime, "RangeError: input_text(text: string): argument `text` is larger than the limit of 4 MiB");
    value_of_is_never_called: "tap({ valueOf() { for (;;) {} } })" => Error(Runtime, "TypeError: tap(index: number): argument `index` must be an integer, got object");
    to_json_is_never_called: "echo({ toJSON() { for (;;) {} } })" => Error(Runtime, "contains a function");
    too_many_arguments: "tap(...new Array(1000).fill(1))" => Error(Runtime, "takes 1 argument but 1000 were given");
    far_too_many_arguments: "tap(...new Array(100000).fill(1))" => Error(Runtime, "too many arguments");
    cyclic_host_arg: "const cyc = {}; cyc.self = cyc; echo(cyc)" => Error(Runtime, "nested too deeply (or contains a cycle)");
    proxy_trap_throws_in_host_arg: "echo(new Proxy({}, { ownKeys() { throw new Error('trap') } }))" => Error(Runtime, "Error: trap");
    proxy_array_is_read_as_plain_data: "echo(new Proxy([], { get(t, k) { return k === 'length' ? 1e12 : 1 } }))" => Value(json!({}));
    sparse_array_with_huge_length: "const sparse = []; sparse.length = 1e9; echo(sparse)" => Error(Runtime, "larger than the limit");

    // Completion values.
    proxy_trap_throws_in_completion_value: "new Proxy({}, { ownKeys() { throw new Error('trap') } })" => Check(|o| o.value.is_none());
    cyclic_completion_value: "const c = {}; c.c = c; c" => Check(|o| o.error.is_none() && o.value.is_none());

    // Odd code.
    debugger_statement: "debugger; 'after debugger'" => Value(json!("after debugger"));
    syntax_error: "let = ;" => Error(Syntax, "SyntaxError");
    unterminated_string: "const open = 'no end\n" => Error(Syntax, "SyntaxError");
    nul_byte_in_code: "const a = 1;\nconst b = '\0';" => Error(Syntax, "NUL");
    unicode_identifiers_and_strings: "const café = '☕'; const 𝒳 = 1; café + 𝒳 + '\\u{1F600}'" => Value(json!("☕1😀"));
    lone_surrogate_to_host: "echo('\\uD83D')" => Error(Runtime, "unpaired surrogates");
}

roomy_attacks! {
    // Memory.
    rope_string_doubling: "let s = 'x'; while (true) s += s" => AnyError(&[Memory, Runtime]);
    flat_string_doubling: "let flat = 'x'; while (true) flat = flat.repeat(2)" => Error(Memory, "script stopped: out of memory (limit 16 MiB)");
    array_push_bomb: "const pushed = []; while (true) pushed.push(new Array(1000).fill(pushed.length))" => Error(Memory, "out of memory");
    huge_array_buffer: "new ArrayBuffer(2 ** 31)" => AnyError(&[Memory, Runtime]);
    many_array_buffers: "(() => { const bufs = []; while (true) bufs.push(new ArrayBuffer(1 << 20)) })()" => Error(Memory, "out of memory");
    object_graph: "(() => { let head = null; for (;;) head = { next: head, data: [head, { head }] } })()" => Error(Memory, "out of memory");
    map_growth: "(() => { const m = new Map(); for (let i = 0; ; i++) m.set(i, new Array(100).fill(i)) })()" => Error(Memory, "out of memory");
    huge_repeat: "'x'.repeat(2 ** 30).length" => AnyError(&[Memory, Runtime]);
    // Each link waits on the next, so the chain grows until the heap is full: with the roomy
    // wall clock the memory limit always trips first, however fast the machine. Where the
    // heap fills up inside QuickJS's own promise machinery, QuickJS drops the out-of-memory
    // error and the chain stops settling; the run then ends as stuck. Either way the heap
    // limit ended it, which depends on the limit, not on the machine's speed.
    recursive_promise_chain: "function chain() { return Promise.resolve().then(chain) }\nawait chain()" => Check(|o| {
        o.error.as_ref().is_some_and(|e| {
            e.message == "script stopped: out of memory (limit 16 MiB)"
                || e.message.starts_with("the script awaits a promise that can never settle")
        })
    });


    // Console.
    huge_console_output: "for (let i = 0; i < 100000; i++) console.log('spam spam spam ' + i)" => Check(|o| {
        o.error.is_none() && o.console.len() < 64 * 1024 + 40 && o.console.ends_with(" bytes]\n") && o.console.contains("[truncated ")
    });
}

#[test]
fn function_this_sees_only_the_granted_globals() {
    let (s, rec) = session();
    let names = value(&s, "Object.getOwnPropertyNames(Function('return this')())");
    let granted = [
        "tap",
        "swipe",
        "input_text",
        "echo",
        "fail",
        "explode",
        "console",
        "ui_state",
    ];
    let standard = [
        "Object",
        "Function",
        "Array",
        "Number",
        "parseFloat",
        "parseInt",
        "Infinity",
        "NaN",
        "undefined",
        "Boolean",
        "String",
        "Symbol",
        "Date",
        "Promise",
        "RegExp",
        "Error",
        "AggregateError",
        "EvalError",
        "RangeError",
        "ReferenceError",
        "SyntaxError",
        "TypeError",
        "URIError",
        "InternalError",
        "SuppressedError",
        "globalThis",
        "JSON",
        "Math",
        "Intl",
        "ArrayBuffer",
        "SharedArrayBuffer",
        "Atomics",
        "DataView",
        "Uint8Array",
        "Int8Array",
        "Uint16Array",
        "Int16Array",
        "Uint32Array",
        "Int32Array",
        "Float16Array",
        "Float32Array",
        "Float64Array",
        "BigInt64Array",
        "BigUint64Array",
        "Uint8ClampedArray",
        "BigInt",
        "Map",
        "Set",
        "WeakMap",
        "WeakSet",
        "WeakRef",
        "FinalizationRegistry",
        "Proxy",
        "Reflect",
        "decodeURI",
        "decodeURIComponent",
        "encodeURI",
        "encodeURIComponent",
        "escape",
        "unescape",
        "eval",
        "isFinite",
        "isNaN",
        "Iterator",
        "queueMicrotask",
        "DisposableStack",
        "AsyncDisposableStack",
        "DOMException",
        "btoa",
        "atob",
        "performance",
    ];
    let names: Vec<String> = serde_json::from_value(names).unwrap();
    for name in &names {
        assert!(
            granted.contains(&name.as_str()) || standard.contains(&name.as_str()),
            "unexpected global {name}"
        );
    }
    for name in granted {
        assert!(names.iter().any(|n| n == name), "{name} missing");
    }
    ok(&s, "let before = 'kept'");
    assert_recovers(&s, &rec);
}

#[test]
fn prototype_and_json_tampering_cannot_change_what_the_host_receives() {
    let (s, rec) = session();
    let out = ok(
        &s,
        "Object.defineProperty(Object.prototype, 'injected', { get() { return 'evil' }, enumerable: true });\n\
         Array.prototype.extra = 'evil'; Object.prototype.toJSON = () => 'evil';\n\
         JSON.stringify = () => '\"evil\"'; JSON.parse = () => 'evil';\n\
         const sent = { a: 1, list: [1, 'two', { three: 3 }] };\n\
         echo(sent)",
    );
    let expected = json!({ "a": 1, "list": [1, "two", { "three": 3 }] });
    assert_eq!(rec.calls()[0], ("echo".to_string(), vec![expected.clone()]));
    assert_eq!(out.value, Some(expected));
    ok(&s, "let before = 'kept'");
    assert_recovers(&s, &rec);
}

#[test]
fn freezing_the_global_object_only_breaks_set_global() {
    let (s, rec) = session();
    ok(&s, "let before = 'kept'; Object.freeze(globalThis)");
    let refused = s.set_global_blocking("ui_state", json!({ "fresh": true }));
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("cannot set global `ui_state`")
    );
    assert_recovers(&s, &rec);
}
