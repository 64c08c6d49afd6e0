//! The `sync:` service (adb push, pull, ls, stat): a byte stream of requests that does not
//! line up with WRTE boundaries, so it is parsed from a buffer.
use std::sync::Mutex;

use crate::device::Device;
use crate::fs::{DIR_MODE, FILE_MODE, Kind, MTIME};

/// Longest path accepted in a request.
const MAX_PATH: usize = 1024;
/// Largest DATA chunk sent or accepted (the protocol's limit).
const MAX_CHUNK: usize = 64 * 1024;
/// Largest file a push may create.
const MAX_FILE: usize = 256 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct SyncSession {
    buf: Vec<u8>,
    sending: Option<(String, Vec<u8>)>,
}

fn le(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

fn put(out: &mut Vec<u8>, id: &[u8; 4], words: &[u32]) {
    out.extend_from_slice(id);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

fn fail(out: &mut Vec<u8>, msg: &str) {
    put(out, b"FAIL", &[u32::try_from(msg.len()).unwrap_or(0)]);
    out.extend_from_slice(msg.as_bytes());
}

fn lock(d: &Mutex<Device>) -> std::sync::MutexGuard<'_, Device> {
    d.lock().unwrap_or_else(|p| p.into_inner())
}

/// What feeding bytes produced: the reply and whether the session is over.
pub struct Fed {
    pub reply: Vec<u8>,
    pub quit: bool,
}

impl SyncSession {
    /// Consumes `data`, answering every complete request in it.
    pub fn feed(&mut self, data: &[u8], device: &Mutex<Device>) -> Fed {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        let mut used = 0;
        let quit = loop {
            let rest = &self.buf[used..];
            if rest.len() < 8 {
                break false;
            }
            let id: [u8; 4] = [rest[0], rest[1], rest[2], rest[3]];
            let len = le(rest, 4) as usize;
            if let Some((path, file)) = &mut self.sending {
                match &id {
                    b"DATA" => {
                        if len > MAX_CHUNK || file.len() + len > MAX_FILE {
                            fail(&mut out, "file too large for the simulated device");
                            break true;
                        }
                        let Some(chunk) = rest.get(8..8 + len) else {
                            break false;
                        };
                        file.extend_from_slice(chunk);
                        used += 8 + len;
                    }
                    b"DONE" => {
                        used += 8;
                        let result = lock(device).fs.write(path, std::mem::take(file), false);
                        self.sending = None;
                        match result {
                            Ok(()) => put(&mut out, b"OKAY", &[0]),
                            Err(e) => {
                                fail(&mut out, &e);
                                break true;
                            }
                        }
                    }
                    _ => {
                        fail(&mut out, "expected DATA or DONE while receiving a file");
                        break true;
                    }
                }
                continue;
            }
            if &id == b"QUIT" {
                break true;
            }
            if len > MAX_PATH {
                fail(&mut out, "path too long");
                break true;
            }
            let Some(arg) = rest.get(8..8 + len) else {
                break false;
            };
            let arg = String::from_utf8_lossy(arg).into_owned();
            used += 8 + len;
            match &id {
                b"STAT" => stat(&mut out, device, &arg),
                b"STA2" | b"LST2" => stat2(&mut out, device, &arg),
                b"LIST" => list(&mut out, device, &arg),
                b"RECV" => recv(&mut out, device, &arg),
                b"SEND" => {
                    let path = arg.rsplit_once(',').map_or(arg.as_str(), |(p, _mode)| p);
                    self.sending = Some((path.to_owned(), Vec::new()));
                }
                _ => {
                    fail(
                        &mut out,
                        &format!("unknown sync request '{}'", String::from_utf8_lossy(&id)),
                    );
                    break true;
                }
            }
        };
        self.buf.drain(..used.min(self.buf.len()));
        Fed { reply: out, quit }
    }
}

fn mode_size(kind: Option<Kind>) -> (u32, u64) {
    match kind {
        Some(Kind::Dir) => (DIR_MODE, 3452),
        Some(Kind::File(size)) => (FILE_MODE, size),
        None => (0, 0),
    }
}

fn stat(out: &mut Vec<u8>, device: &Mutex<Device>, path: &str) {
    let kind = lock(device).fs.kind(path);
    let (mode, size) = mode_size(kind);
    let mtime = if kind.is_some() { MTIME } else { 0 };
    put(
        out,
        b"STAT",
        &[mode, u32::try_from(size).unwrap_or(u32::MAX), mtime],
    );
}

fn stat2(out: &mut Vec<u8>, device: &Mutex<Device>, path: &str) {
    let kind = lock(device).fs.kind(path);
    let (mode, size) = mode_size(kind);
    let error = if kind.is_some() { 0 } else { 2 };
    out.extend_from_slice(b"STA2");
    out.extend_from_slice(&u32::to_le_bytes(error));
    out.extend_from_slice(&u64::to_le_bytes(0xfd00)); // dev
    out.extend_from_slice(&u64::to_le_bytes(1)); // ino
    out.extend_from_slice(&u32::to_le_bytes(mode));
    out.extend_from_slice(&u32::to_le_bytes(1)); // nlink
    out.extend_from_slice(&u32::to_le_bytes(0)); // uid
    out.extend_from_slice(&u32::to_le_bytes(1015)); // gid sdcard_rw
    out.extend_from_slice(&u64::to_le_bytes(size));
    let t = if kind.is_some() { i64::from(MTIME) } else { 0 };
    for _ in 0..3 {
        out.extend_from_slice(&t.to_le_bytes());
    }
}

fn list(out: &mut Vec<u8>, device: &Mutex<Device>, path: &str) {
    if let Ok(entries) = lock(device).fs.list(path) {
        for (name, kind) in entries {
            let (mode, size) = mode_size(Some(kind));
            put(
                out,
                b"DENT",
                &[
                    mode,
                    u32::try_from(size).unwrap_or(u32::MAX),
                    MTIME,
                    u32::try_from(name.len()).unwrap_or(0),
                ],
            );
            out.extend_from_slice(name.as_bytes());
        }
    }
    put(out, b"DONE", &[0, 0, 0, 0]);
}

fn recv(out: &mut Vec<u8>, device: &Mutex<Device>, path: &str) {
    let dev = lock(device);
    match dev.fs.read(path) {
        Ok(data) => {
            for chunk in data.chunks(MAX_CHUNK) {
                put(out, b"DATA", &[u32::try_from(chunk.len()).unwrap_or(0)]);
                out.extend_from_slice(chunk);
            }
            put(out, b"DONE", &[0]);
        }
        Err(e) => fail(out, &e.replace(&format!("{path}: "), "")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::AppSet;
    use std::sync::Arc;

    fn req(id: &[u8; 4], arg: &[u8]) -> Vec<u8> {
        let mut v = id.to_vec();
        v.extend_from_slice(&u32::try_from(arg.len()).unwrap().to_le_bytes());
        v.extend_from_slice(arg);
        v
    }

    #[test]
    fn push_then_pull_survives_arbitrary_split_points() {
        let dev = Mutex::new(Device::new(Arc::new(AppSet::default_set().unwrap()), "s"));
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut stream = req(b"SEND", b"/sdcard/Download/a.bin,33206");
        for chunk in payload.chunks(MAX_CHUNK) {
            stream.extend(req(b"DATA", chunk));
        }
        stream.extend_from_slice(b"DONE");
        stream.extend_from_slice(&MTIME.to_le_bytes());
        let mut s = SyncSession::default();
        let mut replies = Vec::new();
        for piece in stream.chunks(7777) {
            replies.extend(s.feed(piece, &dev).reply);
        }
        assert_eq!(replies, b"OKAY\0\0\0\0");
        let out = s.feed(&req(b"RECV", b"/sdcard/Download/a.bin"), &dev).reply;
        let mut got = Vec::new();
        let mut at = 0;
        while &out[at..at + 4] == b"DATA" {
            let n = le(&out, at + 4) as usize;
            got.extend_from_slice(&out[at + 8..at + 8 + n]);
            at += 8 + n;
        }
        assert_eq!(&out[at..at + 4], b"DONE");
        assert_eq!(got, payload);
        let missing = s.feed(&req(b"STAT", b"/nope"), &dev).reply;
        assert_eq!(missing, b"STAT\0\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(
            s.feed(req(b"STA2", b"/sdcard").as_slice(), &dev)
                .reply
                .len(),
            72
        );
        assert!(s.feed(b"QUIT\0\0\0\0", &dev).quit);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let dev = Mutex::new(Device::new(Arc::new(AppSet::default_set().unwrap()), "s"));
            let mut s = SyncSession::default();
            let _ = s.feed(&data, &dev);
        }
    }
}
