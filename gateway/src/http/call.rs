//! How the HTTP face calls the gateway: a request body read within its limits (size,
//! content type, time), and a gRPC request carrying the caller's `authorization` and trace
//! headers as metadata, run under the span a gRPC call gets and within a deadline.
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use tonic::Code;
use tracing::Instrument as _;

use super::Face;
use super::error::ApiError;
use crate::GatewayService;

/// Headers passed on to the gateway as gRPC metadata.
const FORWARDED: [&str; 3] = ["authorization", "traceparent", "tracestate"];

/// Calls the gateway as a gRPC call would: `headers` forwarded as metadata, a server span
/// named by the method (parented on the caller's `traceparent`), at most the request timeout.
pub async fn unary<Req, Resp, F, Fut>(
    face: &Arc<Face>,
    headers: &HeaderMap,
    method: &str,
    msg: Req,
    call: F,
) -> Result<Resp, ApiError>
where
    F: FnOnce(Arc<GatewayService>, tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let request = grpc_request(headers, msg)?;
    let span = span(headers, method);
    let limit = Duration::from_millis(face.cfg.request_timeout_ms);
    match tokio::time::timeout(limit, call(face.gateway.clone(), request).instrument(span)).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(status)) => Err(ApiError::from_status(&status)),
        Err(_) => Err(ApiError::new(
            Code::DeadlineExceeded,
            format!("{method} did not finish within {limit:?} (gateway_http.request_timeout_ms)"),
        )),
    }
}

/// The gRPC request of `msg` with the forwarded headers as metadata.
pub fn grpc_request<M>(headers: &HeaderMap, msg: M) -> Result<tonic::Request<M>, ApiError> {
    let mut request = tonic::Request::new(msg);
    for name in FORWARDED {
        let mut values = headers.get_all(name).iter();
        let Some(value) = values.next() else { continue };
        if values.next().is_some() {
            return Err(ApiError::invalid(format!(
                "the {name} header is given more than once; send it once"
            )));
        }
        let value = value
            .to_str()
            .ok()
            .and_then(|v| tonic::metadata::MetadataValue::try_from(v).ok())
            .ok_or_else(|| {
                ApiError::invalid(format!("the {name} header must be printable ASCII"))
            })?;
        request.metadata_mut().insert(name, value);
    }
    Ok(request)
}

/// The span of a gRPC call to `method`, as the gRPC server makes it, from the caller's trace
/// headers.
fn span(headers: &HeaderMap, method: &str) -> tracing::Span {
    let mut req = http::Request::new(());
    if let Ok(uri) = format!("/{}/{method}", droidmesh_proto::service_names::GATEWAY).parse() {
        *req.uri_mut() = uri;
    }
    for name in ["traceparent", "tracestate"] {
        if let Some(v) = headers.get(name) {
            req.headers_mut().insert(name, v.clone());
        }
    }
    droidmesh_runtime::trace_context::server_span("gateway", &req)
}

/// Reads a JSON body: `Content-Type: application/json` (415 otherwise), at most
/// `max_body_bytes` (413, refused from `Content-Length` before reading), within the read
/// timeout. An empty body is allowed only when not `required`.
pub async fn read_body(
    face: &Face,
    headers: &HeaderMap,
    body: &mut Incoming,
    required: bool,
) -> Result<Bytes, ApiError> {
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
        return Err(ApiError::invalid(
            "the body is empty; expected a JSON object (see /openapi.json)",
        ));
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
            return Err(ApiError::http(
                StatusCode::REQUEST_TIMEOUT,
                Code::DeadlineExceeded,
                format!("the body did not arrive within {limit:?}"),
            ));
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => {}
    }
    let bytes = Bytes::from(bytes);
    if bytes.is_empty() && required {
        return Err(ApiError::invalid(
            "the body is empty; expected a JSON object (see /openapi.json)",
        ));
    }
    Ok(bytes)
}

/// At most this much of a refused body is read and dropped, for at most this long and while
/// it keeps coming, so the client that sent it reads the answer rather than a reset (nginx's
/// lingering close); then the connection closes.
const LINGER_BYTES: usize = 16 * 1024 * 1024;
const LINGER_TIME: Duration = Duration::from_secs(5);
const LINGER_IDLE: Duration = Duration::from_secs(1);

/// Reads and drops what is left of `body`, within [`LINGER_BYTES`] and [`LINGER_TIME`],
/// stopping when nothing came for [`LINGER_IDLE`].
pub fn linger(mut body: Incoming) {
    tokio::spawn(async move {
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
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http::HeaderValue;

    #[test]
    fn authorization_and_trace_headers_become_metadata() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer k-123"));
        h.insert(
            "traceparent",
            HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        );
        h.insert("cookie", HeaderValue::from_static("session=1"));
        let r = grpc_request(&h, ()).unwrap();
        assert_eq!(r.metadata().get("authorization").unwrap(), "Bearer k-123");
        assert!(r.metadata().get("traceparent").is_some());
        assert!(r.metadata().get("cookie").is_none());
        h.append("authorization", HeaderValue::from_static("Bearer other"));
        assert!(
            grpc_request(&h, ())
                .unwrap_err()
                .message
                .contains("more than once")
        );
    }
}
