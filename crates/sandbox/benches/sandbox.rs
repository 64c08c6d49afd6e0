//! Sandbox figures against their targets: session creation, host-call round trip, memory per
//! idle session, a 1 MB string through a host function. Run with `cargo bench -p droidmesh-sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use droidmesh_sandbox::{
    Capabilities, Engine, HostFunction, ParamSpec, ParamType, QuickJs, SandboxLimits, Session,
};
use serde_json::{Value, json};

fn capabilities() -> Capabilities {
    let tap = HostFunction::new("tap", "Tap the element with this index.", |args| {
        Ok(json!({ "tapped": args[0] }))
    })
    .param(ParamSpec::required("index", ParamType::Integer, ""));
    let input = HostFunction::new("input_text", "Type text.", |args| {
        Ok(json!(args[0].as_str().map_or(0, str::len)))
    })
    .param(ParamSpec::required("text", ParamType::String, ""));
    let noop = HostFunction::new("noop", "Does nothing.", |_| Ok(Value::Null));
    Capabilities::new()
        .function(tap)
        .function(input)
        .function(noop)
        .global(
            "ui_state",
            json!({ "elements": [{ "index": 1, "text": "OK" }] }),
        )
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn report(name: &str, figure: String, ok: bool, target: &str) {
    let verdict = if ok { "ok" } else { "OVER TARGET" };
    println!("{name:<44} {figure:>14}   target {target:<10} {verdict}");
}

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(7)?
        .parse()
        .ok()
}

/// How long 300 `Session::new` calls take, each session dropped at once, with `gap` between
/// one session's end and the next one's start.
fn creation_times(limits: &SandboxLimits, gap: Option<Duration>) -> Vec<Duration> {
    (0..300)
        .map(|_| {
            if let Some(gap) = gap {
                std::thread::sleep(gap);
            }
            let start = Instant::now();
            let session = Session::new(limits.clone(), capabilities()).unwrap();
            let took = start.elapsed();
            drop(session);
            took
        })
        .collect()
}

