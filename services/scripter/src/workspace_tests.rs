//! Unit tests of the task workspace: names that escape, links, the size cap, pruning.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn open(root: &Path, task: &str, max: u64) -> Workspace {
    Workspace::open(root, task, max, 10).unwrap()
}

#[test]
fn writes_reads_lists_and_deletes_inside_the_task_folder() {
    let root = tempfile::tempdir().unwrap();
    let ws = open(root.path(), "t-1", 1000);
    assert!(ws.dir().starts_with(root.path().canonicalize().unwrap()));
    assert_eq!(ws.dir().file_name().unwrap(), "task-t-1");
    let info = ws.write("notes.txt", b"hello").unwrap();
    assert_eq!(info.size, 5);
    assert_eq!(info.path, ws.dir().join("notes.txt"));
    ws.write("data/page1.json", b"{}").unwrap();
    assert_eq!(ws.read("notes.txt").unwrap(), b"hello");
    let names: Vec<(String, u64)> = ws
        .list()
        .unwrap()
        .into_iter()
        .map(|f| (f.name, f.size))
        .collect();
    assert_eq!(
        names,
        vec![("data/page1.json".into(), 2), ("notes.txt".into(), 5)]
    );
    ws.write("notes.txt", b"hi").unwrap();
    assert_eq!(ws.read("notes.txt").unwrap(), b"hi");
    assert!(ws.delete("notes.txt").unwrap());
    assert!(!ws.delete("notes.txt").unwrap());
    assert!(
        ws.read("notes.txt")
            .unwrap_err()
            .contains("there is no file `notes.txt`")
    );
}

#[test]
fn names_that_would_leave_the_folder_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let ws = open(root.path(), "t", 1000);
    for bad in [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "",
        "a//b",
        "./a",
        "a\\b",
        "a\0b",
        "..",
    ] {
        let e = ws.write(bad, b"x").unwrap_err();
        assert!(e.contains("is refused"), "{bad:?}: {e}");
        assert!(ws.read(bad).is_err());
    }
    assert!(!root.path().join("x").exists());
    assert!(ws.list().unwrap().is_empty());
}

#[test]
fn links_are_not_followed() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let ws = open(root.path(), "t", 1000);
    std::os::unix::fs::symlink(outside.path(), ws.dir().join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), ws.dir().join("s")).unwrap();
    assert!(ws.read("out/secret").unwrap_err().contains("is a link"));
    assert!(ws.read("s").unwrap_err().contains("is a link"));
    assert!(ws.write("out/new", b"x").unwrap_err().contains("is a link"));
    assert!(ws.write("s", b"x").unwrap_err().contains("is a link"));
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "s3cret"
    );
    assert!(!outside.path().join("new").exists());
    assert!(ws.list().unwrap().is_empty(), "links are not listed");
}

#[test]
fn the_size_cap_counts_every_file_and_replacements_once() {
    let root = tempfile::tempdir().unwrap();
    let ws = open(root.path(), "t", 10);
    ws.write("a", b"123456").unwrap();
    let e = ws.write("b", b"12345").unwrap_err();
    assert!(
        e.contains("would bring the workspace to 11 bytes, over its limit of 10 bytes"),
        "{e}"
    );
    assert!(ws.read("b").is_err());
    ws.write("a", b"1234567890").unwrap();
    assert_eq!(ws.list().unwrap().len(), 1);
}

#[test]
fn task_ids_become_distinct_safe_folder_names() {
    assert_eq!(dir_name("task-42_a.b"), "task-task-42_a.b");
    let a = dir_name("../etc");
    let b = dir_name("__/etc");
    assert!(a.starts_with("task-.._etc-") && !a.contains('/'), "{a}");
    assert_ne!(a, b);
    assert!(dir_name(&"x".repeat(500)).len() < 100);
}

#[test]
fn only_the_most_recently_used_task_folders_are_kept() {
    let root = tempfile::tempdir().unwrap();
    let old = SystemTime::now() - std::time::Duration::from_secs(3600);
    for (i, task) in ["a", "b", "c"].iter().enumerate() {
        let ws = Workspace::open(root.path(), task, 100, 10).unwrap();
        ws.write("f", b"x").unwrap();
        let when = old + std::time::Duration::from_secs(i as u64);
        std::fs::File::open(ws.dir())
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    std::fs::create_dir(root.path().join("not-ours")).unwrap();
    let ws = Workspace::open(root.path(), "d", 100, 2).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, vec!["not-ours", "task-c", "task-d"]);
    assert!(ws.dir().exists());
}

#[test]
fn a_folder_in_use_is_never_pruned() {
    let root = tempfile::tempdir().unwrap();
    let busy = Workspace::open(root.path(), "busy", 100, 1).unwrap();
    busy.write("f", b"x").unwrap();
    let old = SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::open(busy.dir())
        .unwrap()
        .set_modified(old)
        .unwrap();
    let idle = Workspace::open(root.path(), "idle", 100, 1).unwrap();
    drop(idle);
    let _next = Workspace::open(root.path(), "next", 100, 1).unwrap();
    assert!(busy.dir().join("f").exists(), "the busy folder survives");
    assert!(
        !root.path().join("task-idle").exists(),
        "the idle one is pruned"
    );
    drop(busy);
    let _last = Workspace::open(root.path(), "last", 100, 1).unwrap();
    assert!(
        !root.path().join("task-busy").exists(),
        "pruned once released"
    );
}

#[test]
fn media_types_come_from_extensions() {
    assert_eq!(mime_type("a.JSON"), "application/json");
    assert_eq!(mime_type("dir/photo.jpeg"), "image/jpeg");
    assert_eq!(mime_type("README"), "application/octet-stream");
}
