//! The protobuf JSON mapping (proto3 canonical JSON) of the gateway's own gRPC messages: a
//! prost message is encoded, decoded as a `DynamicMessage` of the descriptor pool built once
//! from `droidmesh_proto::FILE_DESCRIPTOR_SET`, and written with serde; request bodies and
//! query strings go the other way, unknown fields refused, each refusal naming the field.
use std::sync::OnceLock;

use droidmesh_proto::v1;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor,
    ReflectMessage as _, SerializeOptions,
};
use serde_json::Value;

use super::error::ApiError;

/// A gRPC message of the Gateway service with its protobuf full name.
pub trait Proto: prost::Message + Default {
    const NAME: &'static str;
}

macro_rules! proto {
    ($($t:ident),*) => {$(
        impl Proto for v1::$t {
            const NAME: &'static str = concat!("droidmesh.v1.", stringify!($t));
        }
    )*};
}

proto!(
    TaskRequest,
    SubmitTaskResponse,
    Task,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    CancelTaskRequest,
    WatchTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    TaskEvent,
    ListDevicesRequest,
    ListDevicesResponse
);

/// Query strings hold at most this many parameters.
const MAX_QUERY_PARAMS: usize = 64;

static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();

/// The descriptors of every droidmesh proto, decoded once.
pub fn pool() -> Result<&'static DescriptorPool, ApiError> {
    POOL.get_or_init(|| {
        DescriptorPool::decode(droidmesh_proto::FILE_DESCRIPTOR_SET).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| internal(format!("the proto descriptors do not decode: {e}")))
}

fn internal(message: String) -> ApiError {
    ApiError::new(tonic::Code::Internal, message)
}

/// The descriptor of message `name` (a full name).
pub fn descriptor(name: &str) -> Result<MessageDescriptor, ApiError> {
    pool()?
        .get_message_by_name(name)
        .ok_or_else(|| internal(format!("no message {name} among the proto descriptors")))
}

/// `m` as a dynamic message of its descriptor.
pub fn dynamic<M: Proto>(m: &M) -> Result<DynamicMessage, ApiError> {
    DynamicMessage::decode(descriptor(M::NAME)?, m.encode_to_vec().as_slice())
        .map_err(|e| internal(format!("{} does not decode as itself: {e}", M::NAME)))
}

/// `m` in the proto3 JSON mapping (lowerCamelCase names, enums by name, 64-bit integers as
/// strings, fields at their default left out), compact: one line.
pub fn to_json<M: Proto>(m: &M) -> Result<Vec<u8>, ApiError> {
    write_json(&dynamic(m)?)
}

pub fn write_json(m: &DynamicMessage) -> Result<Vec<u8>, ApiError> {
    let mut out = serde_json::Serializer::new(Vec::new());
    m.serialize_with_options(&mut out, &SerializeOptions::new())
        .map_err(|e| {
            internal(format!(
                "{} does not encode as JSON: {e}",
                m.descriptor().full_name()
            ))
        })?;
    Ok(out.into_inner())
}

/// Reads a request body: JSON text of message `M`. Syntax errors give their line and column;
/// a value of the wrong type, an unknown field or enum name give the field's path.
pub fn from_json<M: Proto>(body: &[u8]) -> Result<M, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the body is not JSON: {e}")))?;
    from_value(value)
}

/// `value` (a JSON object) as message `M`.
pub fn from_value<M: Proto>(value: Value) -> Result<M, ApiError> {
    let desc = descriptor(M::NAME)?;
    let dynamic = parse(&desc, &value).map_err(|e| {
        let short = desc.name();
        let at = locate(&desc, &value, String::new());
        match at {
            Some((path, why)) if !path.is_empty() => {
                ApiError::invalid(format!("{short}.{path}: {why}"))
            }
            _ => ApiError::invalid(format!("not a {short}: {e}")),
        }
    })?;
    dynamic
        .transcode_to::<M>()
        .map_err(|e| internal(format!("{} does not convert: {e}", M::NAME)))
}

fn parse(desc: &MessageDescriptor, value: &Value) -> Result<DynamicMessage, serde_json::Error> {
    DynamicMessage::deserialize_with_options(desc.clone(), value, &DeserializeOptions::new())
}

