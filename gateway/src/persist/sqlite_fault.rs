//! What went wrong with a SQLite task store, in words a user can act on: each SQLite error by
//! its code (locked, read-only, permission, disk full, input/output, damaged), made precise by
//! what the file system says (which directory cannot be written, which process holds the
//! lock, the process's file size limit), and whether waiting may mend it. Only a damaged file
//! is advised to be moved away: a healthy one that cannot be written is kept. Also the checks
//! a file passes at start: `PRAGMA quick_check` (bounded in time) and the schema's columns.
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};

use super::Fault;

/// What to do with a damaged file.
pub(crate) const MOVE_IT_AWAY: &str =
    "move it away to start with an empty store, or put back a copy";
/// What a healthy file that cannot be written asks for (a write that fails is rolled back:
/// what the file held stays).
const KEEP_IT: &str = "nothing in it is lost: keep the file";

/// A failure of the store, worded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trouble {
    pub words: String,
    pub fault: Fault,
}

fn lasting(words: String) -> Trouble {
    Trouble {
        words,
        fault: Fault::Lasting,
    }
}

/// `e`, met using the store at `path`, in words that say what failed and what to do.
pub(crate) fn trouble(e: &rusqlite::Error, path: &Path) -> Trouble {
    let Some(code) = e.sqlite_error_code() else {
        // A value of an unexpected type, and the like: the file holds what this build did not
        // write.
        return lasting(format!("it holds what this build cannot read ({e})"));
    };
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
            let holder = lock_holder(path)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            Trouble {
                words: format!(
                    "it is locked by another process{holder}: another gateway on the same \
                     file, or a program holding it open (sqlite3, a backup); stop that process \
                     (an embedded store belongs to one gateway process: give each gateway its \
                     own gateway.data_dir, or share a PostgreSQL store)"
                ),
                fault: Fault::Passing,
            }
        }
        ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen => {
            match unwritable(path) {
                Some(why) => lasting(format!(
                    "it cannot be written: {why}; let the user the gateway runs as write there \
                     ({KEEP_IT})"
                )),
                None if code == ErrorCode::CannotOpen => lasting(format!(
                    "it cannot be opened ({e}); check that its directory exists and that the \
                     user the gateway runs as may write there"
                )),
                None if code == ErrorCode::PermissionDenied => lasting(format!(
                    "it cannot be written: permission denied ({e}); let the user the gateway \
                     runs as write it ({KEEP_IT})"
                )),
                None => lasting(format!(
                    "it cannot be written: it is read-only ({e}); let the user the gateway runs \
                     as write it ({KEEP_IT})"
                )),
            }
        }
        ErrorCode::DiskFull => lasting(format!(
            "it cannot grow: the disk holding it is full ({e}); free some space there ({KEEP_IT})"
        )),
        ErrorCode::SystemIoFailure => match size_limit_reached(path) {
            Some(limit) => lasting(format!(
                "an input/output error ({e}): it reached this process's file size limit of \
                 {limit} bytes (RLIMIT_FSIZE, `ulimit -f`); raise the limit ({KEEP_IT})"
            )),
            None => lasting(format!(
                "an input/output error ({e}): the disk may be failing, or full; check it \
                 (the kernel's log says more), and keep the file"
            )),
        },
        ErrorCode::DatabaseCorrupt => lasting(format!("it is damaged ({e}); {MOVE_IT_AWAY}")),
        ErrorCode::NotADatabase => lasting(format!(
            "it is not a SQLite database or it is damaged ({e}); {MOVE_IT_AWAY}"
        )),
        ErrorCode::OperationInterrupted => Trouble {
            words: format!("an operation was interrupted ({e})"),
            fault: Fault::Passing,
        },
        _ => lasting(e.to_string()),
    }
}

/// Why this process cannot write the store at `path`, as the file system says: the file
/// read-only to it, its directory (where SQLite keeps its write-ahead log) not writable, or a
/// read-only file system. `None` when nothing here says so.
pub(crate) fn unwritable(path: &Path) -> Option<String> {
    if let Some(why) = file_unwritable(path) {
        return Some(why);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let probe = dir.join(format!(".droidmesh-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(e) => denied(e.kind(), format!("its directory {}", dir.display()))
            .map(|why| format!("{why}, and SQLite keeps its write-ahead log beside the file")),
    }
}

/// Why this process cannot write the file at `path` (read-only to it, or on a read-only file
/// system); `None` when it can, or when there is no file yet.
pub(crate) fn file_unwritable(path: &Path) -> Option<String> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Err(e) if path.exists() => denied(e.kind(), "the file".into()),
        _ => None,
    }
}

