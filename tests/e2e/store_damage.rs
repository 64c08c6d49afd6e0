//! The embedded task store damaged or unwritable under `droidmesh serve gateway`, as its user
//! meets it: each damaged file (a table or a column dropped, the file truncated, garbage over
//! a few pages) makes the gateway exit at start, naming the file, what is wrong and what to
//! do; each healthy file it cannot write (read-only, its directory read-only, a file size
//! limit, locked by another process) likewise, in words that say what failed and never to
//! move it away, and the file is left as it was, every task readable once the cause is gone.
//! A store that fills up while the gateway runs ends each call with UNAVAILABLE naming the
//! store, well before the call's own deadline. The store is made by the gateway itself and
//! damaged by this process (SQLite through rusqlite, or plain writes), which also holds the
//! lock of the "locked" case: another process, as the user's would be.
use super::lone_gateway::{
    CALL, Gateway, answered, as_unprivileged, chown_nobody, file_size_limit, mode, with_deadline,
};
use super::*;
use std::path::{Path, PathBuf};

fn waiting(goal: &str) -> TaskRequest {
    TaskRequest {
        goal: format!("{goal} {}", "x".repeat(3_000)),
        wait_for_device: true,
        ..TaskRequest::default()
    }
}

/// Submits a task that waits for a device and cancels it, so that it ends; its id.
async fn ended_task(g: &mut GatewayClient<Channel>, goal: &str) -> String {
    let id = g
        .submit_task(waiting(goal))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let t = g
        .cancel_task(CancelTaskRequest {
            task_id: id.clone(),
            reason: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(t.state(), TaskState::Cancelled, "{t:?}");
    id
}

/// A healthy store of `n` ended tasks, made by a gateway; its path and the tasks' ids.
async fn healthy(dir: &Path, n: usize) -> (PathBuf, Vec<String>) {
    let path = dir.join("healthy.sqlite");
    let mut gw = Gateway::spawn(&path, &[]);
    let mut g = gw.client().await;
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(ended_task(&mut g, &format!("task {i}")).await);
    }
    gw.stop();
    let c = rusqlite::Connection::open(&path).unwrap();
    let ended: usize = c
        .query_row(
            "SELECT count(*) FROM tasks WHERE ended_at_ms IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ended, n, "the healthy store does not hold every ended task");
    (path, ids)
}

/// A copy of the healthy store for one case.
fn copy(healthy: &Path, dir: &Path, case: &str) -> PathBuf {
    let path = dir.join(format!("{case}.sqlite"));
    std::fs::copy(healthy, &path).unwrap();
    path
}

/// The gateway started on `store` exits at start, unsuccessfully, naming the file and saying
/// each of `words`; its output.
fn refused_saying(store: &Path, wrap: &[&str], case: &str, words: &[&str]) -> String {
    let (status, out) = Gateway::spawn(store, wrap).refused(case);
    assert!(!status.success(), "{case}: {status}\n{out}");
    assert!(out.contains("gateway cannot start"), "{case}: {out}");
    assert!(out.contains(&store.display().to_string()), "{case}: {out}");
    for w in words {
        assert!(out.contains(w), "{case}: expected {w:?} in:\n{out}");
    }
    out
}

fn not_called_damaged(case: &str, out: &str) {
    for w in ["damaged", "move it away", "not a SQLite database"] {
        assert!(
            !out.contains(w),
            "{case}: a healthy store called {w:?}:\n{out}"
        );
    }
}

/// The file is as it was and a gateway started on it (as this user, without limits) has
/// every task of `ids`.
async fn intact(store: &Path, before: &[u8], ids: &[String], case: &str) {
    assert!(
        std::fs::read(store).unwrap() == before,
        "{case}: the file changed"
    );
    let mut gw = Gateway::spawn(store, &[]);
    let mut g = gw.client().await;
    for id in ids {
        let t = answered(
            "GetTask",
            g.get_task(with_deadline(GetTaskRequest {
                task_id: id.clone(),
            })),
        )
        .await
        .unwrap_or_else(|s| panic!("{case}: task {id} was not kept: {s:?}"))
        .into_inner();
        assert_eq!(t.state(), TaskState::Cancelled, "{case}: {t:?}");
    }
    gw.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn each_damaged_store_is_refused_at_start_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let (healthy, _) = healthy(dir.path(), 20).await;
    let store = copy(&healthy, dir.path(), "dropped-table");
    rusqlite::Connection::open(&store)
        .unwrap()
        .execute_batch("DROP TABLE events")
        .unwrap();
    refused_saying(
        &store,
        &[],
        "dropped table",
        &["damaged", "table events is missing", "move it away"],
    );

    let store = copy(&healthy, dir.path(), "dropped-column");
    rusqlite::Connection::open(&store)
        .unwrap()
        .execute_batch("ALTER TABLE tasks DROP COLUMN tokens")
        .unwrap();
    refused_saying(
        &store,
        &[],
        "dropped column",
        &["damaged", "column tasks.tokens is missing", "move it away"],
    );

    let store = copy(&healthy, dir.path(), "truncated");
    let len = std::fs::metadata(&store).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&store)
        .unwrap();
    f.set_len(len / 2 / 4096 * 4096).unwrap();
    drop(f);
    refused_saying(&store, &[], "truncated", &["damaged", "move it away"]);

    let store = copy(&healthy, dir.path(), "garbage");
    let mut bytes = std::fs::read(&store).unwrap();
    let at = bytes.len() / 4096 / 2 * 4096;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for b in &mut bytes[at..at + 3 * 4096] {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        *b = seed as u8;
    }
    std::fs::write(&store, &bytes).unwrap();
    refused_saying(&store, &[], "garbage pages", &["damaged", "move it away"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_healthy_store_that_cannot_be_written_is_refused_saying_why_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (healthy, ids) = healthy(dir.path(), 5).await;
    let before = std::fs::read(&healthy).unwrap();

    if let Some(wrap) = as_unprivileged("read-only file") {
        // A directory the gateway's user may write, holding a file it may only read.
        let sub = dir.path().join("ro-file");
        std::fs::create_dir(&sub).unwrap();
        let store = copy(&healthy, &sub, "store");
        if wrap.is_empty() {
            mode(&store, 0o444);
        } else {
            chown_nobody(&sub);
            mode(dir.path(), 0o755);
        }
        let out = refused_saying(&store, &wrap, "read-only file", &["cannot be written"]);
        not_called_damaged("read-only file", &out);
        mode(&store, 0o644);
        intact(&store, &before, &ids, "read-only file").await;
    }

    if let Some(wrap) = as_unprivileged("read-only directory") {
        // A file the gateway's user may write, in a directory it may not (SQLite keeps its
        // write-ahead log beside the file).
        let sub = dir.path().join("ro-dir");
        std::fs::create_dir(&sub).unwrap();
        let store = copy(&healthy, &sub, "store");
        if wrap.is_empty() {
            mode(&sub, 0o555);
        } else {
            chown_nobody(&store);
            mode(dir.path(), 0o755);
        }
        let out = refused_saying(
            &store,
            &wrap,
            "read-only directory",
            &["cannot be written", &sub.display().to_string()],
        );
        not_called_damaged("read-only directory", &out);
        mode(&sub, 0o755);
        intact(&store, &before, &ids, "read-only directory").await;
    }

    if let Some(wrap) = file_size_limit("file size limit at start", 100) {
        let store = copy(&healthy, dir.path(), "fsize");
        let wrap: Vec<&str> = wrap.iter().map(String::as_str).collect();
        let out = refused_saying(&store, &wrap, "file size limit", &["file size limit"]);
        not_called_damaged("file size limit", &out);
        intact(&store, &before, &ids, "file size limit").await;
    }

    // Locked by this process: another process than the gateway, as a user's sqlite3 would be.
    let store = copy(&healthy, dir.path(), "locked");
    let other = rusqlite::Connection::open(&store).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let out = refused_saying(
        &store,
        &[],
        "locked",
        &[
            "locked by another process",
            &format!("pid {}", std::process::id()),
        ],
    );
    not_called_damaged("locked", &out);
    other.execute_batch("ROLLBACK").unwrap();
    drop(other);
    intact(&store, &before, &ids, "locked").await;
}

fn unavailable_naming(what: &str, s: &tonic::Status, store: &Path) {
    assert_eq!(s.code(), tonic::Code::Unavailable, "{what}: {s:?}");
    assert!(
        s.message().contains(&store.display().to_string()),
        "{what}: {s:?}"
    );
    assert!(s.message().contains("file size limit"), "{what}: {s:?}");
    not_called_damaged(what, s.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_that_fills_up_ends_each_call_unavailable_and_keeps_its_tasks() {
    let case = "a_store_that_fills_up_ends_each_call_unavailable_and_keeps_its_tasks";
    // Room for the gateway's first writes and a few tasks' (WAL frames of 4 KiB pages).
    let Some(wrap) = file_size_limit(case, 32 + 40 * 4_120) else {
        return;
    };
    let wrap: Vec<&str> = wrap.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let (healthy, mut ids) = healthy(dir.path(), 3).await;
    let store = copy(&healthy, dir.path(), "fills-up");
    let mut gw = Gateway::spawn(&store, &wrap);
    let mut g = gw.client().await;
    let mut refusal = None;
    let mut created = Vec::new();
    for i in 0..200 {
        match answered(
            "SubmitTask",
            g.submit_task(with_deadline(waiting(&format!("fill {i}")))),
        )
        .await
        {
            Ok(r) => created.push(r.into_inner().task_id),
            Err(s) => {
                refusal = Some(s);
                break;
            }
        }
    }
    let refusal = refusal.expect("200 tasks were stored under a file size limit of 160 KiB");
    unavailable_naming("SubmitTask", &refusal, &store);
    assert!(!created.is_empty(), "{refusal:?}");

    // A task whose end cannot be stored: its watchers are answered, not left waiting.
    let first = created[0].clone();
    let t = answered(
        "CancelTask",
        g.cancel_task(with_deadline(CancelTaskRequest {
            task_id: first.clone(),
            reason: String::new(),
        })),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(t.state(), TaskState::Cancelled);
    let watch = answered(
        "WatchTask",
        g.watch_task(with_deadline(WatchTaskRequest {
            task_id: first.clone(),
            from_seq: 1,
        })),
    )
    .await;
    let status = match watch {
        Err(s) => s,
        Ok(stream) => {
            let mut stream = stream.into_inner();
            loop {
                match answered("WatchTask's stream", stream.next()).await {
                    Some(Ok(_)) => continue,
                    Some(Err(s)) => break s,
                    None => panic!("WatchTask ended without the task's end, and without an error"),
                }
            }
        }
    };
    unavailable_naming("WatchTask", &status, &store);

    // The same over HTTP: 503 with the gRPC code's name, as every refusal of the face.
    let url = format!("http://127.0.0.1:{}/v1/tasks/{first}/events", gw.http);
    droidmesh_llm::install_crypto_provider();
    let http = reqwest::Client::builder().timeout(CALL).build().unwrap();
    let resp = answered("GET events", http.get(&url).send()).await.unwrap();
    assert_eq!(resp.status(), 503);
    let body: serde_json::Value = answered("the body", resp.json()).await.unwrap();
    assert_eq!(body["code"], "UNAVAILABLE", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("file size limit"),
        "{body}"
    );

    // RunTask cannot record its task: refused at once.
    let run = answered("RunTask", g.run_task(with_deadline(waiting("one more")))).await;
    let status = match run {
        Err(s) => s,
        Ok(stream) => match answered("RunTask's stream", stream.into_inner().next()).await {
            Some(Err(s)) => s,
            other => panic!("RunTask on a full store: {other:?}"),
        },
    };
    unavailable_naming("RunTask", &status, &store);
    gw.stop();

    // Nothing was discarded: without the limit, every task is there.
    ids.extend(created);
    let mut gw = Gateway::spawn(&store, &[]);
    let mut g = gw.client().await;
    for id in &ids {
        answered(
            "GetTask",
            g.get_task(with_deadline(GetTaskRequest {
                task_id: id.clone(),
            })),
        )
        .await
        .unwrap_or_else(|s| panic!("task {id} was lost: {s:?}"));
    }
    gw.stop();
}