/// The path of the first field of `value` that message `desc` refuses, and why. Only the failed
/// parse pays for this.
fn locate(desc: &MessageDescriptor, value: &Value, prefix: String) -> Option<(String, String)> {
    let Value::Object(fields) = value else {
        let why = parse(desc, value).err()?.to_string();
        return Some((prefix.trim_end_matches('.').to_owned(), why));
    };
    for (key, v) in fields {
        let path = format!("{prefix}{key}");
        let Some(field) = find_field(desc, key) else {
            let known: Vec<String> = desc.fields().map(|f| f.json_name().to_owned()).collect();
            let known = known.join(", ");
            return Some((path, format!("no such field; expected one of: {known}")));
        };
        let single = Value::Object([(key.clone(), v.clone())].into_iter().collect());
        let Err(e) = parse(desc, &single) else {
            continue;
        };
        if let (Kind::Message(m), false) = (field.kind(), is_well_known(&field)) {
            let inner = match v {
                Value::Object(_) if !field.is_list() && !field.is_map() => {
                    locate(&m, v, format!("{path}."))
                }
                Value::Array(items) if field.is_list() => items
                    .iter()
                    .enumerate()
                    .find_map(|(i, item)| locate(&m, item, format!("{path}[{i}]."))),
                Value::Object(entries) if field.is_map() => {
                    let value_field = m.map_entry_value_field();
                    match value_field.kind() {
                        Kind::Message(vm) => entries
                            .iter()
                            .find_map(|(k, item)| locate(&vm, item, format!("{path}.{k}."))),
                        _ => None,
                    }
                }
                _ => None,
            };
            if inner.is_some() {
                return inner;
            }
        }
        return Some((path, e.to_string()));
    }
    None
}

fn is_well_known(field: &FieldDescriptor) -> bool {
    matches!(field.kind(), Kind::Message(m) if m.package_name() == "google.protobuf")
}

fn find_field(desc: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    desc.get_field_by_json_name(key)
        .or_else(|| desc.get_field_by_name(key))
}

/// Reads query parameters as the fields of message `M` (by proto or JSON name): scalars,
/// enums by name, repeated fields by repeating the parameter. `skip` names parameters the
/// route reads itself; `path_fields` are fields taken from the path, refused here.
pub fn from_query<M: Proto>(
    pairs: &[(String, String)],
    skip: &[&str],
    path_fields: &[&str],
) -> Result<M, ApiError> {
    if pairs.len() > MAX_QUERY_PARAMS {
        return Err(ApiError::invalid(format!(
            "the query has {} parameters; at most {MAX_QUERY_PARAMS} are accepted",
            pairs.len()
        )));
    }
    let desc = descriptor(M::NAME)?;
    let mut object = serde_json::Map::new();
    let mut given: Vec<(String, String)> = Vec::new();
    for (key, raw) in pairs {
        if skip.contains(&key.as_str()) {
            continue;
        }
        let field = find_field(&desc, key)
            .filter(|f| !path_fields.contains(&f.name()))
            .ok_or_else(|| unknown_param(&desc, key, skip, path_fields))?;
        let value = query_value(&field, key, raw)?;
        let name = field.json_name().to_owned();
        if field.is_list() {
            if let Some(Value::Array(items)) = object.get_mut(&name) {
                items.push(value);
            } else {
                object.insert(name.clone(), Value::Array(vec![value]));
            }
        } else {
            // The same value under both names (page_size, pageSize) is one value.
            if let Some(first) = object.get(&name) {
                if *first == value {
                    continue;
                }
                let (_, as_key) = given
                    .iter()
                    .find(|(n, _)| *n == name)
                    .cloned()
                    .unwrap_or_default();
                return Err(ApiError::invalid(format!(
                    "query parameter {key} is given more than once with different values (first as {as_key}); give it once"
                )));
            }
            object.insert(name.clone(), value);
        }
        given.push((name, key.clone()));
    }
    from_value(Value::Object(object))
}

fn unknown_param(desc: &MessageDescriptor, key: &str, skip: &[&str], path: &[&str]) -> ApiError {
    let mut known: Vec<String> = desc
        .fields()
        .filter(|f| !path.contains(&f.name()) && query_kind(f))
        .map(|f| f.json_name().to_owned())
        .collect();
    known.extend(skip.iter().map(|s| (*s).to_owned()));
    if known.is_empty() {
        return ApiError::invalid(format!(
            "unknown query parameter {key}: this call takes none"
        ));
    }
    ApiError::invalid(format!(
        "unknown query parameter {key}; expected one of: {}",
        known.join(", ")
    ))
}

/// Whether a field can be given in a query string (not a message or map).
pub fn query_kind(f: &FieldDescriptor) -> bool {
    !f.is_map() && !matches!(f.kind(), Kind::Message(_))
}

fn query_value(field: &FieldDescriptor, key: &str, raw: &str) -> Result<Value, ApiError> {
    if !query_kind(field) {
        return Err(ApiError::invalid(format!(
            "query parameter {key} is a message; send it in a JSON body"
        )));
    }
    Ok(match field.kind() {
        Kind::Bool => Value::Bool(parse_bool(key, raw)?),
        // Strings, enum names and numbers: the JSON mapping reads numbers from strings too,
        // and refuses what is not one, naming the field.
        _ => Value::String(raw.to_owned()),
    })
}

