//! A throwaway PostgreSQL server for tests and benchmarks: Debian's `postgresql` binaries,
//! `initdb` into a temporary directory, the server listening on 127.0.0.1 on a free port (and
//! a unix socket in that directory), with a password (SCRAM) so URLs carry one as in
//! production. PostgreSQL refuses to run as root: as root, its commands run as the `postgres`
//! user (or `nobody`) through `runuser`, the directory given to that user. Stopped and removed
//! when dropped.
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to `1` to skip, visibly, tests that need PostgreSQL when its binaries are missing.
pub const SKIP_POSTGRES_VAR: &str = "DROIDMESH_SKIP_POSTGRES_TESTS";
/// Where the binaries are (`initdb`, `pg_ctl`), if not in Debian's place or on PATH.
pub const POSTGRES_BIN_VAR: &str = "DROIDMESH_POSTGRES_BIN";
/// The user and password of every test server.
pub const USER: &str = "droidmesh";
pub const PASSWORD: &str = "pg-test-secret-7f3a";

/// The directory of `initdb` and `pg_ctl`: `$DROIDMESH_POSTGRES_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`, else where PATH finds `initdb`.
pub fn bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(d) = std::env::var_os(POSTGRES_BIN_VAR) {
        return Some(PathBuf::from(d)).filter(|d| has(d));
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, d)| has(d))
        .collect();
    debian.sort();
    if let Some((_, d)) = debian.pop() {
        return Some(d);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has(d))
}

/// For a test that needs PostgreSQL: `true` when its binaries are installed. Without them the
/// test fails, naming what to install, unless `DROIDMESH_SKIP_POSTGRES_TESTS=1` asks to skip:
/// then it says on stderr that `test` was skipped and why, and returns `false`.
pub fn require_postgres(test: &str) -> bool {
    if bin_dir().is_some() {
        return true;
    }
    let reason = "PostgreSQL's initdb and pg_ctl are not installed (Debian's `postgresql` \
                  package; scripts/setup.sh installs it)";
    if std::env::var(SKIP_POSTGRES_VAR).is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED {test}: {reason}; {SKIP_POSTGRES_VAR}=1");
        return false;
    }
    // A test must not pass without the part it tests.
    #[allow(clippy::panic)]
    {
        panic!(
            "{test} needs PostgreSQL: {reason}; set {SKIP_POSTGRES_VAR}=1 to skip such tests visibly"
        );
    }
}

/// A PostgreSQL server of its own, on loopback.
pub struct PgServer {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    /// The user its commands run as, when this process is root.
    run_as: Option<String>,
    options: String,
    running: bool,
    tls: bool,
}

impl PgServer {
    /// `initdb` and a started server, `fsync` off (tests do not survive power loss).
    pub fn start() -> Result<Self, String> {
        Self::start_with(false)
    }

    /// [`PgServer::start`], with `fsync` as a production server has it when `durable`.
    pub fn start_with(durable: bool) -> Result<Self, String> {
        Self::start_opts(durable, false)
    }

    /// [`PgServer::start`], serving TLS too (`ssl = on`) with a certificate for 127.0.0.1
    /// signed by a CA of its own, whose certificate is at [`PgServer::ca`].
    pub fn start_tls() -> Result<Self, String> {
        Self::start_opts(false, true)
    }

    /// The CA certificate (PEM) that signs a TLS server's certificate.
    pub fn ca(&self) -> Option<PathBuf> {
        self.tls.then(|| self.dir.join("tls").join("ca.crt"))
    }

    fn start_opts(durable: bool, tls: bool) -> Result<Self, String> {
        let bin = bin_dir().ok_or("PostgreSQL's initdb and pg_ctl are not installed")?;
        let dir = std::env::temp_dir().join(format!(
            "droidmesh-pg-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(dir.join("sock"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let mut server = Self {
            port: 0,
            dir,
            bin,
            run_as: None,
            options: String::new(),
            running: false,
            tls,
        };
        if root {
            let user = ["postgres", "nobody"]
                .into_iter()
                .find(|u| id_of(u, "-u").is_some())
                .ok_or("running as root, and neither a postgres nor a nobody user exists")?;
            let (uid, gid) = (id_of(user, "-u"), id_of(user, "-g"));
            for p in [server.dir.clone(), server.dir.join("sock")] {
                std::os::unix::fs::chown(&p, uid, gid)
                    .map_err(|e| format!("cannot give {} to {user}: {e}", p.display()))?;
            }
            server.run_as = Some(user.to_owned());
        }
        let pwfile = server.dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).map_err(|e| format!("cannot write the password: {e}"))?;
        if let Some(user) = &server.run_as {
            let (uid, gid) = (id_of(user, "-u"), id_of(user, "-g"));
            std::os::unix::fs::chown(&pwfile, uid, gid).map_err(|e| e.to_string())?;
        }
        let data = server.dir.join("data");
        server.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--auth=scram-sha-256".as_ref(),
                format!("--pwfile={}", pwfile.display()).as_ref(),
                "--no-locale".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        let fsync = if durable { "on" } else { "off" };
        let ssl = if tls {
            let dir = server.dir.join("tls");
            let files = droidmesh_runtime::tls::dev::write_dev_certs(
                &dir,
                "server",
                &["127.0.0.1".to_owned(), "localhost".to_owned()],
                1,
            )
            .map_err(|e| format!("cannot make the server's certificate: {e}"))?;
            // PostgreSQL reads its key as its own user and refuses one others can read.
            if let Some(user) = &server.run_as {
                let (uid, gid) = (id_of(user, "-u"), id_of(user, "-g"));
                for p in [&dir, &files.cert, &files.key] {
                    std::os::unix::fs::chown(p, uid, gid).map_err(|e| e.to_string())?;
                }
            }
            format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                files.cert.display(),
                files.key.display()
            )
        } else {
            String::new()
        };
        // A port found free may be taken before the server binds it: a few tries.
        let mut last = String::new();
        for _ in 0..5 {
            server.port = free_port();
            server.options = format!(
                "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync={fsync} -c max_connections=60 -c shared_buffers=16MB{ssl}",
                server.port,
                server.dir.join("sock").display()
            );
            match server.start_again() {
                Ok(()) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Where a gateway finds it: `postgres://droidmesh:PASSWORD@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// Stops the server (its data stays, for [`PgServer::start_again`]).
    pub fn stop(&mut self) -> Result<(), String> {
        let data = self.dir.join("data");
        self.run(
            "pg_ctl",
            &[
                "stop".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
            ],
        )?;
        self.running = false;
        Ok(())
    }

    /// Starts the server on its data and port, and waits until it accepts connections.
    pub fn start_again(&mut self) -> Result<(), String> {
        let (data, log) = (self.dir.join("data"), self.dir.join("server.log"));
        let options = self.options.clone();
        let started = self.run(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
            ],
        );
        match started {
            Ok(()) => {
                self.running = true;
                Ok(())
            }
            Err(e) => {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                Err(format!(
                    "{e}; its log ends: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ))
            }
        }
    }

    /// Runs one of the binaries (as the unprivileged user when this process is root).
    fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let out = cmd
            .args(args)
            .current_dir(&self.dir)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.running {
            let data = self.dir.join("data");
            let _ = self.run(
                "pg_ctl",
                &[
                    "stop".as_ref(),
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-m".as_ref(),
                    "immediate".as_ref(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "10".as_ref(),
                ],
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `id -u USER` or `id -g USER`.
fn id_of(user: &str, flag: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, user]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}
