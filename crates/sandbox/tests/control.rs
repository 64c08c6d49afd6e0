//! Limits and control: timeouts, memory, stack, stop handles, dropped futures, parallel sessions.

use std::{sync::Arc, thread, time::Duration};

use droidmesh_sandbox::{Capabilities, ErrorKind, HostFunction, SandboxLimits, Session};
use serde_json::{Value, json};

use crate::common::{fails, ok, session, timed, value};

#[test]
fn default_limits() {
    let limits = SandboxLimits::default();
    assert_eq!(limits.wall_clock, Duration::from_secs(5));
    assert_eq!(limits.memory_bytes, 64 * 1024 * 1024);
    assert_eq!(limits.stack_bytes, 1024 * 1024);
    assert_eq!(limits.console_bytes, 64 * 1024);
}

#[test]
fn an_endless_loop_times_out_and_globals_survive() {
    let (s, _) = session();
    ok(
        &s,
        "let kept = 'before'; function helper() { return kept + '!' }",
    );
    let (out, took) = timed(|| {
        fails(
            &s,
            "console.log('start');\nwhile (true) {}",
            ErrorKind::Timeout,
            "script stopped: it ran longer than 400ms",
        )
    });
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(out.console, "start\n");
    assert_eq!(value(&s, "helper()"), json!("before!"));
}

#[test]
fn the_default_timeout_message_names_five_seconds() {
    let s = Session::new(SandboxLimits::default(), Capabilities::new()).unwrap();
    // Runs into the default limit itself (five seconds of this test's time).
    let out = s.run_blocking("for (;;) {}").unwrap();
    let error = out.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Timeout);
    assert_eq!(error.message, "script stopped: it ran longer than 5s");
    assert!(out.duration >= Duration::from_secs(5), "{:?}", out.duration);
}

/// A long wall clock so that a slow build reaches the memory limit first.
fn roomy_session() -> droidmesh_sandbox::Session {
    let limits = SandboxLimits {
        wall_clock: Duration::from_secs(20),
        ..crate::common::quick_limits()
    };
    crate::common::session_with(limits).0
}

#[test]
fn out_of_memory_ends_the_run_and_the_session_recovers() {
    let s = roomy_session();
    ok(&s, "const survivor = { name: 'kept' }");
    fails(
        &s,
        "(() => { const a = []; while (true) a.push({ i: a.length, pad: [1, 2, 3] }) })()",
        ErrorKind::Memory,
        "script stopped: out of memory (limit 32 MiB)",
    );
    assert_eq!(value(&s, "survivor.name"), json!("kept"));
    assert_eq!(
        value(&s, "Array.from({ length: 1000 }, (_, i) => i).length"),
        json!(1000)
    );
}

#[test]
fn memory_held_by_globals_can_be_released_later() {
    let s = roomy_session();
    fails(
        &s,
        "var hog = []; while (true) hog.push('x'.repeat(4096) + hog.length)",
        ErrorKind::Memory,
        "out of memory",
    );
    assert!(value(&s, "hog.length").as_u64().unwrap() > 1000);
    ok(&s, "hog = null");
    assert_eq!(value(&s, "'y'.repeat(1 << 20).length"), json!(1 << 20));
}

#[test]
fn stack_overflow_ends_the_run_and_the_session_recovers() {
    let (s, _) = session();
    ok(&s, "let depth = 0");
    fails(
        &s,
        "function down() { depth++; return down() }\ndown()",
        ErrorKind::Stack,
        "script stopped: stack overflow (limit 1 MiB)",
    );
    assert!(value(&s, "depth").as_u64().unwrap() > 100);
    assert_eq!(
        value(
            &s,
            "function sum(n) { return n ? n + sum(n - 1) : 0 } sum(100)"
        ),
        json!(5050)
    );
}

