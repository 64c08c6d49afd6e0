//! How the HTTP face calls the gateway: a gRPC request carrying the caller's `authorization`
//! and trace headers as metadata, run under the span a gRPC call gets and within a deadline.
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
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
