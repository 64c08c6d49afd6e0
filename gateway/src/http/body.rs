//! A request's body: read within the face's limits (size, content type, time), and what is left
//! of one the face does not read drained in the background (a lingering close), so a client
//! that sends its body whole reads the answer rather than a reset.
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{StatusCode, header};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use tonic::Code;

use super::Face;
use super::error::ApiError;

/// At most this much of a refused body is read and dropped, for at most this long and while
/// it keeps coming, so the client that sent it reads the answer rather than a reset (nginx's
/// lingering close); then the connection closes.
const LINGER_BYTES: usize = 16 * 1024 * 1024;
const LINGER_TIME: Duration = Duration::from_secs(5);
const LINGER_IDLE: Duration = Duration::from_secs(1);

/// Marks a request whose client was too slow to send its body in time: what is left of it is
/// not waited for. In the request's extensions.
#[derive(Clone, Default)]
pub struct TooSlow(Arc<AtomicBool>);

/// The body of a request as it came: dropped before its end (not read, or refused part way),
/// the rest is drained in the background unless the request is marked [`TooSlow`].
pub struct Lingering {
    inner: Option<Incoming>,
    too_slow: TooSlow,
}

/// `req` with its body [`Lingering`] and its [`TooSlow`] mark in its extensions.
pub fn lingering(req: http::Request<Incoming>) -> http::Request<axum::body::Body> {
    let too_slow = TooSlow::default();
    let (mut parts, body) = req.into_parts();
    parts.extensions.insert(too_slow.clone());
    let body = Lingering {
        inner: Some(body),
        too_slow,
    };
    http::Request::from_parts(parts, axum::body::Body::new(body))
}

impl http_body::Body for Lingering {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), http_body::Body::size_hint)
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(body) = self.inner.take() else {
            return;
        };
        if http_body::Body::is_end_stream(&body) || self.too_slow.0.load(Ordering::Relaxed) {
            return;
        }
        // A body is dropped on its connection's task, within the runtime; were it dropped
        // outside one, nothing would be drained.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(linger(body));
        }
    }
}

/// Reads and drops what is left of `body`, within [`LINGER_BYTES`] and [`LINGER_TIME`],
/// stopping when nothing came for [`LINGER_IDLE`].
async fn linger(mut body: Incoming) {
    let mut left = LINGER_BYTES;
    let _ = tokio::time::timeout(LINGER_TIME, async {
        while let Ok(Some(Ok(frame))) = tokio::time::timeout(LINGER_IDLE, body.frame()).await {
            let n = frame.data_ref().map_or(0, Bytes::len);
            if n >= left {
                return;
            }
            left -= n;
        }
    })
    .await;
}

/// Reads a JSON body: `Content-Type: application/json` (415 otherwise), at most
/// `max_body_bytes` (413, refused from `Content-Length` before reading), within the read
/// timeout. An empty body is allowed only when not `required`.
pub async fn read_json(
    face: &Face,
    parts: &Parts,
    mut body: axum::body::Body,
    required: bool,
) -> Result<Bytes, ApiError> {
    let headers = &parts.headers;
    let max = face.cfg.max_body_bytes;
    let too_large = |size: String| {
        ApiError::http(
            StatusCode::PAYLOAD_TOO_LARGE,
            Code::InvalidArgument,
            format!(
                "the body is {size} bytes; at most {max} are accepted (gateway_http.max_body_bytes)"
            ),
        )
    };
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = length
        && n > max as u64
    {
        return Err(too_large(n.to_string()));
    }
    let content_type = headers.get(header::CONTENT_TYPE);
    let is_json = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    // HTTP/1.1: without Content-Length or Transfer-Encoding a request has no body.
    let empty =
        length == Some(0) || (length.is_none() && !headers.contains_key(header::TRANSFER_ENCODING));
    if empty && required {
        return Err(empty_body());
    }
    if empty && (content_type.is_none() || is_json) {
        return Ok(Bytes::new());
    }
    if !is_json {
        let found = content_type
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| "none".to_owned(), str::to_owned);
        return Err(ApiError::http(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::InvalidArgument,
            format!("expected Content-Type: application/json, found {found}"),
        ));
    }
    let limit = Duration::from_millis(face.cfg.read_timeout_ms);
    let mut bytes = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|e| ApiError::invalid(format!("the body could not be read: {e}")))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > max {
                    return Err(too_large(format!("more than {max}")));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(())
    };
    match tokio::time::timeout(limit, read).await {
        Err(_) => {
            // One too slow to send its body in time is not waited for.
            if let Some(too_slow) = parts.extensions.get::<TooSlow>() {
                too_slow.0.store(true, Ordering::Relaxed);
            }
            return Err(ApiError::http(
                StatusCode::REQUEST_TIMEOUT,
                Code::DeadlineExceeded,
                format!("the body did not arrive within {limit:?}"),
            ));
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => {}
    }
    if bytes.is_empty() && required {
        return Err(empty_body());
    }
    Ok(Bytes::from(bytes))
}

fn empty_body() -> ApiError {
    ApiError::invalid("the body is empty; expected a JSON object (see /openapi.json)")
}
