//! The routes of the HTTP face and their handlers: each reads its request (path, query, JSON
//! body), builds the gRPC request with the caller's `authorization` and trace headers as
//! metadata, and calls the `Gateway` trait method under the same kind of span a gRPC call
//! gets, within a deadline.
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use droidmesh_proto::v1::gateway_server::Gateway;
use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, ListDevicesRequest, ListTasksRequest, SendMessageRequest,
    TaskRequest, TaskState, WatchTaskRequest,
};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use hyper::body::Incoming;

use super::call::{linger, read_body, unary};
use super::error::ApiError;
use super::json::{self as pj, Proto};
use super::{Body, Face, full, sse};

/// Query parameters that would put a credential in a URL (logged by proxies, kept in
/// histories): refused, whatever the route.
const CREDENTIAL_PARAMS: [&str; 4] = ["api_key", "key", "access_token", "token"];

/// Answers one request; every refusal is a JSON error.
pub async fn handle(face: &Arc<Face>, req: http::Request<Incoming>) -> http::Response<Body> {
    let (parts, mut body) = req.into_parts();
    let resp = match route(face, &parts, &mut body).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    };
    // Answered before the body was read (refused, or not a route that reads one): the client
    // may still be sending it, and would see a reset instead of the answer. One too slow to
    // send it in time is not waited for.
    if !http_body::Body::is_end_stream(&body) && resp.status() != StatusCode::REQUEST_TIMEOUT {
        linger(body);
    }
    resp
}

/// A route and what the path names.
enum Route {
    OpenApi,
    Tasks,
    Task(String),
    Cancel(String),
    Messages(String),
    Events(String),
    Devices,
}

impl Route {
    fn allow(&self) -> &'static str {
        match self {
            Route::Tasks => "GET, POST",
            Route::Cancel(_) | Route::Messages(_) => "POST",
            _ => "GET",
        }
    }
}

fn parse_route(path: &str) -> Result<Route, ApiError> {
    let not_found = || {
        ApiError::not_found(format!(
            "no route {path}; see /openapi.json for the routes this face serves"
        ))
    };
    match path {
        "/openapi.json" => return Ok(Route::OpenApi),
        "/v1/tasks" => return Ok(Route::Tasks),
        "/v1/devices" => return Ok(Route::Devices),
        _ => {}
    }
    let rest = path.strip_prefix("/v1/tasks/").ok_or_else(not_found)?;
    let mut parts = rest.split('/');
    let (Some(first), second, None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(not_found());
    };
    let id = |raw: &str| -> Result<String, ApiError> {
        let id = percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| ApiError::invalid("the task id in the path is not UTF-8"))?;
        if id.is_empty() {
            return Err(not_found());
        }
        Ok(id.into_owned())
    };
    match second {
        None => match first.strip_suffix(":cancel") {
            Some(raw) => Ok(Route::Cancel(id(raw)?)),
            None => Ok(Route::Task(id(first)?)),
        },
        Some("messages") => Ok(Route::Messages(id(first)?)),
        Some("events") => Ok(Route::Events(id(first)?)),
        Some(_) => Err(not_found()),
    }
}

/// The query's parameters, decoded; a credential among them is refused without echoing it.
fn query(uri: &http::Uri) -> Result<Vec<(String, String)>, ApiError> {
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    if let Some((k, _)) = pairs
        .iter()
        .find(|(k, _)| CREDENTIAL_PARAMS.contains(&k.to_ascii_lowercase().as_str()))
    {
        return Err(ApiError::invalid(format!(
            "query parameter {k} looks like a credential; URLs end up in logs: send credentials in the Authorization header (Authorization: Bearer <key>)"
        )));
    }
    Ok(pairs)
}