/// That `what` may not be written, when `kind` is a refusal to write.
fn denied(kind: std::io::ErrorKind, what: String) -> Option<String> {
    match kind {
        std::io::ErrorKind::PermissionDenied => {
            Some(format!("{what} may not be written (permission denied)"))
        }
        std::io::ErrorKind::ReadOnlyFilesystem => {
            Some("it is on a read-only file system".to_owned())
        }
        _ => None,
    }
}

/// This process's file size limit (RLIMIT_FSIZE) when the store's file or its write-ahead log
/// has reached it (within the largest page and a frame header): a write past it fails as an
/// input/output error.
fn size_limit_reached(path: &Path) -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let limit: u64 = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max file size"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let largest = [path, wal.as_path()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .max()?;
    (largest + 65_536 + 24 > limit).then_some(limit)
}

/// The process that holds a lock on the store at `path` (its file, write-ahead log or shared
/// memory), other than this one, as "pid N, NAME": from `/proc/locks`, where Linux lists every
/// file lock. `None` elsewhere, or when it is not found.
fn lock_holder(path: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let files: Vec<(u64, u64, u64)> = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| {
            let dev = m.dev();
            let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
            let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
            (major, minor, m.ino())
        })
        .collect();
    let mut locks = String::new();
    std::fs::File::open("/proc/locks")
        .ok()?
        .take(1 << 20)
        .read_to_string(&mut locks)
        .ok()?;
    let me = std::process::id().to_string();
    locks.lines().find_map(|line| {
        // "1: POSIX  ADVISORY  WRITE 4242 08:01:1234 1073741824 1073741825"; a waiter's
        // line has "->" after its number.
        let f: Vec<&str> = line.split_whitespace().collect();
        let (pid, at) = (*f.get(4)?, *f.get(5)?);
        if f.get(1) == Some(&"->") || pid == me {
            return None;
        }
        let mut parts = at.split(':');
        let major = u64::from_str_radix(parts.next()?, 16).ok()?;
        let minor = u64::from_str_radix(parts.next()?, 16).ok()?;
        let ino: u64 = parts.next()?.parse().ok()?;
        if !files.contains(&(major, minor, ino)) {
            return None;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        Some(match name.trim() {
            "" => format!("pid {pid}"),
            name => format!("pid {pid}, {name}"),
        })
    })
}

/// What `PRAGMA quick_check` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    Sound,
    /// What it reported, its first few lines.
    Damaged(String),
    /// It did not finish within its time (a large store): the file was not fully checked.
    CutShort,
}

/// `PRAGMA quick_check` of `conn`'s database (every page's b-tree structure, not the indexes'
/// contents), stopped after `budget`.
pub(crate) fn quick_check(conn: &Connection, budget: Duration) -> Result<Checked, rusqlite::Error> {
    let handle = conn.get_interrupt_handle();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let timer = std::thread::Builder::new()
        .name("droidmesh-sqlite-check".into())
        .spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(budget) {
                handle.interrupt();
            }
        });
    let rows: Result<Vec<String>, rusqlite::Error> = conn
        .prepare("PRAGMA quick_check(5)")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect());
    drop(done);
    if let Ok(timer) = timer {
        let _ = timer.join();
    }
    match rows {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => Ok(Checked::Sound),
        Ok(rows) => Ok(Checked::Damaged(rows.join("; ").replace('\n', " "))),
        Err(e) if e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) => {
            Ok(Checked::CutShort)
        }
        Err(e) => Err(e),
    }
}

/// Every (table, column) of `conn`'s database.
pub(crate) fn columns(conn: &Connection) -> Result<Vec<(String, String)>, rusqlite::Error> {
    conn.prepare(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
         WHERE m.type = 'table'",
    )?
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
    .collect()
}
