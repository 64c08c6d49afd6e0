//! The adb server's host protocol (`host:devices-l`, `host:connect:`), spoken directly over
//! async TCP. adb_client's `ADBServer` runs `adb start-server` before every request to a
//! loopback server, which would spawn a process per call and could start a second server on
//! the default port; these two requests are small enough to speak ourselves.
use std::net::SocketAddrV4;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{DeviceError, Result};

/// One line of `host:devices-l`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerDevice {
    pub serial: String,
    pub state: String,
    pub model: String,
    pub product: String,
}

/// Sends one host request and returns the response body.
pub async fn host_request(
    server: SocketAddrV4,
    request: &str,
    timeout: Duration,
) -> Result<String> {
    let target = format!("adb server {server}");
    let fut = async {
        let mut stream = TcpStream::connect(server).await?;
        stream.set_nodelay(true)?;
        let msg = format!("{:04x}{request}", request.len());
        stream.write_all(msg.as_bytes()).await?;
        let mut status = [0u8; 4];
        stream.read_exact(&mut status).await?;
        let body = read_hex_body(&mut stream).await.unwrap_or_default();
        Ok::<_, std::io::Error>((status, body))
    };
    let (status, body) = tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| DeviceError::Unavailable {
            serial: target.clone(),
            detail: format!("no answer to {request} within {} ms", timeout.as_millis()),
        })?
        .map_err(|e| DeviceError::Unavailable {
            serial: target.clone(),
            detail: format!("{request}: {e} (is the adb server running?)"),
        })?;
    match &status {
        b"OKAY" => Ok(body),
        b"FAIL" => Err(DeviceError::Adb {
            target,
            detail: format!("{request} refused: {body}"),
        }),
        other => Err(DeviceError::Adb {
            target,
            detail: format!(
                "expected OKAY or FAIL after {request}, got {:?}",
                String::from_utf8_lossy(other)
            ),
        }),
    }
}

async fn read_hex_body(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = std::str::from_utf8(&len)
        .ok()
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad length"))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Lists the devices the adb server knows, with their state and banner fields.
pub async fn list_devices(server: SocketAddrV4, timeout: Duration) -> Result<Vec<ServerDevice>> {
    Ok(parse_devices_l(
        &host_request(server, "host:devices-l", timeout).await?,
    ))
}

/// Asks the adb server to attach a device listening on `address`; returns the server's words.
pub async fn connect(server: SocketAddrV4, address: &str, timeout: Duration) -> Result<String> {
    let reply = host_request(server, &format!("host:connect:{address}"), timeout).await?;
    let lower = reply.to_ascii_lowercase();
    if lower.starts_with("connected to") || lower.starts_with("already connected") {
        Ok(reply)
    } else {
        Err(DeviceError::Unavailable {
            serial: address.to_owned(),
            detail: format!("adb server could not connect: {}", reply.trim()),
        })
    }
}

/// Parses `adb devices -l` lines: `SERIAL  STATE key:value ...`.
pub fn parse_devices_l(body: &str) -> Vec<ServerDevice> {
    body.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let serial = parts.next()?.to_owned();
            let state = parts.next()?.to_owned();
            let mut dev = ServerDevice {
                serial,
                state,
                ..ServerDevice::default()
            };
            for kv in parts {
                match kv.split_once(':') {
                    Some(("model", v)) => dev.model = v.to_owned(),
                    Some(("product", v)) => dev.product = v.to_owned(),
                    _ => {}
                }
            }
            Some(dev)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_l_lines_are_parsed() {
        let body = "127.0.0.1:40001        device product:sim_phone model:Droidmesh_Sim device:sim transport_id:1\n\
                    emulator-5554 offline transport_id:2\nR58M12345 unauthorized usb:1-1 transport_id:3\n\n";
        let d = parse_devices_l(body);
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].serial, "127.0.0.1:40001");
        assert_eq!(d[0].state, "device");
        assert_eq!(d[0].model, "Droidmesh_Sim");
        assert_eq!(d[0].product, "sim_phone");
        assert_eq!(d[1].state, "offline");
        assert_eq!(d[2].state, "unauthorized");
    }

    #[tokio::test]
    async fn an_absent_server_is_unavailable_quickly() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = match listener.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => unreachable!(),
        };
        drop(listener);
        let err = list_devices(addr, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(matches!(err, DeviceError::Unavailable { .. }), "{err}");
    }

    #[tokio::test]
    async fn fail_replies_carry_the_servers_message() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = match listener.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => unreachable!(),
        };
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf).await.unwrap();
            s.write_all(b"FAIL0010unknown host svc").await.unwrap();
        });
        let err = host_request(addr, "host:nope", Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown host svc"), "{err}");
    }
}
