//! Gemini generateContent: `contents` with `user`/`model` roles, images as `inline_data` parts,
//! the system prompt in `system_instruction`, usage in `usageMetadata`.
use super::{Images, Parsed, count, malformed, normalize_finish};
use crate::error::Result;
use crate::message::{ChatRequest, Message, Part, Role, Usage};
use serde_json::{Map, Value, json};

fn parts<'a>(m: &'a Message, images: &mut Images<'a>) -> Vec<Value> {
    m.parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => json!({"text": t}),
            Part::Image { mime, data } => {
                json!({"inline_data": {"mime_type": mime, "data": images.slot(data)}})
            }
        })
        .collect()
}

pub fn body<'a>(req: &'a ChatRequest, images: &mut Images<'a>) -> Value {
    let mut system = Vec::new();
    let mut contents = Vec::new();
    for m in &req.messages {
        match m.role {
            Role::System => system.extend(parts(m, images)),
            Role::User | Role::Assistant => {
                let role = if m.role == Role::Assistant {
                    "model"
                } else {
                    "user"
                };
                contents.push(json!({"role": role, "parts": parts(m, images)}));
            }
        }
    }
    let mut config = Map::new();
    if let Some(t) = req.temperature {
        config.insert("temperature".into(), super::float(t));
    }
    if let Some(n) = req.max_tokens {
        config.insert("max_output_tokens".into(), json!(n));
    }
    if !req.stop.is_empty() {
        config.insert("stop_sequences".into(), json!(req.stop));
    }
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        body.insert("system_instruction".into(), json!({"parts": system}));
    }
    if !config.is_empty() {
        body.insert("generation_config".into(), Value::Object(config));
    }
    Value::Object(body)
}

/// Thought parts are skipped; thinking tokens count as output (they are billed as such).
pub fn parse(v: Value) -> Result<Parsed> {
    let usage = Usage {
        input_tokens: count(&v, "/usageMetadata/promptTokenCount"),
        output_tokens: count(&v, "/usageMetadata/candidatesTokenCount")
            + count(&v, "/usageMetadata/thoughtsTokenCount"),
        cached_input_tokens: v
            .pointer("/usageMetadata/cachedContentTokenCount")
            .and_then(Value::as_u64),
    };
    let model = v
        .get("modelVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(candidate) = v
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        // A blocked prompt is an answer, not a broken response: empty text, filtered.
        if v.pointer("/promptFeedback/blockReason").is_some() {
            return Ok(Parsed {
                text: String::new(),
                usage,
                model,
                finish_reason: "content_filter".to_owned(),
            });
        }
        return Err(match super::error_message_in(&v) {
            Some(m) => malformed(format!("expected `candidates`, found an error object: {m}")),
            None => malformed("expected a non-empty `candidates` array, found none"),
        });
    };
    let text: String = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    Ok(Parsed {
        text,
        usage,
        model,
        finish_reason: normalize_finish(candidate.get("finishReason").and_then(Value::as_str)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_config() {
        let req = ChatRequest::new(vec![
            Message::system("sys"),
            Message::user("q"),
            Message::assistant("a"),
        ])
        .max_tokens(10);
        let b = body(&req, &mut Images::new());
        assert_eq!(b["system_instruction"], json!({"parts": [{"text": "sys"}]}));
        assert_eq!(b["contents"][1]["role"], "model");
        assert_eq!(b["generation_config"], json!({"max_output_tokens": 10}));
    }

    #[test]
    fn blocked_prompt_and_thoughts() {
        let p = parse(json!({"promptFeedback": {"blockReason": "SAFETY"}})).unwrap();
        assert_eq!(p.finish_reason, "content_filter");
        let p = parse(json!({
            "candidates": [{"content": {"parts": [{"text": "plan", "thought": true}, {"text": "done"}]},
                            "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2, "thoughtsTokenCount": 5}
        }))
        .unwrap();
        assert_eq!(p.text, "done");
        assert_eq!(p.usage.output_tokens, 7);
        assert!(parse(json!({})).is_err());
    }
}
