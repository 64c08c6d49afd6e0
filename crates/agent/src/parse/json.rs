//! Lenient JSON: reads the JSON models actually write, and finds it inside prose.
//!
//! Accepted on top of strict JSON: `//` and `/* */` comments, trailing commas, missing commas
//! between members or elements, single-quoted strings, raw newlines inside strings, unquoted
//! identifier keys, `True`/`False`/`None` and `undefined`, numbers with a leading `+`, `.5` or
//! `5.`, and input that ends early (open strings, arrays and objects are closed, as when a
//! reply is cut off by a token limit). Nesting deeper than [`MAX_DEPTH`] is refused, so no
//! input can exhaust the stack.

use std::ops::Range;

use serde_json::{Map, Number, Value};

/// Deepest nesting of arrays and objects accepted.
pub const MAX_DEPTH: usize = 128;

/// How many opening brackets [`find_json_values`] tries before giving up.
const MAX_ATTEMPTS: usize = 256;

/// Why text is not (lenient) JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{expected} at byte {offset}, found {found}")]
pub struct JsonError {
    /// What the parser expected.
    pub expected: &'static str,
    /// What it found instead (quoted character or "end of text").
    pub found: String,
    /// Byte offset in the parsed text.
    pub offset: usize,
}

/// Parses `text` as one JSON value; only whitespace and comments may surround it.
pub fn parse_lenient(text: &str) -> Result<Value, JsonError> {
    let mut parser = Parser::new(text, 0);
    let value = parser.value()?;
    parser.skip_ws();
    if parser.pos < text.len() {
        return Err(parser.error("end of text after the JSON value"));
    }
    Ok(value)
}

/// Parses the JSON value that starts at byte `start` of `text` (an opening `{` or `[`), and
/// returns it with the range it covers. Text after the value is ignored.
pub fn parse_at(text: &str, start: usize) -> Result<(Value, Range<usize>), JsonError> {
    let mut parser = Parser::new(text, start);
    let value = parser.value()?;
    Ok((value, start..parser.pos))
}

/// Every object or array found in `text`, in order, each with its byte range. Scanning resumes
/// after each value found, so nested values are not listed separately.
pub fn find_json_values(text: &str) -> Vec<(Value, Range<usize>)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut pos = 0;
    let mut attempts = 0;
    while pos < bytes.len() && attempts < MAX_ATTEMPTS {
        let Some(offset) = bytes[pos..].iter().position(|&b| b == b'{' || b == b'[') else {
            break;
        };
        let start = pos + offset;
        attempts += 1;
        match parse_at(text, start) {
            Ok((value, range)) if range.end > start => {
                pos = range.end;
                found.push((value, range));
            }
            _ => pos = start + 1,
        }
    }
    found
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, pos: usize) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            pos: pos.min(text.len()),
            depth: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn error(&self, expected: &'static str) -> JsonError {
        let found = match self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            Some(c) => format!("{c:?}"),
            None => "end of text".to_owned(),
        };
        JsonError {
            expected,
            found,
            offset: self.pos,
        }
    }

    /// Skips whitespace and comments.
    fn skip_ws(&mut self) {
        loop {
            while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
                self.pos += 1;
            }
            let rest = &self.bytes[self.pos..];
            if rest.starts_with(b"//") {
                let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                self.pos += end;
            } else if rest.starts_with(b"/*") {
                let end = rest[2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(rest.len(), |i| i + 4);
                self.pos += end;
            } else {
                return;
            }
        }
    }

    fn value(&mut self) -> Result<Value, JsonError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(q @ (b'"' | b'\'')) => self.string(q).map(Value::String),
            Some(b'-' | b'+' | b'.' | b'0'..=b'9') => self.number(),
            Some(b) if b.is_ascii_alphabetic() => self.literal(),
            _ => Err(self.error("a JSON value")),
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Result<Value, JsonError>) -> Result<Value, JsonError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error("at most 128 levels of nesting"));
        }
        self.depth += 1;
        let value = f(self);
        self.depth -= 1;
        value
    }

    fn object(&mut self) -> Result<Value, JsonError> {
        self.pos += 1; // '{'
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Ok(Value::Object(map)), // cut off: close it
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                Some(b',') => {
                    self.pos += 1;
                    continue;
                }
                Some(_) => {}
            }
            let key = self.key()?;
            self.skip_ws();
            match self.peek() {
                Some(b':' | b'=') => self.pos += 1,
                None => {
                    map.insert(key, Value::Null);
                    return Ok(Value::Object(map));
                }
                Some(_) => return Err(self.error("':' after an object key")),
            }
            self.skip_ws();
            if self.peek().is_none() {
                map.insert(key, Value::Null);
                return Ok(Value::Object(map));
            }
            let value = self.value()?;
            map.insert(key, value);
        }
    }

    fn key(&mut self) -> Result<String, JsonError> {
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => self.string(q),
            Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'$' => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'-'))
                {
                    self.pos += 1;
                }
                Ok(self.text[start..self.pos].to_owned())
            }
            _ => Err(self.error("an object key or '}'")),
        }
    }

    fn array(&mut self) -> Result<Value, JsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Ok(Value::Array(items)),
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                Some(b',') => {
                    self.pos += 1;
                    continue;
                }
                Some(_) => items.push(self.value()?),
            }
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out: Vec<u8> = Vec::new();
        while let Some(b) = self.peek() {
            self.pos += 1;
            match b {
                _ if b == quote => return Ok(into_string(out)),
                b'\\' => self.escape(&mut out),
                _ => out.push(b),
            }
        }
        Ok(into_string(out)) // cut off: close it
    }

    fn escape(&mut self, out: &mut Vec<u8>) {
        let Some(b) = self.peek() else { return };
        self.pos += 1;
        let simple = match b {
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'0' => Some(0),
            b'u' => None,
            _ if b.is_ascii() => Some(b), // \" \' \\ \/ and unknown escapes keep the character
            _ => {
                self.pos -= 1; // a non-ASCII character: copy it whole on the next turn
                Some(b'\\')
            }
        };
        if let Some(byte) = simple {
            out.push(byte);
            return;
        }
        let c = match self.hex4() {
            Some(hi @ 0xD800..=0xDBFF) => {
                let lo = if self.bytes[self.pos..].starts_with(b"\\u") {
                    self.pos += 2;
                    self.hex4()
                } else {
                    None
                };
                match lo {
                    Some(lo @ 0xDC00..=0xDFFF) => {
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                    }
                    _ => None,
                }
            }
            Some(code) => char::from_u32(code),
            None => None,
        };
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.unwrap_or('\u{FFFD}').encode_utf8(&mut buf).as_bytes());
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.pos..self.pos + 4)?;
        let code = u32::from_str_radix(digits, 16).ok()?;
        self.pos += 4;
        Some(code)
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.pos += 1;
        }
        let token = &self.text[start..self.pos];
        let token = token.strip_prefix('+').unwrap_or(token);
        if let Ok(n) = token.parse::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = token.parse::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        match token.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Ok(Value::Number(n)),
            None => {
                self.pos = start;
                Err(self.error("a number"))
            }
        }
    }

    fn literal(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos += 1;
        }
        match &self.text[start..self.pos] {
            "true" | "True" | "TRUE" => Ok(Value::Bool(true)),
            "false" | "False" | "FALSE" => Ok(Value::Bool(false)),
            "null" | "None" | "NULL" | "undefined" => Ok(Value::Null),
            _ => {
                self.pos = start;
                Err(self.error("a JSON value"))
            }
        }
    }
}

fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strict_json_is_read_as_is() {
        let text = r#"{"a": [1, -2.5, 3e2, true, null], "b": {"c": "\u00e9\n\"q\""}, "d": "😀"}"#;
        assert_eq!(
            parse_lenient(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn model_habits_are_tolerated() {
        let text = "{\n  // the element\n  'action': 'tap', /* by index */\n  index: +3,\n  \"items\": [1, 2,],\n  \"x\": .5\n  \"ok\": True,\n}";
        assert_eq!(
            parse_lenient(text).unwrap(),
            json!({"action": "tap", "index": 3, "items": [1, 2], "x": 0.5, "ok": true})
        );
        assert_eq!(
            parse_lenient("{'it\\'s': 'a \"b\"'}").unwrap(),
            json!({"it's": "a \"b\""})
        );
        assert_eq!(
            parse_lenient("{\"a\": \"line\nbreak\"}").unwrap(),
            json!({"a": "line\nbreak"})
        );
        assert_eq!(
            parse_lenient("[None, False, undefined]").unwrap(),
            json!([null, false, null])
        );
        assert_eq!(parse_lenient("\"\\ud83d\\ude00\"").unwrap(), json!("😀"));
    }

    #[test]
    fn truncated_input_is_closed() {
        assert_eq!(
            parse_lenient(r#"{"action": "type_text", "text": "hel"#).unwrap(),
            json!({"action": "type_text", "text": "hel"})
        );
        assert_eq!(
            parse_lenient("[1, [2, {\"a\":").unwrap(),
            json!([1, [2, {"a": null}]])
        );
    }

    #[test]
    fn errors_say_what_was_expected_and_found() {
        let err = parse_lenient("{\"a\" 1}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "':' after an object key at byte 5, found '1'"
        );
        let err = parse_lenient("{\"a\": 1} trailing").unwrap_err();
        assert_eq!(
            err.to_string(),
            "end of text after the JSON value at byte 9, found 't'"
        );
        assert!(parse_lenient("").is_err());
        assert!(parse_lenient("{\"a\": nope}").is_err());
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let deep = "[".repeat(100_000);
        let err = parse_lenient(&deep).unwrap_err();
        assert_eq!(err.expected, "at most 128 levels of nesting");
        assert!(parse_lenient(&format!("{}{}", "[".repeat(100), "]".repeat(100))).is_ok());
    }

    #[test]
    fn values_are_found_in_prose() {
        let text = "I will tap {curly} now: {\"action\": \"tap\", \"index\": 3} and then [1, 2].";
        let found: Vec<Value> = find_json_values(text).into_iter().map(|(v, _)| v).collect();
        assert_eq!(
            found,
            vec![json!({"action": "tap", "index": 3}), json!([1, 2])]
        );
        let (_, range) = &find_json_values(text)[0];
        assert_eq!(&text[range.clone()], "{\"action\": \"tap\", \"index\": 3}");
    }
}
