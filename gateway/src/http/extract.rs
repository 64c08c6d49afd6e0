//! What a handler of the HTTP face takes from its request, as axum extractors whose refusals
//! are the face's JSON errors: the query's parameters (a credential among them is refused on
//! every path, known or not, before any other refusal), the task the path names, and a JSON
//! body read within the face's limits. A handler lists them in the order its refusals come:
//! the path, then the query, then the body.
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http::request::Parts;

use super::Face;
use super::body;
use super::error::ApiError;
use super::json::{self as pj, Proto};

/// Query parameters that would put a credential in a URL (logged by proxies, kept in
/// histories): refused, whatever the route.
const CREDENTIAL_PARAMS: [&str; 4] = ["api_key", "key", "access_token", "token"];

/// The query's parameters, decoded.
fn pairs(uri: &http::Uri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// A credential among the query's parameters, refused without echoing it.
fn no_credential(uri: &http::Uri) -> Result<(), ApiError> {
    match pairs(uri)
        .into_iter()
        .find(|(k, _)| CREDENTIAL_PARAMS.contains(&k.to_ascii_lowercase().as_str()))
    {
        Some((k, _)) => Err(ApiError::invalid(format!(
            "query parameter {k} looks like a credential; URLs end up in logs: send credentials in the Authorization header (Authorization: Bearer <key>)"
        ))),
        None => Ok(()),
    }
}

/// Middleware around every route and the fallback: a request with a credential in its query
/// is refused before anything else.
pub async fn refuse_credentials(req: Request, next: Next) -> Response {
    match no_credential(req.uri()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// What no route serves: 404 naming the path.
pub fn no_route(path: &str) -> ApiError {
    ApiError::not_found(format!(
        "no route {path}; see /openapi.json for the routes this face serves"
    ))
}

/// The query's parameters, decoded, for a call that reads them as a message's fields.
pub struct Query(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Self(pairs(&parts.uri)))
    }
}

/// A call that takes no query parameters: any is refused.
pub struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match pairs(&parts.uri).first() {
            Some((k, _)) => Err(ApiError::invalid(format!(
                "unknown query parameter {k}: this call takes none"
            ))),
            None => Ok(Self),
        }
    }
}

/// `POST /v1/tasks?wait=true`: the only parameter that call takes.
pub struct Wait(pub bool);

impl<S: Send + Sync> FromRequestParts<S> for Wait {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let mut wait = false;
        for (k, v) in pairs(&parts.uri) {
            if k != "wait" {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {k}; expected: wait"
                )));
            }
            wait = pj::parse_bool(&k, &v)?;
        }
        Ok(Self(wait))
    }
}

/// The task a path's `{id}` names, percent-decoded (`a%2Fb` is `a/b`).
pub struct TaskId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TaskId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| match e {
                RawPathParamsRejection::InvalidUtf8InPathParam(_) => {
                    ApiError::invalid("the task id in the path is not UTF-8")
                }
                other => ApiError::new(
                    tonic::Code::Internal,
                    format!("the route has no task id: {other}"),
                ),
            })?;
        let id = params
            .iter()
            .find(|(k, _)| *k == "id")
            .map(|(_, v)| v.to_owned())
            .unwrap_or_default();
        if id.is_empty() {
            return Err(no_route(parts.uri.path()));
        }
        Ok(Self(id))
    }
}

/// What `/v1/tasks/{id}` names: the task, or with a literal `:cancel` after the id (not an
/// encoded one: `a%3Acancel` is the task `a:cancel`) its cancelling.
pub enum Target {
    Task(String),
    Cancel(String),
}

impl Target {
    /// The methods the path serves, for a 405.
    pub fn allow(&self) -> &'static str {
        match self {
            Target::Task(_) => "GET",
            Target::Cancel(_) => "POST",
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Target {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let TaskId(id) = TaskId::from_request_parts(parts, state).await?;
        if !parts.uri.path().ends_with(":cancel") {
            return Ok(Target::Task(id));
        }
        match id.strip_suffix(":cancel") {
            Some(id) if !id.is_empty() => Ok(Target::Cancel(id.to_owned())),
            _ => Err(no_route(parts.uri.path())),
        }
    }
}

/// `GET /v1/tasks/{id}`: the task, or 405 when the path names its cancelling.
pub struct TaskToGet(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TaskToGet {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Target::from_request_parts(parts, state).await? {
            Target::Task(id) => Ok(Self(id)),
            target => Err(wrong_method(parts, &target)),
        }
    }
}

/// `POST /v1/tasks/{id}:cancel`: the task, or 405 when the path names only the task.
pub struct TaskToCancel(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TaskToCancel {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Target::from_request_parts(parts, state).await? {
            Target::Cancel(id) => Ok(Self(id)),
            target => Err(wrong_method(parts, &target)),
        }
    }
}

fn wrong_method(parts: &Parts, target: &Target) -> ApiError {
    ApiError::method_not_allowed(&parts.method, parts.uri.path(), target.allow())
}

/// A request message from a JSON body, read within the face's limits ([`body::read_json`]).
/// Unless `REQUIRED`, an empty body is the message's defaults.
pub struct Json<M, const REQUIRED: bool = true>(pub M);

impl<M: Proto, const REQUIRED: bool> FromRequest<Arc<Face>> for Json<M, REQUIRED> {
    type Rejection = ApiError;

    async fn from_request(req: Request, face: &Arc<Face>) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = body::read_json(face, &parts, body, REQUIRED).await?;
        if bytes.is_empty() {
            return Ok(Self(M::default()));
        }
        Ok(Self(pj::from_json(&bytes)?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn credentials_in_the_query_are_refused_without_echoing_them() {
        for q in [
            "api_key=s3cret",
            "KEY=s3cret",
            "a=1&access_token=s3cret",
            "token=s3cret",
        ] {
            let uri: http::Uri = format!("/v1/tasks?{q}").parse().unwrap();
            let e = no_credential(&uri).unwrap_err();
            assert!(e.message.contains("Authorization"), "{}", e.message);
            assert!(!e.message.contains("s3cret"));
        }
        let uri: http::Uri = "/v1/tasks?keys=1&tokens=2".parse().unwrap();
        assert!(no_credential(&uri).is_ok());
    }
}
