//! Shell commands through an adb server, spoken asynchronously: one connection per command,
//! `host:transport:SERIAL` then the shell request (the server drops a request sent before it
//! has answered the first: Debian's adb 29 does, so they cannot share a write). The device's
//! features (shell v2 or not) are asked once per device and kept, where adb_client asks them on
//! a connection of their own before every command. No thread per call: a stalled device holds a socket and
//! a task, both dropped when the caller's deadline passes; at most [`MAX_CALLS`] calls are
//! in flight at once in the process.
use std::net::SocketAddrV4;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OnceCell, Semaphore};

/// Calls to adb servers in flight at once, every device together; more wait for a turn
/// (within their own deadline).
pub const MAX_CALLS: usize = 256;
static CALLS: Semaphore = Semaphore::const_new(MAX_CALLS);

/// Most output one command returns (a screenshot is a few MiB).
pub const MAX_OUTPUT: usize = 64 << 20;

/// Why a command through the server failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerError {
    /// The server or the device cannot be reached (not running, device gone or offline).
    Unavailable(String),
    /// The server or the device refused or said something unexpected.
    Refused(String),
}

/// One device behind an adb server.
#[derive(Debug)]
pub struct ServerRoute {
    server: SocketAddrV4,
    serial: String,
    /// Whether the device speaks shell v2 (exit codes, separate stderr, binary-safe output).
    shell_v2: OnceCell<bool>,
}

/// A host request: four hex digits of length, then the request.
fn frame(request: &str) -> Result<Vec<u8>, ServerError> {
    if request.len() > 0xffff {
        return Err(ServerError::Refused(format!(
            "a request of {} bytes is longer than the adb protocol allows (65535)",
            request.len()
        )));
    }
    let mut out = format!("{:04x}", request.len()).into_bytes();
    out.extend_from_slice(request.as_bytes());
    Ok(out)
}

/// Reads `OKAY`, or `FAIL` and its message.
async fn status(conn: &mut TcpStream, what: &str) -> Result<(), ServerError> {
    let mut word = [0u8; 4];
    conn.read_exact(&mut word).await.map_err(|e| {
        ServerError::Unavailable(format!("{what}: no answer from the adb server: {e}"))
    })?;
    match &word {
        b"OKAY" => Ok(()),
        b"FAIL" => {
            let message = read_hex(conn).await.unwrap_or_default();
            let lower = message.to_ascii_lowercase();
            let gone = [
                "not found",
                "offline",
                "no devices",
                "unauthorized",
                "closed",
            ]
            .iter()
            .any(|w| lower.contains(w));
            let said = format!("{what} refused: {message}");
            Err(if gone {
                ServerError::Unavailable(said)
            } else {
                ServerError::Refused(said)
            })
        }
        other => Err(ServerError::Refused(format!(
            "{what}: expected OKAY or FAIL, got {:?}",
            String::from_utf8_lossy(other)
        ))),
    }
}

async fn read_hex(conn: &mut TcpStream) -> std::io::Result<String> {
    let mut len = [0u8; 4];
    conn.read_exact(&mut len).await?;
    let len = std::str::from_utf8(&len)
        .ok()
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad length"))?;
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

impl ServerRoute {
    pub fn new(server: SocketAddrV4, serial: String) -> Self {
        Self {
            server,
            serial,
            shell_v2: OnceCell::new(),
        }
    }

    async fn connect(&self) -> Result<TcpStream, ServerError> {
        let conn = TcpStream::connect(self.server).await.map_err(|e| {
            ServerError::Unavailable(format!(
                "cannot reach the adb server at {}: {e} (is it running?)",
                self.server
            ))
        })?;
        let _ = conn.set_nodelay(true);
        Ok(conn)
    }

    /// Whether the device speaks shell v2, asked once (`host-serial:SERIAL:features`).
    async fn shell_v2(&self) -> Result<bool, ServerError> {
        self.shell_v2
            .get_or_try_init(|| async {
                let mut conn = self.connect().await?;
                let request = format!("host-serial:{}:features", self.serial);
                conn.write_all(&frame(&request)?)
                    .await
                    .map_err(|e| ServerError::Unavailable(format!("{request}: {e}")))?;
                status(&mut conn, &request).await?;
                let features = read_hex(&mut conn)
                    .await
                    .map_err(|e| ServerError::Unavailable(format!("{request}: {e}")))?;
                Ok(features.split(',').any(|f| f.trim() == "shell_v2"))
            })
            .await
            .copied()
    }

    /// Runs `command` in the device's shell and returns what it wrote to stdout (with shell
    /// v2; a device without it mixes stderr in, as `adb shell` shows it).
    pub async fn shell(&self, command: &str) -> Result<Vec<u8>, ServerError> {
        let _turn = CALLS
            .acquire()
            .await
            .map_err(|_| ServerError::Unavailable("the adb call limiter is closed".into()))?;
        let v2 = self.shell_v2().await?;
        let transport = format!("host:transport:{}", self.serial);
        let service = if v2 {
            format!("shell,v2,raw:{command}")
        } else {
            format!("shell:{command}")
        };
        let mut conn = self.connect().await?;
        conn.write_all(&frame(&transport)?)
            .await
            .map_err(|e| ServerError::Unavailable(format!("{transport}: {e}")))?;
        status(&mut conn, &transport).await?;
        conn.write_all(&frame(&service)?)
            .await
            .map_err(|e| ServerError::Unavailable(format!("the shell request: {e}")))?;
        status(&mut conn, "the shell request").await?;
        if v2 {
            read_v2(&mut conn).await
        } else {
            read_raw(&mut conn).await
        }
    }
}

/// Reads shell v2 packets (1-byte id, u32 LE length, data) until the exit packet or the end:
/// stdout kept, stderr dropped.
async fn read_v2(conn: &mut TcpStream) -> Result<Vec<u8>, ServerError> {
    let broken =
        |e: std::io::Error| ServerError::Unavailable(format!("the shell's output broke off: {e}"));
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 5];
        match conn.read_exact(&mut head).await {
            Ok(_) => {}
            // The device closed the stream without an exit packet: what came is the output.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(out),
            Err(e) => return Err(broken(e)),
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if out.len().saturating_add(len) > MAX_OUTPUT {
            return Err(ServerError::Refused(format!(
                "the command's output passed {MAX_OUTPUT} bytes"
            )));
        }
        let mut data = vec![0u8; len];
        conn.read_exact(&mut data).await.map_err(broken)?;
        match head[0] {
            1 => out.extend_from_slice(&data),
            3 => return Ok(out),
            // stderr, and anything newer than this client knows
            _ => {}
        }
    }
}

/// Reads raw output until the device closes the stream.
async fn read_raw(conn: &mut TcpStream) -> Result<Vec<u8>, ServerError> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = conn
            .read(&mut buf)
            .await
            .map_err(|e| ServerError::Unavailable(format!("the shell's output broke off: {e}")))?;
        if n == 0 {
            return Ok(out);
        }
        if out.len() + n > MAX_OUTPUT {
            return Err(ServerError::Refused(format!(
                "the command's output passed {MAX_OUTPUT} bytes"
            )));
        }
        out.extend_from_slice(&buf[..n]);
    }
}