async fn route(
    face: &Arc<Face>,
    parts: &http::request::Parts,
    body: &mut Incoming,
) -> Result<http::Response<Body>, ApiError> {
    let pairs = query(&parts.uri)?;
    let path = parts.uri.path().to_owned();
    let route = parse_route(&path)?;
    let method = parts.method.clone();
    let headers = &parts.headers;
    let wrong = || ApiError::method_not_allowed(&method, &path, route.allow());
    match (&route, &method) {
        (Route::OpenApi, &Method::GET) => {
            no_query(&pairs)?;
            Ok(json_response(StatusCode::OK, face.openapi.clone()))
        }
        (Route::Tasks, &Method::POST) => create(face, headers, body, &pairs).await,
        (Route::Tasks, &Method::GET) => {
            let r: ListTasksRequest = pj::from_query(&pairs, &[], &[])?;
            let resp = unary(face, headers, "ListTasks", r, |g, r| async move {
                g.list_tasks(r).await
            })
            .await?;
            reply(StatusCode::OK, &resp)
        }
        (Route::Task(id), &Method::GET) => {
            no_query(&pairs)?;
            let r = GetTaskRequest {
                task_id: id.clone(),
            };
            let resp = unary(face, headers, "GetTask", r, |g, r| async move {
                g.get_task(r).await
            })
            .await?;
            reply(StatusCode::OK, &resp)
        }
        (Route::Cancel(id), &Method::POST) => {
            no_query(&pairs)?;
            let bytes = read_body(face, headers, body, false).await?;
            let mut r: CancelTaskRequest = if bytes.is_empty() {
                CancelTaskRequest::default()
            } else {
                pj::from_json(&bytes)?
            };
            r.task_id = path_id(&r.task_id, id)?;
            let resp = unary(face, headers, "CancelTask", r, |g, r| async move {
                g.cancel_task(r).await
            })
            .await?;
            reply(StatusCode::OK, &resp)
        }
        (Route::Messages(id), &Method::POST) => {
            no_query(&pairs)?;
            let bytes = read_body(face, headers, body, true).await?;
            let mut r: SendMessageRequest = pj::from_json(&bytes)?;
            r.task_id = path_id(&r.task_id, id)?;
            let resp = unary(face, headers, "SendMessage", r, |g, r| async move {
                g.send_message(r).await
            })
            .await?;
            reply(StatusCode::OK, &resp)
        }
        (Route::Events(id), &Method::GET) => events(face, headers, id, &pairs).await,
        (Route::Devices, &Method::GET) => {
            no_query(&pairs)?;
            let resp = unary(
                face,
                headers,
                "ListDevices",
                ListDevicesRequest {},
                |g, r| async move { g.list_devices(r).await },
            )
            .await?;
            reply(StatusCode::OK, &resp)
        }
        _ => Err(wrong()),
    }
}

fn no_query(pairs: &[(String, String)]) -> Result<(), ApiError> {
    match pairs.first() {
        Some((k, _)) => Err(ApiError::invalid(format!(
            "unknown query parameter {k}: this call takes none"
        ))),
        None => Ok(()),
    }
}

/// The task id of a body, which the path gives: empty, or the path's.
fn path_id(body: &str, path: &str) -> Result<String, ApiError> {
    if !body.is_empty() && body != path {
        return Err(ApiError::invalid(format!(
            "taskId {body:?} in the body differs from the task in the path ({path:?}); leave it out"
        )));
    }
    Ok(path.to_owned())
}

/// `POST /v1/tasks`: SubmitTask (201 with the id), or with `wait=true` RunTask as SSE.
async fn create(
    face: &Arc<Face>,
    headers: &HeaderMap,
    body: &mut Incoming,
    pairs: &[(String, String)],
) -> Result<http::Response<Body>, ApiError> {
    let mut wait = false;
    for (k, v) in pairs {
        if k != "wait" {
            return Err(ApiError::invalid(format!(
                "unknown query parameter {k}; expected: wait"
            )));
        }
        wait = pj::parse_bool(k, v)?;
    }
    let bytes = read_body(face, headers, body, true).await?;
    let r: TaskRequest = pj::from_json(&bytes)?;
    if wait {
        let events = unary(face, headers, "RunTask", r, |g, r| async move {
            g.run_task(r).await
        })
        .await?;
        return Ok(sse::response(events, keep_alive(face), face.stop.clone()));
    }
    let resp = unary(face, headers, "SubmitTask", r, |g, r| async move {
        g.submit_task(r).await
    })
    .await?;
    let mut out = reply(StatusCode::CREATED, &resp)?;
    let location = format!("/v1/tasks/{}", resp.task_id);
    if let Ok(v) = HeaderValue::from_str(&location) {
        out.headers_mut().insert(header::LOCATION, v);
    }
    Ok(out)
}

