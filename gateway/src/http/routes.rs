//! The routes of the HTTP face, an axum `Router`, and their handlers: each takes its request
//! apart with the extractors of `extract` (path, query, JSON body; a refusal is a JSON error),
//! builds the gRPC request with the caller's `authorization` and trace headers as metadata,
//! and calls the `Gateway` trait method under the same kind of span a gRPC call gets, within
//! a deadline. A method a path does not serve (HEAD included) is 405 with `Allow`; a path no
//! route serves is 404.
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{MethodRouter, get, post};
use bytes::Bytes;
use droidmesh_proto::v1::gateway_server::Gateway;
use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, ListDevicesRequest, ListTasksRequest, SendMessageRequest,
    TaskRequest, TaskState, WatchTaskRequest,
};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};

use super::call::unary;
use super::error::ApiError;
use super::extract::{
    Json, NoQuery, Query, Target, TaskId, TaskToCancel, TaskToGet, Wait, no_route,
    refuse_credentials,
};
use super::json::{self as pj, Proto};
use super::{Face, full, sse};

type Shared = State<Arc<Face>>;

/// Every route of the face, on `face`.
pub fn router(face: Arc<Face>) -> Router {
    Router::new()
        .route("/openapi.json", only("GET", get(openapi)))
        .route("/v1/tasks", only("GET, POST", get(list_tasks).post(create)))
        .route("/v1/devices", only("GET", get(list_devices)))
        // The task, and its cancelling (`{id}:cancel`): one path segment, told apart by the
        // extractors.
        .route(
            "/v1/tasks/{id}",
            get(get_task)
                .post(cancel)
                .head(other_target_method)
                .fallback(other_target_method),
        )
        .route(
            "/v1/tasks/{id}/messages",
            of_task("POST", post(send_message)),
        )
        .route("/v1/tasks/{id}/events", of_task("GET", get(events)))
        .fallback(|uri: Uri| async move { no_route(uri.path()) })
        .layer(axum::middleware::from_fn(refuse_credentials))
        .with_state(face)
}

/// `route`, refusing every other method (HEAD too: a GET route does not answer it) with 405
/// and `allow`.
fn only(allow: &'static str, route: MethodRouter<Arc<Face>>) -> MethodRouter<Arc<Face>> {
    let refuse = move |method: Method, uri: Uri| async move {
        ApiError::method_not_allowed(&method, uri.path(), allow)
    };
    route.head(refuse).fallback(refuse)
}

/// [`only`] for a path naming a task: a task id that is not UTF-8 is refused first.
fn of_task(allow: &'static str, route: MethodRouter<Arc<Face>>) -> MethodRouter<Arc<Face>> {
    let refuse = move |_: TaskId, method: Method, uri: Uri| async move {
        ApiError::method_not_allowed(&method, uri.path(), allow)
    };
    route.head(refuse).fallback(refuse)
}

/// A method `/v1/tasks/{id}` does not serve: 405 with what the path serves (GET for the
/// task, POST for its cancelling).
async fn other_target_method(target: Target, method: Method, uri: Uri) -> ApiError {
    ApiError::method_not_allowed(&method, uri.path(), target.allow())
}

async fn openapi(State(face): Shared, _: NoQuery) -> Response {
    json_response(StatusCode::OK, face.openapi.clone())
}

/// `GET /v1/tasks`: ListTasks, its fields as query parameters.
async fn list_tasks(
    State(face): Shared,
    Query(pairs): Query,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let r: ListTasksRequest = pj::from_query(&pairs, &[], &[])?;
    let resp = unary(&face, &headers, "ListTasks", r, |g, r| async move {
        g.list_tasks(r).await
    })
    .await?;
    reply(StatusCode::OK, &resp)
}

/// `POST /v1/tasks`: SubmitTask (201 with the id), or with `wait=true` RunTask as SSE.
async fn create(
    State(face): Shared,
    Wait(wait): Wait,
    headers: HeaderMap,
    Json(r): Json<TaskRequest>,
) -> Result<Response, ApiError> {
    if wait {
        let events = unary(&face, &headers, "RunTask", r, |g, r| async move {
            g.run_task(r).await
        })
        .await?;
        return Ok(sse::response(events, keep_alive(&face), face.stop.clone()));
    }
    let resp = unary(&face, &headers, "SubmitTask", r, |g, r| async move {
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

/// `GET /v1/tasks/{id}`: GetTask.
async fn get_task(
    State(face): Shared,
    TaskToGet(id): TaskToGet,
    _: NoQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let r = GetTaskRequest { task_id: id };
    let resp = unary(&face, &headers, "GetTask", r, |g, r| async move {
        g.get_task(r).await
    })
    .await?;
    reply(StatusCode::OK, &resp)
}

/// `POST /v1/tasks/{id}:cancel`: CancelTask; the body (a reason) may be left out.
async fn cancel(
    State(face): Shared,
    TaskToCancel(id): TaskToCancel,
    _: NoQuery,
    headers: HeaderMap,
    Json(mut r): Json<CancelTaskRequest, false>,
) -> Result<Response, ApiError> {
    r.task_id = path_id(&r.task_id, &id)?;
    let resp = unary(&face, &headers, "CancelTask", r, |g, r| async move {
        g.cancel_task(r).await
    })
    .await?;
    reply(StatusCode::OK, &resp)
}

/// `POST /v1/tasks/{id}/messages`: SendMessage.
async fn send_message(
    State(face): Shared,
    TaskId(id): TaskId,
    _: NoQuery,
    headers: HeaderMap,
    Json(mut r): Json<SendMessageRequest>,
) -> Result<Response, ApiError> {
    r.task_id = path_id(&r.task_id, &id)?;
    let resp = unary(&face, &headers, "SendMessage", r, |g, r| async move {
        g.send_message(r).await
    })
    .await?;
    reply(StatusCode::OK, &resp)
}

/// `GET /v1/devices`: ListDevices.
async fn list_devices(
    State(face): Shared,
    _: NoQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let resp = unary(
        &face,
        &headers,
        "ListDevices",
        ListDevicesRequest {},
        |g, r| async move { g.list_devices(r).await },
    )
    .await?;
    reply(StatusCode::OK, &resp)
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

/// `GET /v1/tasks/{id}/events`: WatchTask as SSE, from `Last-Event-ID` + 1 (a reconnecting
/// client) or `fromSeq`. A task that has ended with every event delivered answers 204.
async fn events(
    State(face): Shared,
    TaskId(id): TaskId,
    Query(pairs): Query,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut r: WatchTaskRequest = pj::from_query(&pairs, &[], &["task_id"])?;
    r.task_id = id.clone();
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
    let events = unary(&face, &headers, "WatchTask", r, |g, r| async move {
        g.watch_task(r).await
    })
    .await?;
    let task = unary(
        &face,
        &headers,
        "GetTask",
        GetTaskRequest { task_id: id },
        |g, r| async move { g.get_task(r).await },
    )
    .await?;
    let ended = matches!(
        task.state(),
        TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled
    );
    if ended && from > task.last_seq {
        let mut resp = Response::new(full(Bytes::new()));
        *resp.status_mut() = StatusCode::NO_CONTENT;
        return Ok(resp);
    }
    Ok(sse::response(events, keep_alive(&face), face.stop.clone()))
}

fn keep_alive(face: &Face) -> Duration {
    Duration::from_millis(face.cfg.keep_alive_ms)
}

fn json_response(status: StatusCode, body: Bytes) -> Response {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn reply<M: Proto>(status: StatusCode, m: &M) -> Result<Response, ApiError> {
    Ok(json_response(status, Bytes::from(pj::to_json(m)?)))
}
