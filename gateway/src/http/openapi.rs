//! The OpenAPI 3 document of the HTTP face. Its component schemas are generated from the proto
//! descriptors (the same the JSON mapping reads), with the protos' comments as descriptions,
//! so they cannot drift from the gRPC contract; the paths are this face's routes.
use std::collections::BTreeMap;

use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Value, json};

use super::error::{ApiError, CODE_NAMES};
use super::json::{self as pj, Proto};
use droidmesh_proto::v1;

const ERROR: &str = "Error";

/// Builds the document (once per face).
pub fn document() -> Result<Value, ApiError> {
    let mut sch = Schemas::default();
    for root in [
        v1::TaskRequest::NAME,
        v1::SubmitTaskResponse::NAME,
        v1::Task::NAME,
        v1::ListTasksResponse::NAME,
        v1::SendMessageResponse::NAME,
        v1::TaskEvent::NAME,
        v1::ListDevicesResponse::NAME,
    ] {
        sch.message(&pj::descriptor(root)?);
    }
    let mut schemas = serde_json::Map::new();
    for (name, schema) in std::mem::take(&mut sch.done) {
        schemas.insert(name, schema);
    }
    schemas.insert(
        ERROR.into(),
        json!({
            "type": "object",
            "description": "A refusal or failure: the gRPC status name and its message, as the gRPC face would answer.",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "enum": CODE_NAMES},
                "message": {"type": "string"}
            },
            "additionalProperties": false
        }),
    );
    let rpc = |name: &str| -> String {
        pj::pool()
            .ok()
            .and_then(|p| p.get_service_by_name("droidmesh.v1.Gateway"))
            .and_then(|s| s.methods().find(|m| m.name() == name))
            .and_then(|m| {
                let path = m.path().to_vec();
                comments(m.parent_service().parent_file_descriptor_proto(), &path)
            })
            .unwrap_or_default()
    };
    let id = json!({"name": "id", "in": "path", "required": true, "description": "The task's id (`task-…`).", "schema": {"type": "string"}});
    let list_params = query_params(&pj::descriptor(v1::ListTasksRequest::NAME)?, &[], &mut sch);
    let watch_params = query_params(
        &pj::descriptor(v1::WatchTaskRequest::NAME)?,
        &["task_id"],
        &mut sch,
    );
    let mut events_params = vec![id.clone()];
    events_params.extend(watch_params);
    events_params.push(json!({
        "name": "Last-Event-ID", "in": "header", "required": false,
        "description": "The `id` of the last event received: the stream resumes with the next one, without gaps or repeats (wins over fromSeq).",
        "schema": {"type": "string", "pattern": "^[0-9]{1,20}$"}
    }));
    let cancel_body = body_schema(
        &pj::descriptor(v1::CancelTaskRequest::NAME)?,
        &["task_id"],
        &mut sch,
    );
    let message_body = body_schema(
        &pj::descriptor(v1::SendMessageRequest::NAME)?,
        &["task_id"],
        &mut sch,
    );
    let sse =
        json!({"text/event-stream": {"schema": sse_event(&pj::descriptor(v1::TaskEvent::NAME)?)}});
    let ok = |schema: &str| json!({"description": "OK", "content": {"application/json": {"schema": reference(schema)}}});
    let default = json!({"description": "A refusal or failure (see Error.code; the HTTP status follows the gRPC-to-HTTP mapping)", "content": {"application/json": {"schema": reference(ERROR)}}});
    let paths = json!({
        "/v1/tasks": {
            "post": {
                "operationId": "SubmitTask",
                "summary": "Create a task",
                "description": format!("{}\n\nWith `wait=true` the task's events stream back as Server-Sent Events until it ends, and a client that disconnects cancels the task (RunTask: {}).", rpc("SubmitTask"), rpc("RunTask")),
                "parameters": [{"name": "wait", "in": "query", "required": false, "description": "Stream the task's events until it ends (RunTask).", "schema": {"type": "boolean"}}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": reference(v1::TaskRequest::NAME)}}},
                "responses": {
                    "201": {"description": "Created", "headers": {"Location": {"description": "/v1/tasks/{id}", "schema": {"type": "string"}}}, "content": {"application/json": {"schema": reference(v1::SubmitTaskResponse::NAME)}}},
                    "200": {"description": "With wait=true: the task's events", "content": sse.clone()},
                    "default": default.clone()
                }
            },
            "get": {
                "operationId": "ListTasks",
                "summary": "List tasks",
                "description": rpc("ListTasks"),
                "parameters": list_params,
                "responses": {"200": ok(v1::ListTasksResponse::NAME), "default": default.clone()}
            }
        },
        "/v1/tasks/{id}": {
            "get": {
                "operationId": "GetTask",
                "summary": "Get a task",
                "description": rpc("GetTask"),
                "parameters": [id.clone()],
                "responses": {"200": ok(v1::Task::NAME), "default": default.clone()}
            }
        },
        "/v1/tasks/{id}:cancel": {
            "post": {
                "operationId": "CancelTask",
                "summary": "Cancel a task",
                "description": rpc("CancelTask"),
                "parameters": [id.clone()],
                "requestBody": {"required": false, "content": {"application/json": {"schema": cancel_body}}},
                "responses": {"200": ok(v1::Task::NAME), "default": default.clone()}
            }
        },
        "/v1/tasks/{id}/messages": {
            "post": {
                "operationId": "SendMessage",
                "summary": "Steer a running task",
                "description": rpc("SendMessage"),
                "parameters": [id.clone()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": message_body}}},
                "responses": {"200": ok(v1::SendMessageResponse::NAME), "default": default.clone()}
            }
        },
        "/v1/tasks/{id}/events": {
            "get": {
                "operationId": "WatchTask",
                "summary": "Follow a task's events (Server-Sent Events)",
                "description": rpc("WatchTask"),
                "parameters": events_params,
                "responses": {
                    "200": {"description": "The task's events", "content": sse},
                    "204": {"description": "The task has ended and every event was delivered: nothing more will come (EventSource stops reconnecting)."},
                    "default": default.clone()
                }
            }
        },
        "/v1/devices": {
            "get": {
                "operationId": "ListDevices",
                "summary": "List devices",
                "description": rpc("ListDevices"),
                "responses": {"200": ok(v1::ListDevicesResponse::NAME), "default": default.clone()}
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "OpenApi",
                "summary": "This document",
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }
        }
    });
    // Schemas the parameters and bodies referred to after the first pass.
    for (name, schema) in std::mem::take(&mut sch.done) {
        schemas.insert(name, schema);
    }
    Ok(json!({
        "openapi": "3.0.3",
        "info": {
            "title": "droidmesh gateway",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP/JSON face of droidmesh.v1.Gateway: the same calls, checks and limits as the gRPC face; every body is the proto3 JSON mapping of the gRPC message. Credentials go in the Authorization header, never in the URL."
        },
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

/// The schema of one Server-Sent Event (as tools that read event streams check each event):
/// `id` the seq, `event` the JSON name of the TaskEvent's kind (`error` for a failed stream),
/// `data` the TaskEvent's JSON (an Error's for `error`).
fn sse_event(event: &MessageDescriptor) -> Value {
    let mut kinds: Vec<String> = event
        .oneofs()
        .filter(|o| o.name() == "kind")
        .flat_map(|o| {
            o.fields()
                .map(|f| f.json_name().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    kinds.push("error".into());
    json!({
        "type": "object",
        "description": "One Server-Sent Event: `id: <seq>`, `event: <kind>`, `data: <JSON>` lines, one event per TaskEvent; `:` comment lines keep an idle stream alive. A client that reconnects sends the last id it saw as Last-Event-ID.",
        "required": ["data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]{1,20}$", "description": "The event's seq."},
            "event": {"type": "string", "enum": kinds, "description": "The JSON name of the TaskEvent's kind; `error` when the stream failed (then `data` is an Error)."},
            "data": {"type": "string", "description": "The TaskEvent as JSON (the droidmesh.v1.TaskEvent schema), on one line."}
        }
    })
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Component schemas generated so far, by full name.
#[derive(Default)]
struct Schemas {
    done: BTreeMap<String, Value>,
}

impl Schemas {
    fn message(&mut self, m: &MessageDescriptor) {
        if self.done.contains_key(m.full_name()) {
            return;
        }
        // Placed first so recursive messages refer to it rather than loop.
        self.done.insert(m.full_name().to_owned(), Value::Null);
        let schema = self.object(m, &[]);
        self.done.insert(m.full_name().to_owned(), schema);
    }

    /// The schema of message `m` without the fields `skip` (proto names).
    fn object(&mut self, m: &MessageDescriptor, skip: &[&str]) -> Value {
        let mut properties = serde_json::Map::new();
        for f in m.fields().filter(|f| !skip.contains(&f.name())) {
            let mut schema = self.field(&f);
            let description = comments(f.parent_message().parent_file_descriptor_proto(), f.path());
            if f.field_descriptor_proto()
                .options
                .as_ref()
                .is_some_and(|o| o.deprecated())
            {
                schema = with(schema, "deprecated", Value::Bool(true));
            }
            if let Some(d) = description {
                schema = with(schema, "description", Value::String(d));
            }
            properties.insert(f.json_name().to_owned(), schema);
        }
        let mut out =
            json!({"type": "object", "properties": properties, "additionalProperties": false});
        if let Some(d) = comments(m.parent_file_descriptor_proto(), m.path()) {
            out["description"] = Value::String(d);
        }
        // A oneof sets at most one of its fields: exactly one branch holds.
        let groups: Vec<Value> = m
            .oneofs()
            .filter(|o| !o.is_synthetic())
            .map(|o| {
                let names: Vec<Value> = o
                    .fields()
                    .filter(|f| !skip.contains(&f.name()))
                    .map(|f| json!({"required": [f.json_name()]}))
                    .collect();
                let mut branches = names.clone();
                branches.push(json!({"not": {"anyOf": names}}));
                json!({"oneOf": branches})
            })
            .collect();
        match groups.len() {
            0 => {}
            1 => {
                if let (Some(o), Some(Value::Object(g))) =
                    (out.as_object_mut(), groups.into_iter().next())
                {
                    o.extend(g);
                }
            }
            _ => out["allOf"] = Value::Array(groups),
        }
        out
    }

    fn field(&mut self, f: &FieldDescriptor) -> Value {
        if f.is_map()
            && let Kind::Message(entry) = f.kind()
        {
            let value = self.kind(&entry.map_entry_value_field().kind());
            return json!({"type": "object", "additionalProperties": value});
        }
        let one = self.kind(&f.kind());
        if f.is_list() {
            json!({"type": "array", "items": one})
        } else {
            one
        }
    }

    fn kind(&mut self, kind: &Kind) -> Value {
        match kind {
            Kind::Double | Kind::Float => json!({"oneOf": [
                {"type": "number"},
                {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]}
            ]}),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({"type": "integer", "format": "int32", "minimum": i32::MIN, "maximum": i32::MAX})
            }
            Kind::Uint32 | Kind::Fixed32 => {
                json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": u32::MAX})
            }
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                json!({"type": "string", "format": "int64", "pattern": "^-?[0-9]{1,19}$", "description": "A 64-bit integer, as a string."})
            }
            Kind::Uint64 | Kind::Fixed64 => {
                json!({"type": "string", "pattern": "^[0-9]{1,20}$", "description": "An unsigned 64-bit integer, as a string."})
            }
            Kind::Bool => json!({"type": "boolean"}),
            Kind::String => json!({"type": "string"}),
            Kind::Bytes => json!({"type": "string", "format": "byte"}),
            Kind::Enum(e) => {
                self.enumeration(e);
                reference(e.full_name())
            }
            Kind::Message(m) => match well_known(m.full_name()) {
                Some(schema) => schema,
                None => {
                    self.message(m);
                    reference(m.full_name())
                }
            },
        }
    }

    fn enumeration(&mut self, e: &EnumDescriptor) {
        if self.done.contains_key(e.full_name()) {
            return;
        }
        let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
        let mut schema = json!({"type": "string", "enum": names});
        if let Some(d) = comments(e.parent_file_descriptor_proto(), e.path()) {
            schema["description"] = Value::String(d);
        }
        self.done.insert(e.full_name().to_owned(), schema);
    }
}

/// Schemas of the well-known types the protos use, as the JSON mapping writes them.
fn well_known(name: &str) -> Option<Value> {
    Some(match name {
        "google.protobuf.Struct" => json!({"type": "object", "additionalProperties": {}}),
        "google.protobuf.Value" => json!({}),
        "google.protobuf.ListValue" => json!({"type": "array", "items": {}}),
        "google.protobuf.Timestamp" => json!({"type": "string", "format": "date-time"}),
        "google.protobuf.Duration" => {
            json!({"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$"})
        }
        "google.protobuf.Empty" => json!({"type": "object", "additionalProperties": false}),
        _ => return None,
    })
}

/// `schema` with `key` set; a `$ref` is wrapped in `allOf`, since OpenAPI 3.0 ignores its
/// siblings.
fn with(schema: Value, key: &str, value: Value) -> Value {
    let mut schema = if schema.get("$ref").is_some() {
        json!({"allOf": [schema]})
    } else {
        schema
    };
    schema[key] = value;
    schema
}

/// The fields of `m` a query string can set, as parameters (JSON name; the proto name, when it
/// differs, as a second parameter), without `skip`.
fn query_params(m: &MessageDescriptor, skip: &[&str], sch: &mut Schemas) -> Vec<Value> {
    let mut out = Vec::new();
    for f in m
        .fields()
        .filter(|f| !skip.contains(&f.name()) && pj::query_kind(f))
    {
        let schema = sch.field(&f);
        let description = comments(f.parent_message().parent_file_descriptor_proto(), f.path())
            .unwrap_or_default();
        let deprecated = f
            .field_descriptor_proto()
            .options
            .as_ref()
            .is_some_and(|o| o.deprecated());
        let mut param = json!({
            "name": f.json_name(), "in": "query", "required": false,
            "description": description, "schema": schema,
        });
        if f.is_list() {
            param["style"] = json!("form");
            param["explode"] = json!(true);
        }
        if deprecated {
            param["deprecated"] = json!(true);
        }
        if f.name() != f.json_name() {
            let mut alias = param.clone();
            alias["name"] = json!(f.name());
            alias["description"] = json!(format!(
                "The same as {} (give one of the two).",
                f.json_name()
            ));
            out.push(param);
            out.push(alias);
        } else {
            out.push(param);
        }
    }
    out
}

/// The request body schema of `m` without the fields the path gives.
fn body_schema(m: &MessageDescriptor, skip: &[&str], sch: &mut Schemas) -> Value {
    sch.object(m, skip)
}

/// The leading (or trailing) comment of the element at `path` in `file`, trimmed.
fn comments(file: &prost_types::FileDescriptorProto, path: &[i32]) -> Option<String> {
    let info = file.source_code_info.as_ref()?;
    let loc = info.location.iter().find(|l| l.path == path)?;
    let text = loc
        .leading_comments
        .as_deref()
        .or(loc.trailing_comments.as_deref())?;
    let text = text
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_owned();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn schemas_follow_the_descriptors() {
        let doc = document().unwrap();
        let s = &doc["components"]["schemas"];
        let task = &s["droidmesh.v1.Task"];
        assert_eq!(task["properties"]["lastSeq"]["type"], "string");
        assert_eq!(task["properties"]["steps"]["type"], "integer");
        assert_eq!(
            task["properties"]["state"],
            json!({"$ref": "#/components/schemas/droidmesh.v1.TaskState"})
        );
        assert!(
            task["properties"]["firstSeq"]["description"]
                .as_str()
                .unwrap()
                .contains("oldest event"),
            "{}",
            task["properties"]["firstSeq"]
        );
        assert!(
            s["droidmesh.v1.TaskState"]["enum"]
                .as_array()
                .unwrap()
                .contains(&json!("TASK_STATE_SUCCEEDED"))
        );
        // Every field of every generated message is there, by its JSON name.
        for (name, schema) in s.as_object().unwrap() {
            let Some(desc) = pj::pool().unwrap().get_message_by_name(name) else {
                continue;
            };
            for f in desc.fields() {
                assert!(
                    schema["properties"].get(f.json_name()).is_some(),
                    "{name}.{} is missing",
                    f.json_name()
                );
            }
        }
        let kinds = s["droidmesh.v1.TaskEvent"]["oneOf"].as_array().unwrap();
        assert_eq!(kinds.len(), 16, "15 kinds and none");
        let body = &doc["paths"]["/v1/tasks/{id}/messages"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"];
        assert!(body["properties"].get("taskId").is_none());
        assert!(body["properties"].get("humanReply").is_some());
    }
}
