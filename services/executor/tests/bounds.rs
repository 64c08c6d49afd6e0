//! What a long CodeAct run holds, measured by the allocator: a run of 1,000 steps against a
//! loopback model double keeps no more at its end than after its first hundred steps. A test
//! binary of its own, since the count is the whole process's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The counting allocator below is the only unsafe code: it forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use droidmesh_executor::ExecutorConfig;
use droidmesh_proto::v1::{CodeActInput, CodeActStart, DeviceBinding, agent_event, code_act_input};
use tokio_stream::StreamExt;

#[allow(dead_code)]
#[path = "rig.rs"]
mod rig;

/// Bytes allocated and not yet freed, in the whole process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is forwarded to `System` with the caller's layout unchanged; the counter
// only adds and subtracts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_step_run_holds_no_more_at_its_end_than_after_a_hundred_steps() {
    const STEPS: u32 = 1_000;
    // Each step's record is about 5 KB: a thought near the 600 characters the history keeps,
    // and 4,000 characters of output.
    let rig = rig::rig_with(
        vec![],
        ExecutorConfig {
            step_timeout_ms: 5_000,
            ..ExecutorConfig::default()
        },
    )
    .await;
    rig.llm.set_log_requests(false);
    let thought = "Still looking at the screen for the setting. ".repeat(13);
    rig.llm.set_fallback(rig::reply(&format!(
        "{thought}\n```js\nconsole.log('y'.repeat(4000))\n```"
    )));
    let (_device, lease) = rig.lease().await;
    let start = CodeActStart {
        task_id: "t-long".into(),
        goal: "Look for a setting that is not there".into(),
        device: Some(DeviceBinding {
            endpoint: rig.device_ep.clone(),
            lease: Some(lease),
        }),
        max_steps: STEPS,
        ..CodeActStart::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(CodeActInput {
        kind: Some(code_act_input::Kind::Start(start)),
    })
    .await
    .unwrap();
    let mut exec = rig.executor.clone();
    let mut stream = exec
        .run_code_act(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    // Bounded, with room for a slow machine; nothing below depends on how fast steps go.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(900);
    let (mut at_100, mut at_end) = (None, None);
    let done = loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("the run did not finish within 900 s")
            .expect("the stream ended before `finished`")
            .unwrap();
        match ev.kind {
            // Read as the step starts: the steps before it are in the run's history.
            Some(agent_event::Kind::Step(s)) if s.step == 100 => {
                at_100 = Some(LIVE.load(Ordering::Relaxed));
            }
            Some(agent_event::Kind::Step(s)) if s.step == STEPS => {
                at_end = Some(LIVE.load(Ordering::Relaxed));
            }
            Some(agent_event::Kind::Finished(f)) => break f,
            _ => {}
        }
    };
    assert_eq!(done.steps, STEPS, "{}", done.answer);
    assert!(done.answer.contains("step limit (1000)"), "{}", done.answer);
    let (at_100, at_end) = (at_100.unwrap(), at_end.unwrap());
    let grown = at_end.saturating_sub(at_100);
    eprintln!("live bytes: {at_100} after 99 steps, {at_end} after 999 (+{grown})");
    // 900 more steps kept whole would be about 4.5 MB; what is in flight (a prompt, a step's
    // events) is far below 1 MB.
    assert!(
        grown < 1024 * 1024,
        "the run grew by {grown} bytes between step 100 and step {STEPS} ({at_100} -> {at_end})"
    );
}
