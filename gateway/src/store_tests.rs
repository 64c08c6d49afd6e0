use super::*;
use crate::record::SUMMARY_CHARS;
use droidmesh_proto::v1::TaskState;

fn store(keep: usize, keep_for_ms: u64) -> Store {
    Store::new(
        Retention { keep, keep_for_ms },
        Limits {
            max_events: 100,
            max_event_bytes: 1 << 20,
            max_queued: 4,
        },
    )
}

fn add(store: &Store, id: &str) -> Arc<TaskEntry> {
    store
        .insert(Task {
            id: id.into(),
            request: Some(droidmesh_proto::v1::TaskRequest {
                goal: format!("goal of {id}"),
                ..Default::default()
            }),
            state: TaskState::Running as i32,
            ..Task::default()
        })
        .0
}

fn end(store: &Store, t: &TaskEntry) {
    t.update(|task| task.state = TaskState::Succeeded as i32);
    store.ended(t);
}

fn ids(store: &Store) -> Vec<String> {
    store
        .page("", &[], MAX_PAGE, "")
        .unwrap()
        .0
        .into_iter()
        .map(|s| s.id)
        .collect()
}

#[test]
fn only_the_oldest_ended_tasks_are_forgotten_beyond_the_count() {
    let store = store(2, u64::MAX);
    let tasks: Vec<_> = (0..4).map(|i| add(&store, &format!("t{i}"))).collect();
    // t3 runs on; t0, t2, t1 end in that order.
    for i in [0, 2, 1] {
        end(&store, &tasks[i]);
    }
    assert_eq!(ids(&store), ["t3", "t2", "t1"]);
    add(&store, "t4");
    assert_eq!(ids(&store), ["t4", "t3", "t2", "t1"]);
    assert!(store.get("t0").is_none());
}

#[test]
fn ended_tasks_are_forgotten_after_their_time_and_running_ones_never() {
    let store = store(1_000, 1);
    let running = add(&store, "running");
    let done = add(&store, "done");
    end(&store, &done);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(store.get("done").is_none());
    assert!(store.get("running").is_some());
    assert_eq!(ids(&store), ["running"]);
    drop(running);
}

#[test]
fn pages_are_newest_first_and_stable_while_tasks_are_added() {
    let store = store(1_000, u64::MAX);
    for i in 0..5 {
        add(&store, &format!("t{i}"));
    }
    let (first, next) = store.page("", &[], 2, "").unwrap();
    let first: Vec<_> = first.into_iter().map(|s| s.id).collect();
    assert_eq!(first, ["t4", "t3"]);
    add(&store, "t5");
    let (second, next) = store.page("", &[], 2, &next).unwrap();
    let second: Vec<_> = second.into_iter().map(|s| s.id).collect();
    assert_eq!(second, ["t2", "t1"]);
    let (last, next) = store.page("", &[], 2, &next).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(next, "");
    let e = store.page("", &[], 2, "garbage").unwrap_err();
    assert!(e.to_string().contains("page_token 'garbage'"), "{e}");
}

#[test]
fn a_summary_has_no_request_and_a_short_goal() {
    let store = store(10, u64::MAX);
    let t = store
        .insert(Task {
            id: "t".into(),
            request: Some(droidmesh_proto::v1::TaskRequest {
                goal: "g".repeat(5_000),
                ..Default::default()
            }),
            ..Task::default()
        })
        .0;
    t.update(|task| {
        task.state = TaskState::Failed as i32;
        task.error = "e".repeat(5_000);
    });
    store.ended(&t);
    let (page, _) = store.page("", &[TaskState::Failed as i32], 10, "").unwrap();
    assert_eq!(page[0].goal.chars().count(), SUMMARY_CHARS + 1);
    assert_eq!(page[0].final_reason.chars().count(), SUMMARY_CHARS + 1);
    assert!(!page[0].success);
    assert!(
        store
            .page("", &[TaskState::Running as i32], 10, "")
            .unwrap()
            .0
            .is_empty()
    );
}

#[test]
fn pages_in_memory_hold_only_the_tasks_of_one_tenant() {
    let store = store(1_000, u64::MAX);
    for i in 0..6 {
        store.insert(Task {
            id: format!("t{i}"),
            tenant: if i % 2 == 0 { "acme" } else { "globex" }.into(),
            state: TaskState::Running as i32,
            ..Task::default()
        });
    }
    let page = |tenant: &str, token: &str| {
        let (rows, next) = store.page(tenant, &[], 2, token).unwrap();
        (rows.into_iter().map(|s| s.id).collect::<Vec<_>>(), next)
    };
    let (first, next) = page("acme", "");
    assert_eq!(first, ["t4", "t2"]);
    let (second, next) = page("acme", &next);
    assert_eq!((second, next), (vec!["t0".to_owned()], String::new()));
    assert_eq!(page("globex", "").0, ["t5", "t3"]);
    assert!(page("", "").0.is_empty());
}
