//! GenAI client metrics after the OpenTelemetry semantic conventions: every chat call records
//! `gen_ai.client.operation.duration` (s) and, when the model answered,
//! `gen_ai.client.token.usage` ({token}) once for input and once for output tokens, exactly
//! as the provider reported them. Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`,
//! `gen_ai.request.model`, `gen_ai.agent.name` (the agent's profile, when the call named one),
//! and `error.type` on a failed call. Model names come from task requests, so at most
//! [`MAX_MODELS`] distinct ones get their own label; the rest read `other`.
use crate::error::{LlmError, Result};
use crate::message::ChatResponse;
use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Distinct model names labelled as themselves.
pub const MAX_MODELS: usize = 64;
/// Longest model name kept in a label (longer ones are cut).
const MAX_MODEL_LEN: usize = 128;

struct Instruments {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
    models: Mutex<HashSet<String>>,
}

/// Made on first use from the global meter provider, which the process installs first.
fn instruments() -> &'static Instruments {
    static INST: OnceLock<Instruments> = OnceLock::new();
    INST.get_or_init(|| {
        let meter = opentelemetry::global::meter("droidmesh");
        Instruments {
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(vec![
                    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92,
                ])
                .build(),
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Measures number of input and output tokens used")
                .with_boundaries(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
                    1048576.0, 4194304.0, 16777216.0, 67108864.0,
                ])
                .build(),
            models: Mutex::new(HashSet::new()),
        }
    })
}

impl Instruments {
    fn model_label(&self, model: &str) -> String {
        let model = match model.char_indices().nth(MAX_MODEL_LEN) {
            Some((at, _)) => &model[..at],
            None => model,
        };
        let mut seen = self.models.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(model) {
            return model.to_owned();
        }
        if seen.len() >= MAX_MODELS {
            return "other".to_owned();
        }
        seen.insert(model.to_owned());
        model.to_owned()
    }
}

/// Records one chat call: `measured` is how long it took here, used when the result does not
/// say (a failure without timing).
pub(crate) fn record(
    provider: &str,
    model: &str,
    agent: Option<&str>,
    result: &Result<ChatResponse>,
    measured: Duration,
) {
    let inst = instruments();
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", provider.to_owned()),
        KeyValue::new("gen_ai.request.model", inst.model_label(model)),
    ];
    if let Some(agent) = agent {
        attrs.push(KeyValue::new("gen_ai.agent.name", agent.to_owned()));
    }
    match result {
        Ok(resp) => {
            inst.duration.record(resp.elapsed.as_secs_f64(), &attrs);
            attrs.push(KeyValue::new("gen_ai.token.type", "input"));
            inst.tokens.record(resp.usage.input_tokens, &attrs);
            if let Some(last) = attrs.last_mut() {
                *last = KeyValue::new("gen_ai.token.type", "output");
            }
            inst.tokens.record(resp.usage.output_tokens, &attrs);
        }
        Err(e) => {
            let took = LlmError::elapsed(e).unwrap_or(measured);
            attrs.push(KeyValue::new("error.type", e.kind()));
            inst.duration.record(took.as_secs_f64(), &attrs);
        }
    }
}