fn main() {
    let limits = SandboxLimits::default();

    // Session creation: thread + runtime + context + capabilities, ready to run. Sessions
    // start one per task, so a spare thread has usually prepared its runtime and context by
    // then: measured with 2 ms between sessions. Back to back (the next session asked for as
    // the last one ends), the spare is still preparing and the full build is paid.
    for _ in 0..20 {
        drop(Session::new(limits.clone(), capabilities()).unwrap());
    }
    let created = median(creation_times(&limits, Some(Duration::from_millis(2))));
    report(
        "session creation, a spare ready (2 ms apart)",
        format!("{created:.1?}"),
        created <= Duration::from_micros(200),
        "200 µs",
    );
    println!(
        "{:<44} {:>14}",
        "  back to back, one ends as one starts",
        format!("{:.1?}", median(creation_times(&limits, None)))
    );
    // Spares end after 10 s without a session: the first session after a quiet spell pays
    // the full build (thread, runtime, context).
    let idle: Vec<Duration> = (0..2)
        .map(|_| {
            std::thread::sleep(Duration::from_secs(11));
            let start = Instant::now();
            drop(Session::new(limits.clone(), capabilities()).unwrap());
            start.elapsed()
        })
        .collect();
    println!(
        "{:<44} {:>14}",
        "  after 11 s idle, spares expired (median)",
        format!("{:.1?}", median(idle))
    );
    let faults_before = minor_faults();
    let mut live = Vec::new();
    let samples: Vec<Duration> = (0..100)
        .map(|_| {
            let start = Instant::now();
            live.push(Session::new(limits.clone(), capabilities()).unwrap());
            start.elapsed()
        })
        .collect();
    let faults = minor_faults()
        .zip(faults_before)
        .map(|(after, before)| (after - before) / 100);
    println!(
        "{:<44} {:>14}   ({} page faults each)",
        "  while 100 sessions stay live (median)",
        format!("{:.1?}", median(samples)),
        faults.map_or_else(|| "?".to_string(), |f| f.to_string())
    );
    drop(live);
    let samples: Vec<Duration> = (0..300)
        .map(|_| {
            let start = Instant::now();
            let engine = QuickJs.instantiate(&limits, capabilities()).unwrap();
            let took = start.elapsed();
            drop(engine);
            took
        })
        .collect();
    println!(
        "{:<44} {:>14}",
        "  engine instance alone (median)",
        format!("{:.1?}", median(samples))
    );
    let samples: Vec<Duration> = (0..300)
        .map(|_| {
            let start = Instant::now();
            let runtime = rquickjs::Runtime::new().unwrap();
            let context = rquickjs::Context::full(&runtime).unwrap();
            let took = start.elapsed();
            drop(context);
            drop(runtime);
            took
        })
        .collect();
    println!(
        "{:<44} {:>14}",
        "  bare QuickJS runtime + context (median)",
        format!("{:.1?}", median(samples))
    );

    // One host-function call, measured inside a script.
    let session = Session::new(limits.clone(), capabilities()).unwrap();
    let calls = 100_000;
    let empty = session
        .run_blocking(format!("for (let i = 0; i < {calls}; i++) {{}}"))
        .unwrap()
        .duration;
    let out = session
        .run_blocking(format!("for (let i = 0; i < {calls}; i++) tap(i)"))
        .unwrap();
    assert!(out.error.is_none(), "{out:?}");
    let per_call = out.duration.saturating_sub(empty) / calls;
    report(
        "host call round trip tap(i)",
        format!("{per_call:.2?}"),
        per_call <= Duration::from_micros(20),
        "20 µs",
    );
    let noop = session
        .run_blocking(format!("for (let i = 0; i < {calls}; i++) noop()"))
        .unwrap();
    println!(
        "{:<44} {:>14}",
        "  noop() without arguments",
        format!("{:.2?}", noop.duration.saturating_sub(empty) / calls)
    );
    let samples: Vec<Duration> = (0..1000)
        .map(|_| {
            let start = Instant::now();
            black_box(session.run_blocking("tap(1).tapped").unwrap());
            start.elapsed()
        })
        .collect();
    println!(
        "{:<44} {:>14}",
        "  whole run `tap(1).tapped` from caller",
        format!("{:.1?}", median(samples))
    );

    // 1 MB through input_text.
    session
        .run_blocking("var big = 'x'.repeat(1 << 20)")
        .unwrap();
    let samples: Vec<Duration> = (0..50)
        .map(|_| {
            let out = session.run_blocking("input_text(big)").unwrap();
            assert_eq!(out.value, Some(json!(1 << 20)));
            out.duration
        })
        .collect();
    let big = median(samples);
    report(
        "1 MB string through input_text",
        format!("{big:.2?}"),
        big <= Duration::from_millis(5),
        "5 ms",
    );
    let samples: Vec<Duration> = (0..50)
        .map(|_| {
            session
                .run_blocking("input_text('é'.repeat(1 << 19))")
                .unwrap()
                .duration
        })
        .collect();
    println!(
        "{:<44} {:>14}",
        "  1 MB non-ASCII, built in the same run",
        format!("{:.2?}", median(samples))
    );
    drop(session);

    // Memory per idle session: the engine's own count and process RSS growth over 100.
    let rss_before = rss_bytes();
    let sessions: Vec<Session> = (0..100)
        .map(|_| Session::new(limits.clone(), capabilities()).unwrap())
        .collect();
    for session in &sessions {
        session
            .run_blocking("let warm = ui_state.elements.length")
            .unwrap();
    }
    let rss_after = rss_bytes();
    let heap: u64 = sessions
        .iter()
        .map(|s| s.memory_usage_blocking().unwrap().allocated_bytes)
        .sum::<u64>()
        / 100;
    report(
        "engine heap per idle session",
        format!("{:.0} KiB", heap as f64 / 1024.0),
        heap <= 1024 * 1024,
        "1 MB",
    );
    if let (Some(before), Some(after)) = (rss_before, rss_after) {
        let per = after.saturating_sub(before) / 100;
        report(
            "RSS growth per idle session (100)",
            format!("{:.0} KiB", per as f64 / 1024.0),
            per <= 1024 * 1024,
            "1 MB",
        );
    }
    drop(sessions);
}
