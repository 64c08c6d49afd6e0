//! OpenAI-compatible chat completions: `messages` with string or part-array content, images as
//! `data:` URLs, usage in `prompt_tokens`/`completion_tokens`.
use super::{Images, Parsed, count, malformed, normalize_finish};
use crate::error::Result;
use crate::message::{ChatRequest, Message, Part, Usage};
use serde_json::{Map, Value, json};

pub fn body<'a>(model: &str, req: &'a ChatRequest, images: &mut Images<'a>) -> Value {
    let messages: Vec<Value> = req.messages.iter().map(|m| message(m, images)).collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), super::float(t));
    }
    if let Some(n) = req.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if !req.stop.is_empty() {
        body.insert("stop".into(), json!(req.stop));
    }
    Value::Object(body)
}

/// Text-only messages use a plain string (understood by every compatible server); messages
/// with images use the part array.
fn message<'a>(m: &'a Message, images: &mut Images<'a>) -> Value {
    let has_image = m.parts.iter().any(|p| matches!(p, Part::Image { .. }));
    let content = if has_image {
        let parts: Vec<Value> = m
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => json!({"type": "text", "text": t}),
                Part::Image { mime, data } => json!({
                    "type": "image_url",
                    "image_url": {"url": format!("data:{mime};base64,{}", images.slot(data))}
                }),
            })
            .collect();
        Value::Array(parts)
    } else {
        Value::String(m.text())
    };
    json!({"role": m.role.as_str(), "content": content})
}

pub fn parse(v: Value) -> Result<Parsed> {
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| match super::error_message_in(&v) {
            Some(m) => malformed(format!("expected `choices`, found an error object: {m}")),
            None => malformed("expected a non-empty `choices` array, found none"),
        })?;
    let msg = choice
        .get("message")
        .ok_or_else(|| malformed("expected `choices[0].message`, found none"))?;
    let text = match msg.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(Value::Null) | None => msg
            .get("refusal")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Some(other) => {
            return Err(malformed(format!(
                "expected `choices[0].message.content` to be a string, found {other}"
            )));
        }
    };
    let cached = v
        .pointer("/usage/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64);
    Ok(Parsed {
        text,
        usage: Usage {
            input_tokens: count(&v, "/usage/prompt_tokens"),
            output_tokens: count(&v, "/usage/completion_tokens"),
            cached_input_tokens: cached,
        },
        model: v.get("model").and_then(Value::as_str).map(str::to_owned),
        finish_reason: normalize_finish(choice.get("finish_reason").and_then(Value::as_str)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    #[test]
    fn body_shapes() {
        let req = ChatRequest::new(vec![
            Message::system("be brief"),
            Message::user("what is on screen?").with_image_png(vec![0x89, b'P']),
        ])
        .temperature(0.5)
        .max_tokens(64)
        .stop("END");
        let b: Value = serde_json::from_slice(
            &super::super::body(crate::WireFormat::Openai, "gpt-test", &req).unwrap(),
        )
        .unwrap();
        assert_eq!(b["model"], "gpt-test");
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            b["messages"][1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,iVA="
        );
        assert_eq!(b["max_tokens"], 64);
        assert_eq!(b["stop"], json!(["END"]));
    }

    #[test]
    fn parse_null_content_and_missing_usage() {
        let p =
            parse(json!({"choices": [{"message": {"content": null}, "finish_reason": "stop"}]}))
                .unwrap();
        assert_eq!(p.text, "");
        assert_eq!(p.usage, Usage::default());
        assert_eq!(p.model, None);
        let e = parse(json!({"error": {"message": "boom"}})).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
    }
}
