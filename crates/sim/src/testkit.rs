//! Test support: a private adb server (Debian's `adb`) on its own port, to attach simulated
//! devices with `adb connect` and read ground truth with `adb shell`, exactly as a user would.
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Whether an `adb` binary is on PATH.
pub fn adb_available() -> bool {
    Command::new("adb")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The environment variable that lets tests needing `adb` be skipped, visibly.
pub const SKIP_ADB_VAR: &str = "DROIDMESH_SKIP_ADB_TESTS";

/// For a test that needs Debian's `adb`: `true` when it is installed. Without it the test
/// fails, naming what to install, unless `DROIDMESH_SKIP_ADB_TESTS=1` asks to skip: then it
/// says on stderr that `test` was skipped and why, and returns `false`.
pub fn require_adb(test: &str) -> bool {
    if adb_available() {
        return true;
    }
    let reason = "`adb` is not on PATH (Debian's `adb` package; scripts/setup.sh installs it)";
    if std::env::var(SKIP_ADB_VAR).is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED {test}: {reason}; {SKIP_ADB_VAR}=1");
        return false;
    }
    // A test must not pass without the part it tests.
    #[allow(clippy::panic)]
    {
        panic!("{test} needs adb: {reason}; set {SKIP_ADB_VAR}=1 to skip such tests visibly");
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AdbError {
    #[error("cannot run adb: {0}")]
    Spawn(std::io::Error),
    #[error("adb {args} failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Timeout(String),
}

/// Longest one `adb` command of a test may take.
pub const ADB_DEADLINE: Duration = Duration::from_secs(60);

/// An adb server owned by the test, killed on drop.
#[derive(Debug)]
pub struct AdbServer {
    pub port: u16,
    child: Child,
}

fn free_port() -> Result<u16, AdbError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(AdbError::Spawn)?;
    l.local_addr().map(|a| a.port()).map_err(AdbError::Spawn)
}

impl AdbServer {
    /// Starts `adb server nodaemon` on a free port and waits until it answers.
    pub fn start() -> Result<Self, AdbError> {
        let port = free_port()?;
        let child = Command::new("adb")
            .args(["-P", &port.to_string(), "server", "nodaemon"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(AdbError::Spawn)?;
        let server = Self { port, child };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if server.adb(&["devices"]).is_ok_and(|o| o.status.success()) {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err(AdbError::Timeout(format!(
                    "adb server on port {port} did not start within 15 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `adb -P PORT ARGS...` against this server, with nothing on its stdin; an adb that
    /// has not ended within [`ADB_DEADLINE`] is killed and reported as a timeout.
    pub fn adb(&self, args: &[&str]) -> Result<Output, AdbError> {
        self.adb_stdin(args, b"", ADB_DEADLINE)
    }

    /// Runs `adb -P PORT ARGS...` with `stdin` piped to it (then closed); kills it if it has
    /// not ended within `limit`.
    pub fn adb_stdin(
        &self,
        args: &[&str],
        stdin: &[u8],
        limit: Duration,
    ) -> Result<Output, AdbError> {
        use std::io::{Read, Write};
        let mut child = Command::new("adb")
            .args(["-P", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(AdbError::Spawn)?;
        let mut pipe = child.stdin.take();
        let data = stdin.to_vec();
        let feeder = std::thread::spawn(move || {
            if let Some(p) = pipe.as_mut() {
                let _ = p.write_all(&data);
            }
        });
        let mut out_pipe = child.stdout.take();
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = out_pipe.as_mut() {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        });
        let mut err_pipe = child.stderr.take();
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = err_pipe.as_mut() {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        });
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(AdbError::Spawn)? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(AdbError::Timeout(format!(
                    "adb {} did not end within {limit:?}",
                    args.join(" ")
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = feeder.join();
        Ok(Output {
            status,
            stdout: reader.join().unwrap_or_default(),
            stderr: err_reader.join().unwrap_or_default(),
        })
    }

    fn adb_ok(&self, args: &[&str]) -> Result<String, AdbError> {
        let out = self.adb(args)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(AdbError::Failed {
                args: args.join(" "),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// `adb connect ADDR`, then waits until `adb devices` lists it as `device`; returns its
    /// serial.
    pub fn connect(&self, addr: SocketAddr) -> Result<String, AdbError> {
        let serial = addr.to_string();
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut last = String::new();
        while Instant::now() < deadline {
            // `adb connect` exits 0 even when it fails: the device list is what counts.
            last = self
                .adb_ok(&["connect", &serial])
                .unwrap_or_else(|e| e.to_string());
            for _ in 0..20 {
                let list = self.adb_ok(&["devices"])?;
                if list.lines().any(|l| {
                    l.split_whitespace().collect::<Vec<_>>() == [serial.as_str(), "device"]
                }) {
                    return Ok(serial);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Err(AdbError::Timeout(format!(
            "{serial} never showed as 'device' (last connect said: {})",
            last.trim()
        )))
    }

    /// `adb -s SERIAL shell COMMAND`; fails on a non-zero exit code.
    pub fn shell(&self, serial: &str, command: &str) -> Result<String, AdbError> {
        self.adb_ok(&["-s", serial, "shell", command])
    }
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        let _ = self.adb(&["kill-server"]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One simulated phone on loopback, a private adb server, and the phone's serial once adb lists
/// it as `device`.
pub async fn one_phone() -> Result<(crate::SimFleet, AdbServer, String), String> {
    let fleet = crate::start(crate::SimOptions {
        host: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices: 1,
        ..crate::SimOptions::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let adb = AdbServer::start().map_err(|e| e.to_string())?;
    let addr = *fleet.addrs().first().ok_or("the fleet has no phone")?;
    let serial = adb.connect(addr).map_err(|e| e.to_string())?;
    Ok((fleet, adb, serial))
}
