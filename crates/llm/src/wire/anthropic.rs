//! Anthropic Messages: system prompt as a top-level field, content blocks per message, images
//! as base64 `source` blocks, `max_tokens` always sent.
use super::{ANTHROPIC_DEFAULT_MAX_TOKENS, Images, Parsed, count, malformed, normalize_finish};
use crate::error::Result;
use crate::message::{ChatRequest, Part, Role, Usage};
use serde_json::{Map, Value, json};

pub fn body<'a>(model: &str, req: &'a ChatRequest, images: &mut Images<'a>) -> Value {
    let system: Vec<String> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.text())
        .collect();
    let messages: Vec<Value> = req
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| {
            let content: Vec<Value> = m
                .parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => json!({"type": "text", "text": t}),
                    Part::Image { mime, data } => json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": mime, "data": images.slot(data)}
                    }),
                })
                .collect();
            json!({"role": m.role.as_str(), "content": content})
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(req.max_tokens.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), super::float(t));
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.stop));
    }
    Value::Object(body)
}

/// `input_tokens` counts cache reads and writes too, so that it means the same on every wire.
pub fn parse(v: Value) -> Result<Parsed> {
    let blocks =
        v.get("content").and_then(Value::as_array).ok_or_else(
            || match super::error_message_in(&v) {
                Some(m) => malformed(format!("expected `content`, found an error object: {m}")),
                None => malformed("expected a `content` array of blocks, found none"),
            },
        )?;
    let text: String = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let cache_read = v
        .pointer("/usage/cache_read_input_tokens")
        .and_then(Value::as_u64);
    let input = count(&v, "/usage/input_tokens")
        + cache_read.unwrap_or(0)
        + count(&v, "/usage/cache_creation_input_tokens");
    Ok(Parsed {
        text,
        usage: Usage {
            input_tokens: input,
            output_tokens: count(&v, "/usage/output_tokens"),
            cached_input_tokens: cache_read,
        },
        model: v.get("model").and_then(Value::as_str).map(str::to_owned),
        finish_reason: normalize_finish(v.get("stop_reason").and_then(Value::as_str)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    #[test]
    fn system_is_top_level_and_max_tokens_defaults() {
        let req = ChatRequest::new(vec![
            Message::system("a"),
            Message::system("b"),
            Message::user("hi"),
        ]);
        let b = body("claude-test", &req, &mut Images::new());
        assert_eq!(b["system"], "a\n\nb");
        assert_eq!(b["messages"].as_array().unwrap().len(), 1);
        assert_eq!(b["max_tokens"], ANTHROPIC_DEFAULT_MAX_TOKENS);
        assert!(b.get("temperature").is_none());
    }

    #[test]
    fn cache_tokens_count_as_input() {
        let p = parse(json!({
            "model": "claude-x",
            "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"}],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 10, "output_tokens": 3,
                      "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
        }))
        .unwrap();
        assert_eq!(p.text, "ok");
        assert_eq!(p.usage.input_tokens, 115);
        assert_eq!(p.usage.cached_input_tokens, Some(100));
        assert_eq!(p.finish_reason, "length");
    }
}
