//! What runs on a stream once it is open: a command (`shell:CMD`, `exec:CMD`, shell v2) or a
//! shell reading its script from stdin, their output sent under flow control, and the host's
//! data turned into their standard input (shell v2 packets unpacked).
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::Conn;
use crate::shell::{Input, Output, Session, Source};
use crate::wire::MAX_PAYLOAD;

/// A shell waiting this long for input sees end of input.
const STDIN_IDLE: Duration = Duration::from_secs(600);

/// Shell v2 packet ids (`shell_protocol.h`).
const ID_STDIN: u8 = 0;
const ID_STDOUT: u8 = 1;
const ID_STDERR: u8 = 2;
const ID_EXIT: u8 = 3;
const ID_CLOSE_STDIN: u8 = 4;

pub(super) fn packet(id: u8, data: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(5 + data.len());
    p.push(id);
    p.extend_from_slice(&u32::try_from(data.len()).unwrap_or(0).to_le_bytes());
    p.extend_from_slice(data);
    p
}

/// Splits shell v2 packets from the host: stdin data, and whether stdin was closed. `None` for
/// a packet longer than any the protocol carries.
pub(super) fn unpack(partial: &mut Vec<u8>, data: &[u8]) -> Option<(Vec<Vec<u8>>, bool)> {
    partial.extend_from_slice(data);
    let mut chunks = Vec::new();
    let mut eof = false;
    loop {
        if partial.len() < 5 {
            break;
        }
        let len = u32::from_le_bytes([partial[1], partial[2], partial[3], partial[4]]) as usize;
        if len > MAX_PAYLOAD as usize {
            return None;
        }
        if partial.len() < 5 + len {
            break;
        }
        let body: Vec<u8> = partial[5..5 + len].to_vec();
        match partial[0] {
            ID_STDIN => chunks.push(body),
            ID_CLOSE_STDIN | ID_EXIT => eof = true,
            // Window size changes and anything newer: nothing to do.
            _ => {}
        }
        partial.drain(..5 + len);
    }
    Some((chunks, eof))
}

/// A stream's stdin as the shell reads it: blocks (on a blocking-pool thread) for the next
/// chunk the host sent; end of input when the host closes stdin or the stream, or after
/// [`STDIN_IDLE`] without data.
pub(super) struct HostStdin {
    pub(super) rx: mpsc::Receiver<Vec<u8>>,
    pub(super) handle: tokio::runtime::Handle,
}

impl Source for HostStdin {
    fn next_chunk(&mut self) -> Option<Vec<u8>> {
        let rx = &mut self.rx;
        self.handle
            .block_on(async { tokio::time::timeout(STDIN_IDLE, rx.recv()).await })
            .ok()
            .flatten()
    }
}

#[derive(Clone, Copy)]
pub(super) enum Mode {
    /// `shell:` and `exec:`: bytes, stderr mixed in, no exit code.
    Raw,
    /// `shell,v2`: stdout, stderr and exit code as separate packets.
    V2,
}

/// Runs `cmd` with the stream's input; `finished` is set once it has run (its files written),
/// before its output is sent.
pub(super) fn one_shot(
    conn: Conn,
    local: u32,
    cmd: String,
    mut input: Input,
    mode: Mode,
    finished: watch::Sender<bool>,
) {
    tokio::spawn(async move {
        let device = conn.device.clone();
        let out = tokio::task::spawn_blocking(move || {
            Session::default().run_line(&device, &cmd, &mut input)
        })
        .await
        .unwrap_or_else(|e| Output::fail(1, format!("/system/bin/sh: internal error: {e}")));
        finished.send_replace(true);
        if send_output(&conn, local, &out, mode).await && matches!(mode, Mode::V2) {
            exit_packet(&conn, local, out.code).await;
        }
        conn.close(local);
    });
}

async fn send_output(conn: &Conn, local: u32, out: &Output, mode: Mode) -> bool {
    match mode {
        Mode::Raw => conn.write(local, &out.stdout).await && conn.write(local, &out.stderr).await,
        Mode::V2 => {
            conn.write_packets(local, ID_STDOUT, &out.stdout).await
                && conn.write_packets(local, ID_STDERR, &out.stderr).await
        }
    }
}

async fn exit_packet(conn: &Conn, local: u32, code: i32) {
    let code = u8::try_from(code.rem_euclid(256)).unwrap_or(1);
    conn.write_one(local, &packet(ID_EXIT, &[code])).await;
}

const PROMPT: &[u8] = b"sim:/ $ ";

/// `adb shell` without a command: a shell reading its script from stdin, ending at `exit N` or
/// end of input with that status.
pub(super) fn interactive(
    conn: Conn,
    local: u32,
    v2: bool,
    pty: bool,
    mut input: Input,
    finished: watch::Sender<bool>,
) {
    let mode = if v2 { Mode::V2 } else { Mode::Raw };
    let handle = tokio::runtime::Handle::current();
    let c = conn.clone();
    let h = handle.clone();
    let session = tokio::task::spawn_blocking(move || {
        let say = |out: Output| h.block_on(send_output(&c, local, &out, mode));
        if pty {
            say(Output::ok(PROMPT));
        }
        let mut session = if pty {
            Session::on_terminal()
        } else {
            Session::default()
        };
        session.run_script(&c.device, &mut input, |out| {
            say(out);
            if pty {
                say(Output::ok(PROMPT));
            }
        })
    });
    tokio::spawn(async move {
        let code = session.await.unwrap_or(1);
        finished.send_replace(true);
        if v2 {
            exit_packet(&conn, local, code).await;
        }
        conn.close(local);
    });
}
