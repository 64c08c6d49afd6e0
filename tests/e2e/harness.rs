//! Process harness for the end-to-end tests: the `droidmesh` binary built by this workspace,
//! started as separate processes that are killed when dropped.
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The workspace's `droidmesh` binary (built by `cargo test --workspace` before tests run).
pub fn droidmesh_bin() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/<profile>/deps/e2e-HASH -> target/<profile>/droidmesh
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .ok_or("test binary has no target dir")?;
    let bin = dir.join("droidmesh");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing: build it with `cargo build -p droidmesh`",
            bin.display()
        ))
    }
}

/// A free loopback port (free when asked; taken soon after by the caller).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// A child process killed on drop, with a data directory of its own (`XDG_DATA_HOME`, where a
/// gateway keeps its embedded task store unless told otherwise), removed with it.
pub struct Proc {
    pub name: String,
    child: Child,
    _data: tempfile::TempDir,
}

impl Proc {
    pub fn spawn(name: &str, args: &[&str]) -> Result<Proc, String> {
        Self::spawn_env(name, args, &[])
    }

    /// [`Proc::spawn`] with extra environment variables.
    pub fn spawn_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<Proc, String> {
        Self::start(name, args, env, Stdio::null(), Stdio::inherit())
    }

    /// [`Proc::spawn_env`] with everything the process prints (stdout and stderr) appended
    /// to the file `log`.
    pub fn spawn_logged(
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
        log: &std::path::Path,
    ) -> Result<Proc, String> {
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| format!("cannot open {} for {name}: {e}", log.display()))
        };
        Self::start(name, args, env, open()?.into(), open()?.into())
    }

    fn start(
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<Proc, String> {
        let bin = droidmesh_bin()?;
        let data = tempfile::tempdir().map_err(|e| format!("no data directory for {name}: {e}"))?;
        let child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "warn")
            .env("XDG_DATA_HOME", data.path())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Proc {
            name: name.to_owned(),
            child,
            _data: data,
        })
    }

    /// The process's own data directory (its `XDG_DATA_HOME`).
    pub fn data_dir(&self) -> &std::path::Path {
        self._data.path()
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Asks the process to stop (SIGTERM), as an orchestrator does before it kills.
    pub fn terminate(&self) -> Result<(), String> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .map_err(|e| format!("cannot run kill: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -TERM {} failed: {status}", self.child.id()))
        }
    }

    /// Waits up to `within` for the process to exit; its status, or `None` if it still runs.
    pub fn wait_exit(&mut self, within: std::time::Duration) -> Option<std::process::ExitStatus> {
        let mut status = None;
        poll_until(std::time::Instant::now() + within, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }

    /// Whether the process has ended.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Checks `done` every 20 ms until it holds (true) or `deadline` passes (false).
fn poll_until(deadline: std::time::Instant, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The lowest port the kernel gives outgoing connections (and `bind` to port 0). A mesh makes
/// hundreds of connections, so a port checked free in that range can be taken before the
/// simulator binds it; consecutive ports are looked for below it.
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// `count` consecutive loopback ports free now, below the ephemeral range when it leaves room
/// (from a start that differs between processes and calls), else anywhere.
fn consecutive_free_ports(count: u16) -> Option<u16> {
    let all_free = |p: u16| {
        u32::from(p) + u32::from(count) < 65_000
            && (0..count).all(|i| TcpListener::bind(("127.0.0.1", p + i)).is_ok())
    };
    const LOW: u16 = 10_000;
    let high = ephemeral_low().saturating_sub(count);
    if high > LOW + count {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = u64::from(std::process::id()) * 7_919 + u64::from(nanos);
        let span = u64::from(high - LOW);
        if let Some(p) = (0..100u64)
            .map(|k| LOW + u16::try_from((seed + k * u64::from(count) * 31) % span).unwrap_or(0))
            .find(|&p| all_free(p))
        {
            return Some(p);
        }
    }
    (0..100)
        .map(|_| free_port())
        .find(|&p| p > 0 && all_free(p))
}

/// `droidmesh sim` serving `n` simulated phones on consecutive loopback ports; returns it with
/// the phones' addresses (their serials when attached directly) once every one listens, or
/// says which did not within 30 s. A simulator that exits at start (a port taken between the
/// check and its bind) is started again on other ports, three times at most.
pub fn start_sims(n: usize) -> Result<(Proc, Vec<String>), String> {
    let count = u16::try_from(n).map_err(|_| format!("{n} phones are too many"))?;
    let mut tries = 0;
    loop {
        tries += 1;
        let base = consecutive_free_ports(count)
            .ok_or_else(|| format!("no {n} consecutive free ports"))?;
        let mut sim = Proc::spawn(
            "sim",
            &[
                "sim",
                "--port",
                &base.to_string(),
                "--devices",
                &n.to_string(),
            ],
        )?;
        let serials: Vec<String> = (0..count)
            .map(|i| format!("127.0.0.1:{}", base + i))
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut exited = false;
        for s in &serials {
            let listens = poll_until(deadline, || {
                exited = sim.exited();
                exited || std::net::TcpStream::connect(s.as_str()).is_ok()
            });
            if exited {
                break;
            }
            if !listens {
                return Err(format!("simulated phone {s} did not listen within 30 s"));
            }
        }
        if !exited {
            return Ok((sim, serials));
        }
        if tries >= 3 {
            return Err(format!(
                "the simulator exited at start {tries} times (its ports were taken)"
            ));
        }
    }
}
