//! What the gateway accepts from clients: task requests (non-empty goal, step budget, a JSON
//! Schema, known mode, sizes within the configured caps, only secret ids the caller's key
//! lists) and the texts of messages.
use droidmesh_proto::v1::{Mode, TaskRequest, TaskState};
use prost::Message as _;

use crate::auth::Caller;
use crate::config::GatewayConfig;
use crate::conversations::MAX_ID_CHARS;
use crate::error::GatewayError;

fn bad<T>(m: String) -> Result<T, GatewayError> {
    Err(GatewayError::InvalidRequest(m))
}

/// Checks a task request; every refusal says what to fix.
pub fn task_request(cfg: &GatewayConfig, req: &TaskRequest) -> Result<(), GatewayError> {
    text("goal", &req.goal, cfg.max_goal_bytes)?;
    if req.goal.trim().is_empty() {
        return bad(
            "goal is empty: say what the agent should do, e.g. \"Open Settings and turn on Wi-Fi\""
                .into(),
        );
    }
    let size = req.encoded_len();
    if size > cfg.max_request_bytes {
        return bad(format!(
            "the request is {size} bytes (goal, output_schema, app_card, models, secret_ids together); at most {} are accepted (gateway.max_request_bytes)",
            cfg.max_request_bytes
        ));
    }
    if let Some(n) = req.max_steps {
        let limit = cfg.max_steps_limit;
        if n == 0 || n > limit {
            return bad(format!(
                "max_steps must be between 1 and {limit}, got {n} (leave it unset for the default of {})",
                cfg.default_max_steps
            ));
        }
    }
    if let Some(schema) = &req.output_schema {
        check_schema(schema).map_err(GatewayError::InvalidRequest)?;
    }
    if req.conversation_id.chars().count() > MAX_ID_CHARS {
        return bad(format!(
            "conversation_id is {} characters long; at most {MAX_ID_CHARS} are accepted",
            req.conversation_id.chars().count()
        ));
    }
    match Mode::try_from(req.mode) {
        Ok(Mode::Direct | Mode::Unspecified | Mode::Reasoning) => Ok(()),
        Err(_) => bad(format!(
            "mode {} is not a known Mode (1 = MODE_DIRECT, 2 = MODE_REASONING)",
            req.mode
        )),
    }
}

/// Refuses a secret id the caller's key does not list, in the same words whether another
/// tenant has a secret of that id or nobody does, naming the id as the caller wrote it (cut
/// to 100 characters). A caller without keys (the open tenant) may name any: the executor
/// refuses one it does not hold.
pub fn secret_ids(caller: &Caller, req: &TaskRequest) -> Result<(), GatewayError> {
    match req.secret_ids.iter().find(|id| !caller.may_name_secret(id)) {
        Some(id) => bad(format!(
            "secret_ids: '{}' is not a secret this key may use; name only the secrets listed \
             for the key (`secrets` in its keys file entry)",
            crate::record::cut(id, 100)
        )),
        None => Ok(()),
    }
}

/// Refuses a text longer than `max` bytes, naming the field, its size and the limit.
pub fn text(field: &str, value: &str, max: usize) -> Result<(), GatewayError> {
    if value.len() > max {
        return bad(format!(
            "{field} is {} bytes; at most {max} are accepted (gateway.max_goal_bytes)",
            value.len()
        ));
    }
    Ok(())
}

/// Checks a list of task states (ListTasks' filter).
pub fn states(states: &[i32]) -> Result<(), GatewayError> {
    match states.iter().find(|s| TaskState::try_from(**s).is_err()) {
        Some(s) => bad(format!(
            "states: {s} is not a known TaskState (1 = PENDING ... 6 = CANCELLED)"
        )),
        None => Ok(()),
    }
}

/// Parses `schema` as JSON and checks it is a JSON Schema.
pub fn check_schema(schema: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(schema).map_err(|e| format!("output_schema is not JSON: {e}"))?;
    if !value.is_object() && !value.is_boolean() {
        return Err(
            "output_schema must be a JSON Schema object, e.g. {\"type\": \"object\", ...}".into(),
        );
    }
    jsonschema::validator_for(&value)
        .map(|_| ())
        .map_err(|e| format!("output_schema is not a valid JSON Schema: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_checked_with_messages() {
        assert!(
            check_schema(r#"{"type":"object","properties":{"name":{"type":"string"}}}"#).is_ok()
        );
        assert!(check_schema("{not json").unwrap_err().contains("not JSON"));
        assert!(
            check_schema(r#"{"type": 12}"#)
                .unwrap_err()
                .contains("not a valid JSON Schema")
        );
        assert!(
            check_schema("[1,2]")
                .unwrap_err()
                .contains("must be a JSON Schema object")
        );
    }

    #[test]
    fn secret_ids_are_checked_against_the_key_case_insensitively() {
        let req = |ids: &[&str]| TaskRequest {
            goal: "go".into(),
            secret_ids: ids.iter().map(|s| s.to_string()).collect(),
            ..TaskRequest::default()
        };
        let keyed = Caller {
            tenant: "acme".into(),
            devices: None,
            secrets: Some(vec!["pin".into()]),
        };
        assert!(secret_ids(&keyed, &req(&["PIN", "pin"])).is_ok());
        let e = secret_ids(&keyed, &req(&["pin", "Card"])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("secret_ids: 'Card' is not a secret this key may use;"),
            "{e}"
        );
        let none = Caller {
            secrets: Some(Vec::new()),
            ..keyed
        };
        assert!(secret_ids(&none, &req(&[])).is_ok());
        assert!(secret_ids(&none, &req(&["pin"])).is_err());
        // Without keys every id may be named: the executor refuses one it does not hold.
        assert!(secret_ids(&Caller::open(), &req(&["anything"])).is_ok());
        let long = "x".repeat(500);
        let e = secret_ids(&none, &req(&[&long])).unwrap_err().to_string();
        assert!(e.len() < 400 && e.contains('…'), "{e}");
    }

    #[test]
    fn sizes_are_capped_with_the_size_and_the_limit() {
        let cfg = GatewayConfig {
            max_goal_bytes: 100,
            max_request_bytes: 300,
            ..GatewayConfig::default()
        };
        let req = |goal: &str, card: &str| TaskRequest {
            goal: goal.into(),
            app_card: card.into(),
            ..TaskRequest::default()
        };
        assert!(task_request(&cfg, &req(&"g".repeat(100), "")).is_ok());
        let e = task_request(&cfg, &req(&"g".repeat(101), "")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "goal is 101 bytes; at most 100 are accepted (gateway.max_goal_bytes)"
        );
        let e = task_request(&cfg, &req("go", &"c".repeat(400))).unwrap_err();
        assert!(
            e.to_string().starts_with("the request is 407 bytes")
                && e.to_string().contains("at most 300"),
            "{e}"
        );
        assert!(states(&[1, 6]).is_ok());
        assert!(states(&[7]).unwrap_err().to_string().contains("7 is not"));
    }
}
