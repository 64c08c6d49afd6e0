use super::*;
use crate::record::{KEPT_ANSWER, KEPT_FILES, KEPT_TEXT, compact, cut};
use droidmesh_proto::v1::{FileDetail, Subgoal, TaskCompleted, TaskRequest, TaskStatus};

fn status(detail: &str) -> task_event::Kind {
    task_event::Kind::Status(TaskStatus {
        state: 0,
        detail: detail.into(),
    })
}

/// Bounds of a task that a store keeps, in the tests of its writes.
const STORED: Limits = Limits {
    max_events: 100,
    max_event_bytes: 1 << 20,
    max_queued: 2,
};

fn entry(max_events: usize, max_event_bytes: usize) -> TaskEntry {
    entry_and_queue(max_events, max_event_bytes).0
}

fn entry_and_queue(
    max_events: usize,
    max_event_bytes: usize,
) -> (TaskEntry, mpsc::Receiver<Control>) {
    let limits = Limits {
        max_events,
        max_event_bytes,
        max_queued: 2,
    };
    let task = Task {
        id: "t1".into(),
        ..Task::default()
    };
    TaskEntry::new(task, 1, limits, None)
}

#[test]
fn events_are_numbered_without_gaps_and_read_from_any_point() {
    let t = entry(100, 1 << 20);
    for _ in 0..5 {
        t.push(status(""));
    }
    let seqs: Vec<u64> = t.events_from(0, 100).iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    assert_eq!(t.events_from(4, 100).len(), 2);
    assert_eq!(t.events_from(9, 100).len(), 0);
    assert_eq!(t.snapshot().last_seq, 5);
    assert_eq!(*t.subscribe().borrow(), 5);
    assert_eq!(
        t.log_end(),
        LogEnd {
            last_seq: 5,
            ended: false
        }
    );
}

#[test]
fn the_log_keeps_the_newest_events_within_its_count_and_bytes() {
    let t = entry(10, 1 << 20);
    for _ in 0..25 {
        t.push(status("x"));
    }
    t.push(task_event::Kind::Completed(TaskCompleted::default()));
    let kept: Vec<u64> = t.events_from(1, 100).iter().map(|e| e.seq).collect();
    assert_eq!(kept, (17..=26).collect::<Vec<_>>());
    assert_eq!(t.snapshot().first_seq, 17);
    assert!(t.events_from(1, 100).iter().all(|e| e.task_id == "t1"));
    assert!(t.log_end().ended);

    // 1 KiB events in a 4 KiB budget: three fit (each is a little over 1 KiB encoded).
    let t = entry(1_000, 4 * 1024);
    for _ in 0..10 {
        t.push(status(&"b".repeat(1024)));
    }
    let (n, bytes) = t.log_size();
    assert_eq!(n, 3);
    assert!(bytes <= 4 * 1024, "{bytes}");
    // An event larger than the whole budget still stays: the newest is never dropped.
    t.push(task_event::Kind::Completed(TaskCompleted {
        answer: "a".repeat(10_000),
        ..TaskCompleted::default()
    }));
    let events = t.events_from(1, 100);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].seq, 11);
}

#[test]
fn a_full_queue_refuses_and_cancel_is_never_refused() {
    let (t, mut rx) = entry_and_queue(10, 1 << 20);
    assert_eq!(t.control(Control::Note("a".into())), Ok(()));
    assert_eq!(t.control(Control::Note("b".into())), Ok(()));
    assert_eq!(t.control(Control::Note("c".into())), Err(Refused::Full(2)));
    assert_eq!(rx.try_recv(), Ok(Control::Note("a".into())));
    assert_eq!(t.control(Control::Note("d".into())), Ok(()));
    t.cancel("first".into());
    t.cancel("second".into());
    let reason = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(t.cancelled());
    assert_eq!(reason, "first");
    drop(rx);
    assert_eq!(t.control(Control::Note("e".into())), Err(Refused::Ended));
}

/// The record of an ended task at its largest: every field the gateway keeps is at its cap.
pub(crate) fn largest_task() -> Task {
    let big = "x".repeat(100_000);
    Task {
        id: format!("task-{}", "0".repeat(32)),
        request: Some(TaskRequest {
            goal: big.clone(),
            app_card: big.clone(),
            output_schema: Some(big.clone()),
            device: "emulator-5554".into(),
            conversation_id: "c".repeat(128),
            secret_ids: vec!["mail_password".into(); 4],
            ..TaskRequest::default()
        }),
        plan: vec![
            Subgoal {
                text: big.clone(),
                ..Subgoal::default()
            };
            10
        ],
        memory: big.clone(),
        answer: big.clone(),
        error: big.clone(),
        structured_output: Some(big.clone()),
        files: vec![
            FileDetail {
                name: "report.csv".into(),
                path: "/workspace/task/report.csv".into(),
                size_bytes: 1234,
                ..FileDetail::default()
            };
            100
        ],
        ..Task::default()
    }
}

#[test]
fn an_ended_task_is_compact() {
    let mut t = largest_task();
    compact(&mut t);
    let size = t.encoded_len();
    println!("largest ended-task record: {size} bytes encoded");
    assert!(size <= 16 * 1024, "an ended task's record is {size} bytes");
    assert_eq!(t.answer.chars().count(), KEPT_ANSWER + 1);
    assert!(t.answer.ends_with('…'));
    assert!(t.plan.is_empty() && t.structured_output.is_none());
    assert_eq!(t.files.len(), KEPT_FILES);
    assert_eq!(cut("héllo", 2), "hé…");
    assert_eq!(cut("hé", 2), "hé");
}

#[test]
fn the_event_that_ends_a_task_asks_the_writer_not_to_wait() {
    let dirty = Arc::new(Dirty::default());
    let (t, _queue) = TaskEntry::new(Task::default(), 7, STORED, Some(dirty.clone()));
    t.push(status("step"));
    t.set_step(2);
    assert!(
        !dirty.is_urgent(),
        "a step's events may wait to be gathered"
    );
    assert_eq!(dirty.take(), BTreeSet::from([7]));
    t.push(task_event::Kind::Completed(TaskCompleted::default()));
    assert!(dirty.is_urgent(), "the final event is written at once");
    assert_eq!(dirty.take(), BTreeSet::from([7]));
    assert!(!dirty.is_urgent(), "a write covers it");
}

#[test]
fn a_running_tasks_writes_leave_its_request_to_the_store_and_its_last_holds_it_compacted() {
    let dirty = Arc::new(Dirty::default());
    let request = largest_task().request;
    let task = Task {
        id: "t1".into(),
        request: request.clone(),
        ..Task::default()
    };
    let (t, _queue) = TaskEntry::new(task, 7, STORED, Some(dirty));
    t.push(status("step"));
    let (w, _) = t.unwritten();
    assert!(
        w.task.request.is_none(),
        "a running task's write carries its request"
    );
    assert_eq!(w.events.len(), 1);
    // The record in memory keeps it: reads from memory show it whole.
    assert_eq!(t.snapshot().request, request);
    t.push(task_event::Kind::Completed(TaskCompleted::default()));
    t.compact();
    let (w, _) = t.unwritten();
    let kept = w
        .task
        .request
        .expect("an ended task's last write holds its request");
    assert_eq!(kept.goal.chars().count(), KEPT_TEXT + 1);
    assert_eq!(kept.device, "emulator-5554");
}
