//! The embedded store on damaged and on unwritable files, as the gateway meets them at start
//! and while it runs: each damaged file refused as damaged (and only those advised to be moved
//! away), each healthy file that cannot be written refused or failed saying what failed, and
//! left as it was, its tasks readable once the cause is gone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use crate::persist::Fault;
use crate::persist::conformance::{event, task, write};
use droidmesh_proto::v1::TaskState;

/// A store in a temporary directory holding `tasks` ended tasks, each with a few events, closed.
async fn filled(tasks: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    for i in 0..tasks {
        let mut t = task(&format!("t{i}"), TaskState::Running);
        store.create(&t, "me").await.unwrap();
        t.state = TaskState::Succeeded as i32;
        t.first_seq = 1;
        t.last_seq = 8;
        t.answer = "done ".repeat(100);
        store
            .write("me", vec![write(t, (1..=8).map(event).collect(), Some(2))])
            .await
            .unwrap();
    }
    drop(store);
    (dir, path)
}

fn refusal(path: &Path) -> String {
    match SqliteStore::open(path) {
        Ok(_) => panic!("{} was opened", path.display()),
        Err(e) => e.to_string(),
    }
}

fn assert_damaged(e: &str, path: &Path) {
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("damaged"), "{e}");
    assert!(e.contains("move it away"), "{e}");
}

/// Words for a store that is healthy but cannot be written: never that it is damaged, never
/// to move it away.
fn assert_not_called_damaged(e: &str) {
    assert!(!e.contains("damaged"), "{e}");
    assert!(!e.contains("move it away"), "{e}");
    assert!(!e.contains("not a SQLite database"), "{e}");
}

/// A deterministic stream of bytes that is nothing SQLite wrote.
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

#[tokio::test]
async fn a_file_with_garbage_over_a_few_pages_is_refused_as_damaged() {
    let (_dir, path) = filled(60).await;
    let mut bytes = std::fs::read(&path).unwrap();
    let pages = bytes.len() / 4096;
    assert!(pages > 12, "{pages} pages");
    // Three pages in the middle: b-tree pages of the tasks and their events.
    let at = pages / 2 * 4096;
    bytes[at..at + 3 * 4096].copy_from_slice(&garbage(3 * 4096, 0x9e37_79b9_7f4a_7c15));
    std::fs::write(&path, &bytes).unwrap();
    assert_damaged(&refusal(&path), &path);
}

#[tokio::test]
async fn a_truncated_file_is_refused_as_damaged() {
    let (_dir, path) = filled(60).await;
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 2 / 4096 * 4096).unwrap();
    drop(f);
    assert_damaged(&refusal(&path), &path);
}

/// Whether this process writes files whatever their permissions (root): then a read-only
/// file cannot be made here, and the test says it skipped (`tests/e2e/store_damage.rs` runs
/// the gateway as another user for it).
fn writes_read_only_files(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, b"x").unwrap();
    let mut perms = std::fs::metadata(&probe).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&probe, perms).unwrap();
    let writes = std::fs::OpenOptions::new().write(true).open(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    writes
}

#[tokio::test]
async fn a_read_only_file_is_refused_saying_so_and_left_intact() {
    let (dir, path) = filled(5).await;
    if writes_read_only_files(dir.path()) {
        eprintln!(
            "SKIPPED a_read_only_file_is_refused_saying_so_and_left_intact: this process \
             writes read-only files (root); the end-to-end store_damage test covers it"
        );
        return;
    }
    let before = std::fs::read(&path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms.clone()).unwrap();
    let e = refusal(&path);
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("read-only") || e.contains("permission"), "{e}");
    assert_not_called_damaged(&e);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.count().await.unwrap(), 5);
}

#[tokio::test]
async fn a_full_store_fails_its_writes_saying_so_and_keeps_its_tasks() {
    let (_dir, path) = filled(5).await;
    let store = SqliteStore::open(&path).unwrap();
    // The file may not grow: what a full disk does to it (SQLITE_FULL).
    store.execute("PRAGMA max_page_count = 1").await.unwrap();
    let mut failed = None;
    for i in 0..200 {
        let mut t = task(&format!("new{i}"), TaskState::Running);
        t.answer = "x".repeat(8_000);
        if let Err(e) = store.create(&t, "me").await {
            failed = Some(e);
            break;
        }
    }
    let e = failed.expect("200 tasks were stored in a store that may not grow");
    assert!(matches!(e.fault(), Some(Fault::Lasting)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("full"), "{e}");
    assert_not_called_damaged(&e);
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    for i in 0..5 {
        let (_, t) = store.task(&format!("t{i}")).await.unwrap().unwrap();
        assert_eq!(t.state(), TaskState::Succeeded);
        assert_eq!(store.events(&t.id, 1, 100).await.unwrap().len(), 8);
    }
}

#[test]
fn a_store_locked_by_another_connection_is_refused_as_locked_not_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let e = refusal(&path);
    assert!(e.contains("locked by another process"), "{e}");
    assert_not_called_damaged(&e);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    other.execute_batch("ROLLBACK").unwrap();
    drop(other);
    assert!(SqliteStore::open(&path).is_ok());
}

/// Each SQLite error as the gateway words it: what failed, whether waiting helps, and the
/// advice to move the file away only for a damaged one.
#[test]
fn sqlite_errors_are_worded_by_their_code() {
    use rusqlite::ffi;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let error = |code| rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
    for (code, words, fault, damaged) in [
        (
            ffi::SQLITE_BUSY,
            "locked by another process",
            Fault::Passing,
            false,
        ),
        (
            ffi::SQLITE_LOCKED,
            "locked by another process",
            Fault::Passing,
            false,
        ),
        (ffi::SQLITE_READONLY, "read-only", Fault::Lasting, false),
        (ffi::SQLITE_PERM, "permission", Fault::Lasting, false),
        (
            ffi::SQLITE_FULL,
            "disk holding it is full",
            Fault::Lasting,
            false,
        ),
        (
            ffi::SQLITE_IOERR,
            "input/output error",
            Fault::Lasting,
            false,
        ),
        (
            ffi::SQLITE_CANTOPEN,
            "cannot be opened",
            Fault::Lasting,
            false,
        ),
        (ffi::SQLITE_CORRUPT, "damaged", Fault::Lasting, true),
        (
            ffi::SQLITE_NOTADB,
            "not a SQLite database",
            Fault::Lasting,
            true,
        ),
    ] {
        let e = failed_at(&path)(error(code));
        assert_eq!(e.fault(), Some(fault), "{code}: {e}");
        let text = e.to_string();
        assert!(text.contains(words), "{code}: {text}");
        assert!(text.contains(&path.display().to_string()), "{code}: {text}");
        if damaged {
            assert!(text.contains("move it away"), "{code}: {text}");
        } else {
            assert_not_called_damaged(&text);
        }
    }
}

#[test]
fn a_store_error_for_a_missing_table_is_lasting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let c = Connection::open(&path).unwrap();
    let e = c.execute_batch("SELECT * FROM events").unwrap_err();
    let e = failed_at(&path)(e);
    assert_eq!(e.fault(), Some(Fault::Lasting));
    assert!(e.to_string().contains("no such table: events"), "{e}");
}
