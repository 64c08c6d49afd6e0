//! Telling a peer's answer from a failure of the connection to it. A status a service sends
//! has no source error; one the client's transport makes (HTTP/2, hyper, sockets, the client's
//! own deadline) does, or carries the transport's words. Callers turn the failure into one
//! plain sentence naming the service and its endpoint ([`Transport::words`]) and keep the
//! transport's own text for the log.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::{Code, Status};

/// How a connection to a service failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Nothing answered at the endpoint.
    Unreachable,
    /// The connection broke while the call was under way (the process died, the network
    /// dropped).
    Broken,
    /// The connection is open but the peer answers nothing, keep-alive pings included (a
    /// stopped process, a frozen machine): found by [`probe`] after a break.
    Silent,
    /// The client's own deadline for the call passed before an answer came.
    TimedOut,
    /// The TLS handshake failed (a certificate refused, on either side), or one side spoke
    /// TLS and the other cleartext.
    Tls,
}

impl Transport {
    /// What happened, as the end of a sentence that starts with "<service> at <endpoint>".
    pub fn words(self) -> &'static str {
        match self {
            Self::Unreachable => "could not be reached",
            Self::Broken => "went away mid-step",
            Self::Silent => "stopped answering (it holds its connections open but answers nothing)",
            Self::TimedOut => "did not answer in time",
            Self::Tls => {
                "could not be reached over TLS (a certificate was refused, or one side speaks \
                 TLS and the other not: https:// endpoints call ports that serve TLS; the log \
                 has the details)"
            }
        }
    }
}

/// Whether `status` reports a failed connection (or the client's deadline) rather than an
/// answer from the service, and which.
pub fn transport_failure(status: &Status) -> Option<Transport> {
    // tonic's client deadline (`Endpoint::timeout`) is the only source of this exact status.
    if status.code() == Code::Cancelled && status.message() == "Timeout expired" {
        return Some(Transport::TimedOut);
    }
    if !matches!(
        status.code(),
        Code::Unknown | Code::Internal | Code::Unavailable
    ) {
        return None;
    }
    if tls_failure(status) {
        return Some(Transport::Tls);
    }
    let mut source = std::error::Error::source(status)?;
    loop {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            if matches!(
                io.kind(),
                K::ConnectionRefused | K::AddrNotAvailable | K::NotFound | K::HostUnreachable
            ) {
                return Some(Transport::Unreachable);
            }
        }
        match source.source() {
            Some(next) => source = next,
            None => break,
        }
    }
    let m = status.message();
    if m.contains("connect error") || m.contains("trying to connect") {
        Some(Transport::Unreachable)
    } else {
        Some(Transport::Broken)
    }
}

/// The status's message with the chain of its sources, for the log (a TLS failure's reason is
/// in the sources).
pub fn detail(status: &Status) -> String {
    let mut text = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

/// Whether the status or its sources tell of a failed TLS handshake (droidmesh's connector
/// says "TLS handshake"), or of cleartext HTTP/2 that met a TLS port (the TLS alert it gets
/// back reads as a frame of a wrong size).
fn tls_failure(status: &Status) -> bool {
    let says =
        |text: &str| text.contains("TLS handshake") || text.contains("frame with invalid size");
    if says(status.message()) {
        return true;
    }
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        if says(&e.to_string()) {
            return true;
        }
        source = e.source();
    }
    false
}

/// The HTTP/2 client preface and an empty SETTINGS frame: any HTTP/2 server answers it at once
/// with its own SETTINGS.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// After a connection broke: asks the endpoint ("http://host:port" or "host:port") whether it
/// still answers. Nothing listening is [`Transport::Broken`] (the process went away); a
/// connection that opens but gets no HTTP/2 answer within `within` is [`Transport::Silent`]
/// (the process is stopped: the kernel accepts for it, nobody reads); an answer means the
/// service is there again (restarted, or the network dropped the old connection), also
/// [`Transport::Broken`], unless the endpoint is `http://` and the answer is a TLS alert: then
/// the port serves TLS ([`Transport::Tls`]). An endpoint list (client-side balancing) is not
/// probed.
pub async fn probe(endpoint: &str, within: Duration) -> Transport {
    let cleartext = !endpoint.trim().starts_with("https://");
    let addr = endpoint
        .trim()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    // A TLS port answers the cleartext preface too: its handshake fails at once and it closes
    // the connection, which is an answer; a stopped process does neither.
    if addr.is_empty() || addr.contains(',') {
        return Transport::Broken;
    }
    let answer = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        conn.write_all(PREFACE).await?;
        let mut head = [0u8; 2];
        let mut got = 0;
        while got < head.len() {
            match conn.read(&mut head[got..]).await? {
                0 => break,
                n => got += n,
            }
        }
        Ok::<_, std::io::Error>(head[..got].to_vec())
    };
    match tokio::time::timeout(within, answer).await {
        Err(_) => Transport::Silent,
        // A TLS alert record (content type 21, version 3.x) where an HTTP/2 endpoint expected
        // SETTINGS: the port serves TLS and the endpoint says http://.
        Ok(Ok(head)) if cleartext && head == [0x15, 0x03] => Transport::Tls,
        Ok(_) => Transport::Broken,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_a_service_sends_are_answers() {
        for s in [
            Status::unavailable("busy"),
            Status::invalid_argument("goal is empty"),
            Status::cancelled("stopped by the user"),
        ] {
            assert_eq!(transport_failure(&s), None, "{s:?}");
        }
        assert_eq!(
            transport_failure(&Status::cancelled("Timeout expired")),
            Some(Transport::TimedOut)
        );
    }

    #[tokio::test]
    async fn a_probe_tells_a_stopped_peer_from_a_gone_one() {
        // Nothing listens: gone.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        assert_eq!(
            probe(&gone, Duration::from_secs(2)).await,
            Transport::Broken
        );
        // Listening but never reading (the kernel accepts for a stopped process): silent.
        let frozen = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = format!("http://{}", frozen.local_addr().unwrap());
        assert_eq!(
            probe(&at, Duration::from_millis(300)).await,
            Transport::Silent
        );
        // A server that answers: there again.
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = format!("http://{}", live.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut c, _) = live.accept().await.unwrap();
            let mut buf = [0u8; 64];
            let _ = c.read(&mut buf).await;
            c.write_all(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                .await
                .unwrap();
        });
        assert_eq!(probe(&at, Duration::from_secs(2)).await, Transport::Broken);
    }
}