/// `GET /v1/tasks/{id}/events`: WatchTask as SSE, from `Last-Event-ID` + 1 (a reconnecting
/// client) or `fromSeq`. A task that has ended with every event delivered answers 204.
async fn events(
    face: &Arc<Face>,
    headers: &HeaderMap,
    id: &str,
    pairs: &[(String, String)],
) -> Result<http::Response<Body>, ApiError> {
    let mut r: WatchTaskRequest = pj::from_query(pairs, &[], &["task_id"])?;
    r.task_id = id.to_owned();
    if let Some(last) = headers.get("last-event-id") {
        let last: u64 = last
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                ApiError::invalid("Last-Event-ID must be the seq of an event (a number)")
            })?;
        r.from_seq = last.saturating_add(1);
    }
    let from = r.from_seq.max(1);
    let events = unary(face, headers, "WatchTask", r, |g, r| async move {
        g.watch_task(r).await
    })
    .await?;
    let task = unary(
        face,
        headers,
        "GetTask",
        GetTaskRequest {
            task_id: id.to_owned(),
        },
        |g, r| async move { g.get_task(r).await },
    )
    .await?;
    let ended = matches!(
        task.state(),
        TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled
    );
    if ended && from > task.last_seq {
        let mut resp = http::Response::new(full(Bytes::new()));
        *resp.status_mut() = StatusCode::NO_CONTENT;
        return Ok(resp);
    }
    Ok(sse::response(events, keep_alive(face), face.stop.clone()))
}

fn keep_alive(face: &Face) -> Duration {
    Duration::from_millis(face.cfg.keep_alive_ms)
}

fn json_response(status: StatusCode, body: Bytes) -> http::Response<Body> {
    let mut resp = http::Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn reply<M: Proto>(status: StatusCode, m: &M) -> Result<http::Response<Body>, ApiError> {
    Ok(json_response(status, Bytes::from(pj::to_json(m)?)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn routes_are_read_from_the_path() {
        assert!(matches!(parse_route("/v1/tasks/task-1"), Ok(Route::Task(id)) if id == "task-1"));
        assert!(
            matches!(parse_route("/v1/tasks/task-1:cancel"), Ok(Route::Cancel(id)) if id == "task-1")
        );
        assert!(
            matches!(parse_route("/v1/tasks/a%2Fb/events"), Ok(Route::Events(id)) if id == "a/b")
        );
        assert!(
            matches!(parse_route("/v1/tasks/t/messages"), Ok(Route::Messages(id)) if id == "t")
        );
        for bad in [
            "/",
            "/v1",
            "/v1/tasks/",
            "/v1/tasks/t/x",
            "/v1/tasks/t/events/1",
            "/v2/tasks",
        ] {
            let e = parse_route(bad).err().unwrap();
            assert_eq!(e.status, StatusCode::NOT_FOUND, "{bad}");
        }
    }

    #[test]
    fn credentials_in_the_query_are_refused_without_echoing_them() {
        for q in [
            "api_key=s3cret",
            "KEY=s3cret",
            "a=1&access_token=s3cret",
            "token=s3cret",
        ] {
            let uri: http::Uri = format!("/v1/tasks?{q}").parse().unwrap();
            let e = query(&uri).unwrap_err();
            assert!(e.message.contains("Authorization"), "{}", e.message);
            assert!(!e.message.contains("s3cret"));
        }
    }
}
