//! LLM client overhead per call beyond the HTTP round trip: a raw reqwest POST of a ready-made
//! body to a loopback double versus `LlmClient::chat` of the same conversation to the same
//! double (building the body, base64 of images, parsing, retry bookkeeping, the span).
//! Prints p50/p90/p99 of both and the p50 difference. Target: at most 1 ms per call.
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{
    ChatRequest, LlmClient, LlmConfig, Message, ProfileConfig, ProviderConfig, WireFormat,
};
use std::error::Error;
use std::time::{Duration, Instant};

const WARMUP: usize = 200;
const SAMPLES: usize = 2000;

type BoxError = Box<dyn Error>;

fn main() -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> Result<(), BoxError> {
    droidmesh_llm::install_crypto_provider();
    println!("llm client overhead per call (loopback, {SAMPLES} samples each, interleaved)");
    for wire in [
        WireFormat::Openai,
        WireFormat::Anthropic,
        WireFormat::Gemini,
    ] {
        scenario(wire, "text only", text_request()).await?;
    }
    scenario(
        WireFormat::Openai,
        "200 KB screenshot",
        screenshot_request(),
    )
    .await?;
    Ok(())
}

fn text_request() -> ChatRequest {
    let system = "You operate an Android phone. Answer with one JavaScript block. ".repeat(40);
    let ui = "[12] android.widget.Switch \"Wi-Fi\" bounds=[0,200][1080,320] clickable\n".repeat(60);
    ChatRequest::new(vec![
        Message::system(system),
        Message::user(format!("Goal: turn on Wi-Fi.\nUI state:\n{ui}")),
    ])
    .temperature(0.2)
    .max_tokens(512)
}

fn screenshot_request() -> ChatRequest {
    let png: Vec<u8> = (0..200 * 1024).map(|i| (i * 31 % 251) as u8).collect();
    let mut req = text_request();
    if let Some(last) = req.messages.pop() {
        req.messages.push(last.with_image_png(png));
    }
    req
}

async fn scenario(wire: WireFormat, label: &str, req: ChatRequest) -> Result<(), BoxError> {
    let answer = "```js\ntap(12)\n```\nTurning Wi-Fi on by tapping its switch.";
    let server = MockLlmServer::start([]).await?;
    server.set_fallback(MockResponse::success(wire, answer, "bench-model", 900, 20));
    server.set_log_requests(true);

    let base_url = match wire {
        WireFormat::Openai => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    let mut config = LlmConfig::defaults();
    let mut provider = ProviderConfig::new("bench", wire, base_url);
    provider.api_key_env = Some("BENCH_KEY".into());
    config.providers.insert("bench".into(), provider);
    config
        .profiles
        .insert("default".into(), ProfileConfig::new("bench", "bench-model"));
    let client = LlmClient::from_config_with_env(&config, |_| Some("sk-bench".into()))?;

    // Capture the exact request the client sends, to replay it raw.
    client.chat("executor", req.clone()).await?;
    let sent = server
        .requests()
        .pop()
        .ok_or("the double received no request")?;
    server.set_log_requests(false);
    let url = format!("{}{}", server.url(), sent.path);
    let raw = reqwest::Client::builder().build()?;
    let raw_post = || {
        let r = raw
            .post(&url)
            .headers(sent.headers.clone())
            .body(sent.body.clone());
        async move {
            let resp = r.send().await?;
            let status = resp.status();
            let body = resp.bytes().await?;
            if !status.is_success() || body.is_empty() {
                return Err::<(), BoxError>(format!("raw post got {status}").into());
            }
            Ok(())
        }
    };

    let (mut raw_times, mut client_times) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + SAMPLES {
        let t = Instant::now();
        raw_post().await?;
        let raw_t = t.elapsed();
        let t = Instant::now();
        let resp = client.chat("executor", req.clone()).await?;
        let client_t = t.elapsed();
        if resp.text != answer {
            return Err("unexpected answer".into());
        }
        if i >= WARMUP {
            raw_times.push(raw_t);
            client_times.push(client_t);
        }
    }
    let (r, c) = (Stats::of(raw_times), Stats::of(client_times));
    println!(
        "{:<9} {label:<18} body {:>7} B | raw p50 {:>8.1?} p90 {:>8.1?} p99 {:>8.1?} | client p50 {:>8.1?} p90 {:>8.1?} p99 {:>8.1?} | overhead p50 {:>8.1?}",
        wire.as_str(),
        sent.body.len(),
        r.p50,
        r.p90,
        r.p99,
        c.p50,
        c.p90,
        c.p99,
        c.p50.saturating_sub(r.p50),
    );
    Ok(())
}

struct Stats {
    p50: Duration,
    p90: Duration,
    p99: Duration,
}

impl Stats {
    fn of(mut v: Vec<Duration>) -> Self {
        v.sort();
        let at = |q: f64| {
            v.get(((v.len() as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or_default()
        };
        Self {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
        }
    }
}