/// `true`/`false` (or `1`/`0`).
pub fn parse_bool(key: &str, raw: &str) -> Result<bool, ApiError> {
    match raw {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        other => Err(ApiError::invalid(format!(
            "query parameter {key} must be true or false, got {other:?}"
        ))),
    }
}

/// The name of the oneof member a message sets in oneof `oneof` (its JSON name), if any.
pub fn oneof_case(m: &DynamicMessage, oneof: &str) -> Option<String> {
    let desc = m.descriptor();
    let group = desc.oneofs().find(|o| o.name() == oneof)?;
    group
        .fields()
        .find(|f| m.has_field(f))
        .map(|f| f.json_name().to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use droidmesh_proto::v1::{ListTasksRequest, Task, TaskRequest, TaskState};

    #[test]
    fn messages_use_the_proto3_json_mapping() {
        let task = Task {
            id: "task-1".into(),
            state: TaskState::Running as i32,
            last_seq: 12,
            created_at_ms: 1_700_000_000_000,
            request: Some(TaskRequest {
                goal: "Open Settings".into(),
                max_steps: Some(5),
                ..TaskRequest::default()
            }),
            ..Task::default()
        };
        let json: Value = serde_json::from_slice(&to_json(&task).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "task-1",
                "state": "TASK_STATE_RUNNING",
                "lastSeq": "12",
                "createdAtMs": "1700000000000",
                "request": {"goal": "Open Settings", "maxSteps": 5}
            })
        );
        let back: Task = from_value(json).unwrap();
        assert_eq!(back, task);
    }

    #[test]
    fn bad_bodies_name_the_field_or_the_position() {
        let e = from_json::<TaskRequest>(br#"{"goal": "x", "maxSteps": "many"}"#).unwrap_err();
        assert!(
            e.message.starts_with("TaskRequest.maxSteps: "),
            "{}",
            e.message
        );
        let e = from_json::<TaskRequest>(
            br#"{"goal": "x", "models": {"codeact": {"temperature": true}}}"#,
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("TaskRequest.models.codeact.temperature: "),
            "{}",
            e.message
        );
        let e = from_json::<TaskRequest>(br#"{"goal": "x", "colour": "red"}"#).unwrap_err();
        assert!(
            e.message.starts_with(
                "TaskRequest.colour: no such field; expected one of: goal, device, mode"
            ),
            "{}",
            e.message
        );
        let e = from_json::<TaskRequest>(br#"{"goal": "x", "mode": "FAST"}"#).unwrap_err();
        assert!(
            e.message.contains("TaskRequest.mode: ") && e.message.contains("FAST"),
            "{}",
            e.message
        );
        let e = from_json::<TaskRequest>(b"{\"goal\": \"x\",\n \"device\": }").unwrap_err();
        assert!(e.message.contains("line 2 column"), "{}", e.message);
        let e = from_json::<TaskRequest>(b"[1]").unwrap_err();
        assert!(
            e.message.starts_with("not a TaskRequest: "),
            "{}",
            e.message
        );
        // Proto names are read too, as the mapping requires.
        let r: TaskRequest = from_json(br#"{"goal": "x", "max_steps": 3}"#).unwrap();
        assert_eq!(r.max_steps, Some(3));
    }

    #[test]
    fn query_strings_fill_scalar_and_repeated_fields() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let r: ListTasksRequest = from_query(
            &q(&[
                ("states", "TASK_STATE_RUNNING"),
                ("states", "TASK_STATE_FAILED"),
                ("page_size", "5"),
                ("pageToken", "abc"),
            ]),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(
            r.states,
            [TaskState::Running as i32, TaskState::Failed as i32]
        );
        assert_eq!((r.page_size, r.page_token.as_str()), (5, "abc"));
        let e =
            from_query::<ListTasksRequest>(&q(&[("page_size", "5"), ("pageSize", "6")]), &[], &[])
                .unwrap_err();
        assert!(
            e.message.contains("more than once with different values"),
            "{}",
            e.message
        );
        let r: ListTasksRequest =
            from_query(&q(&[("page_size", "5"), ("pageSize", "5")]), &[], &[]).unwrap();
        assert_eq!(r.page_size, 5);
        let e = from_query::<ListTasksRequest>(&q(&[("pageSize", "x")]), &[], &[]).unwrap_err();
        assert!(
            e.message.starts_with("ListTasksRequest.pageSize: "),
            "{}",
            e.message
        );
        let e = from_query::<ListTasksRequest>(&q(&[("colour", "red")]), &[], &[]).unwrap_err();
        assert!(
            e.message
                .contains("unknown query parameter colour; expected one of: states"),
            "{}",
            e.message
        );
        let e = from_query::<droidmesh_proto::v1::WatchTaskRequest>(
            &q(&[("task_id", "t")]),
            &[],
            &["task_id"],
        )
        .unwrap_err();
        assert!(
            e.message.contains("expected one of: fromSeq"),
            "{}",
            e.message
        );
    }
}
