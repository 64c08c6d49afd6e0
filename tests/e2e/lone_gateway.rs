//! A lone `droidmesh serve gateway` process over a SQLite task store, for the tests of
//! damaged and unwritable stores: its exit status and output (kept through pipes, which a
//! file size limit does not cut short), a client once it answers, and the wrappers that run
//! it as another user or under a file size limit.
use super::*;
use droidmesh_proto::v1::ListTasksRequest;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How long the gateway may take to refuse a store, or to start on one.
pub(crate) const START: Duration = Duration::from_secs(30);
/// Each call's own deadline, and the shorter one within which the test wants its answer.
pub(crate) const CALL: Duration = Duration::from_secs(60);
pub(crate) const ANSWER: Duration = Duration::from_secs(20);

/// `droidmesh serve gateway` on the SQLite store at `store`, its output kept (through pipes,
/// which a file size limit does not cut short).
pub(crate) struct Gateway {
    child: Child,
    pub(crate) port: u16,
    pub(crate) http: u16,
    output: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// Output kept of one gateway, at most.
const MAX_OUTPUT: usize = 1 << 20;

/// Appends what `from` says to `to` (up to [`MAX_OUTPUT`]) until it closes.
fn keep(
    from: impl std::io::Read + Send + 'static,
    to: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            let mut to = to.lock().unwrap();
            if to.len() + line.len() < MAX_OUTPUT {
                to.push_str(&line);
                to.push('\n');
            }
        }
    })
}

impl Gateway {
    /// Started through `wrap` (a command and its arguments that then run the gateway), with
    /// a device service that is never there (tasks wait for a device).
    pub(crate) fn spawn(store: &Path, wrap: &[&str]) -> Gateway {
        let bin = droidmesh_e2e::droidmesh_bin().unwrap();
        let mut cmd = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        let (port, http) = (free_port(), free_port());
        cmd.args(["serve", "gateway"])
            .env("RUST_LOG", "warn")
            .env(
                "DROIDMESH_GATEWAY__STORE",
                format!("sqlite:{}", store.display()),
            )
            .env("DROIDMESH_LISTEN__GATEWAY", port.to_string())
            .env("DROIDMESH_LISTEN__GATEWAY_HTTP", http.to_string())
            .env("DROIDMESH_LISTEN__ADMIN", "0")
            .env(
                "DROIDMESH_ENDPOINTS__DEVICE",
                format!("http://127.0.0.1:{}", free_port()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let output = Arc::default();
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(keep(out, Arc::clone(&output)));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(keep(err, Arc::clone(&output)));
        }
        Gateway {
            child,
            port,
            http,
            output,
            readers,
        }
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Its exit status and output, once it has refused to start (within [`START`]).
    pub(crate) fn refused(mut self, case: &str) -> (ExitStatus, String) {
        let deadline = Instant::now() + START;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // What it wrote last is read once its pipes close (they did as it exited).
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                return (status, self.output());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{case}: the gateway did not exit within {START:?}; it took the store:\n{}",
            self.output()
        );
    }

    /// A client, once the gateway answers (within [`START`]).
    pub(crate) async fn client(&mut self) -> GatewayClient<Channel> {
        let endpoint = format!("http://127.0.0.1:{}", self.port);
        let deadline = Instant::now() + START;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the gateway exited ({status}):\n{}", self.output());
            }
            if let Ok(mut g) = GatewayClient::connect(endpoint.clone()).await
                && g.list_tasks(ListTasksRequest::default()).await.is_ok()
            {
                return g;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not answer within {START:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops it as an orchestrator does (SIGTERM) and waits for it to exit.
    pub(crate) fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + START;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the gateway did not stop within {START:?}");
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A call with a deadline of its own ([`CALL`]), answered within [`ANSWER`] or the test fails.
pub(crate) async fn answered<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(ANSWER, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung: no answer within {ANSWER:?}"))
}

pub(crate) fn with_deadline<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(CALL);
    r
}

/// `Some(prefix)` that runs a command as `nobody` when this process is root (which writes
/// read-only files), `Some([])` when it is not; `None` (the case skipped, saying so) when
/// root cannot switch user.
pub(crate) fn as_unprivileged(case: &str) -> Option<Vec<&'static str>> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some(Vec::new());
    }
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !setpriv.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED {case}: running as root, and setpriv (util-linux) is missing");
        return None;
    }
    Some(vec![
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ])
}

pub(crate) fn chown_nobody(path: &Path) {
    std::os::unix::fs::chown(path, Some(65_534), Some(65_534)).unwrap();
}

pub(crate) fn mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The command prefix that runs the gateway with files limited to `bytes` (RLIMIT_FSIZE,
/// SIGXFSZ ignored so that a write past it fails rather than kills), or `None` (the case
/// skipped, saying so) without util-linux's prlimit.
pub(crate) fn file_size_limit(case: &str, bytes: u64) -> Option<Vec<String>> {
    let prlimit = Command::new("prlimit").arg("--version").output();
    if !prlimit.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED {case}: prlimit (util-linux) is missing");
        return None;
    }
    Some(
        [
            "sh",
            "-c",
            "trap '' XFSZ; exec prlimit --fsize=\"$0\" -- \"$@\"",
            &bytes.to_string(),
        ]
        .map(String::from)
        .to_vec(),
    )
}