#[test]
fn stop_handle_stops_a_running_script_from_another_thread() {
    // The script says when it runs; the other thread stops it then.
    let (running, started) = std::sync::mpsc::channel();
    let started_fn = HostFunction::new("started", "", move |_| {
        let _ = running.send(());
        Ok(Value::Null)
    });
    let s = Session::new(
        SandboxLimits::default(),
        Capabilities::new().function(started_fn),
    )
    .unwrap();
    ok(&s, "let alive = 'yes'");
    let stop = s.stop_handle();
    let stopper = thread::spawn(move || {
        started
            .recv_timeout(Duration::from_secs(10))
            .expect("the script never started");
        stop.stop();
    });
    let (out, took) = timed(|| {
        s.run_blocking("started(); let n = 0; while (true) { n++ }")
            .unwrap()
    });
    stopper.join().unwrap();
    assert_eq!(out.error.unwrap().kind, ErrorKind::Stopped);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(value(&s, "alive"), json!("yes"));
}

#[test]
fn a_stop_does_not_affect_runs_submitted_afterwards() {
    let (s, _) = session();
    s.stop_handle().stop();
    assert_eq!(value(&s, "1 + 1"), json!(2));
}

#[tokio::test]
async fn a_dropped_run_future_stops_the_script() {
    let s = Session::new(SandboxLimits::default(), Capabilities::new()).unwrap();
    let start = std::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_millis(100), s.run("while (true) {}")).await;
    assert!(result.is_err());
    let out = s.run("'next'").await.unwrap();
    assert_eq!(out.value, Some(json!("next")));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_long_run_does_not_block_the_async_runtime() {
    let s = Session::new(
        SandboxLimits {
            wall_clock: Duration::from_secs(1),
            ..SandboxLimits::default()
        },
        Capabilities::new(),
    )
    .unwrap();
    let ticker = tokio::spawn(async {
        let mut ticks = 0u32;
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ticks += 1;
        }
        ticks
    });
    let out = s.run("while (true) {}").await.unwrap();
    assert_eq!(out.error.unwrap().kind, ErrorKind::Timeout);
    assert!(ticker.is_finished(), "the ticker ran while the script did");
    assert_eq!(ticker.await.unwrap(), 10);
}

#[test]
fn many_sessions_run_in_parallel_threads() {
    let workers: Vec<_> = (0..8)
        .map(|t| {
            thread::spawn(move || {
                let sessions: Vec<_> = (0..4).map(|_| session().0).collect();
                for (i, s) in sessions.iter().enumerate() {
                    ok(s, &format!("let id = {t} * 100 + {i}; let total = 0"));
                }
                for round in 0..20 {
                    for s in &sessions {
                        ok(s, &format!("total += tap({round}).tapped"));
                    }
                }
                sessions
                    .iter()
                    .map(|s| value(s, "[id, total]"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (t, worker) in workers.into_iter().enumerate() {
        for (i, v) in worker.join().unwrap().into_iter().enumerate() {
            assert_eq!(v, json!([t * 100 + i, 190]));
        }
    }
}

#[test]
fn one_session_is_shared_by_threads_and_runs_in_order() {
    let (s, _) = session();
    let s = Arc::new(s);
    ok(&s, "let hits = 0");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let s = Arc::clone(&s);
            thread::spawn(move || (0..25).for_each(|_| drop(ok(&s, "hits++"))))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(value(&s, "hits"), json!(100));
}

#[test]
fn dropping_the_session_ends_its_thread() {
    let token = Arc::new(());
    let held = Arc::clone(&token);
    let f = HostFunction::new("noop", "", move |_| {
        let _ = &held;
        Ok(Value::Null)
    });
    let s = Session::new(SandboxLimits::default(), Capabilities::new().function(f)).unwrap();
    assert_eq!(Arc::strong_count(&token), 2);
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while Arc::strong_count(&token) > 1 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        Arc::strong_count(&token),
        1,
        "the engine and its handlers were freed"
    );
}

#[test]
fn memory_usage_reports_the_limit() {
    let (s, _) = session();
    let stats = s.memory_usage_blocking().unwrap();
    assert_eq!(stats.limit_bytes, 32 * 1024 * 1024);
    assert!(
        stats.allocated_bytes > 0 && stats.allocated_bytes < 1024 * 1024,
        "{stats:?}"
    );
}
