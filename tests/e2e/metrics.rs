//! Metrics of one task through the gateway, as Prometheus scrapes them: `droidmesh up` (one
//! process, one admin port) on a simulated phone with a scripted model double; `/metrics` is
//! read over HTTP while the task runs and after it ended, with a Prometheus text parser.
use super::*;
use prometheus_parse::{Sample, Scrape, Value};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(admin: u16) -> Option<Scrape> {
    scrape_at(&format!("127.0.0.1:{admin}")).await
}

/// `/metrics` of the admin server at `addr`, parsed; `None` while nothing answers there.
pub(crate) async fn scrape_at(addr: &str) -> Option<Scrape> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Some(Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap())
}

/// Sum of the samples of `metric` whose labels include `labels` (a histogram counts its
/// observations).
pub(crate) fn total(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let matches =
        |x: &&Sample| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v));
    s.samples
        .iter()
        .filter(matches)
        .map(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(b) => b.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => panic!("{metric} is a summary"),
        })
        .sum()
}

async fn scrape_until(admin: u16, what: &str, ok: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = scrape(admin).await
            && ok(&s)
        {
            return s;
        }
        assert!(Instant::now() < deadline, "within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `droidmesh up --sims 1` with `llm_url` as every agent's model, no admin port in the config
/// (`extra` arguments may add one) and `env`; returns it once its gateway lists the phone, with
/// a client and the phone's serial.
pub(crate) async fn start_up(
    llm_url: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Proc, GatewayClient<Channel>, String) {
    let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let dir = std::env::temp_dir().join(format!(
        "droidmesh-e2e-up-{}-{}",
        std::process::id(),
        ports[5]
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "[listen]\nhost = \"127.0.0.1\"\ndevice = {}\nexecutor = {}\nmanager = {}\n\
         scripter = {}\ntext_manipulator = {}\ngateway = {}\nadmin = 0\ngateway_http = 0\n\
         [device]\nadb_server = \"\"\n\
         [llm.providers.mock]\nwire = \"openai\"\nbase_url = \"{llm_url}/v1\"\n\
         [llm.profiles.default]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n",
        ports[0], ports[1], ports[2], ports[3], ports[4], ports[5],
    );
    let path = dir.join("droidmesh.toml");
    std::fs::write(&path, config).unwrap();
    let mut args = vec!["--config", path.to_str().unwrap(), "up", "--sims", "1"];
    args.extend_from_slice(extra);
    let up = Proc::spawn_env("up", &args, env).unwrap();
    let endpoint = format!("http://127.0.0.1:{}", ports[5]);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(mut g) = GatewayClient::connect(endpoint.clone()).await
            && let Ok(list) = g.list_devices(ListDevicesRequest {}).await
            && let Some(d) = list.into_inner().devices.first()
        {
            let serial = d.serial.clone();
            return (up, g, serial);
        }
        assert!(
            Instant::now() < deadline,
            "up never listed its simulated phone"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_task_moves_the_metrics_of_up() {
    // The second answer comes late, so the task is surely running when first scraped.
    let llm = MockLlmServer::start(vec![
        MockResponse::success(
            WireFormat::Openai,
            "```javascript\nopen_app('Settings')\n```",
            "scripted-model",
            412,
            31,
        ),
        MockResponse::success(
            WireFormat::Openai,
            "```javascript\ncomplete(true, 'opened')\n```",
            "scripted-model",
            433,
            17,
        )
        .delay(Duration::from_secs(3)),
    ])
    .await
    .unwrap();
    let admin = free_port();
    let admin_arg = format!("127.0.0.1:{admin}");
    let (_up, mut gateway, serial) = start_up(&llm.url(), &["--admin", &admin_arg], &[]).await;
    let before = scrape(admin).await.expect("the admin port answers");
    assert_eq!(total(&before, "droidmesh_tasks_total", &[]), 0.0);

    let id = gateway
        .submit_task(TaskRequest {
            goal: "Open Settings".into(),
            device: serial.clone(),
            ..TaskRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .task_id;
    // While the task runs (its second model answer is late): the lease is held, the
    // executor's sandbox session is alive, and the CodeAct stream is what an autoscaler reads
    // as work in progress (health and reflection excluded by their own rpc_service).
    let codeact = [
        ("rpc_service", "droidmesh.v1.ExecutorService"),
        ("rpc_method", "RunCodeAct"),
    ];
    let during = scrape_until(
        admin,
        "lease, sandbox session and stream while running",
        |s| {
            total(s, "droidmesh_device_leases", &[]) == 1.0
                && total(s, "droidmesh_sandbox_sessions", &[]) == 1.0
                && total(s, "rpc_server_active_requests", &codeact) == 1.0
        },
    )
    .await;
    let busy: f64 = during
        .samples
        .iter()
        .filter(|x| x.metric == "rpc_server_active_requests")
        .filter(|x| {
            x.labels
                .get("rpc_service")
                .is_some_and(|v| v.starts_with("droidmesh.v1."))
        })
        .map(|x| match x.value {
            Value::Gauge(v) => v,
            ref other => panic!("active requests read as {other:?}"),
        })
        .sum();
    assert_eq!(busy, 1.0, "only the CodeAct stream is in progress");

    let mut watch = gateway
        .watch_task(WatchTaskRequest {
            task_id: id,
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let events = rest_of(&mut watch).await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    let (mut input, mut output, mut calls) = (0u64, 0u64, 0u64);
    for e in &events {
        if let Some(task_event::Kind::Usage(u)) = &e.kind {
            let usage = u.usage.unwrap();
            input += usage.input_tokens;
            output += usage.output_tokens;
            calls += 1;
        }
    }
    assert_eq!((input, output, calls), (412 + 433, 31 + 17, 2));

    let after = scrape_until(
        admin,
        "the ended task is counted and its lease freed",
        |s| {
            total(s, "droidmesh_tasks_total", &[("outcome", "succeeded")]) == 1.0
                && total(s, "droidmesh_device_leases", &[]) == 0.0
                && total(s, "droidmesh_sandbox_sessions", &[]) == 0.0
        },
    )
    .await;
    assert_eq!(total(&after, "droidmesh_tasks_total", &[]), 1.0);
    assert_eq!(
        total(
            &after,
            "droidmesh_task_steps_sum",
            &[("outcome", "succeeded")]
        ),
        f64::from(done.steps)
    );
    assert_eq!(
        total(&after, "droidmesh_task_steps", &[("outcome", "succeeded")]),
        1.0
    );
    let tokens = |kind: &str| {
        total(
            &after,
            "gen_ai_client_token_usage_sum",
            &[
                ("gen_ai_token_type", kind),
                ("gen_ai_agent_name", "codeact"),
                ("gen_ai_request_model", "scripted-model"),
            ],
        )
    };
    assert_eq!(tokens("input"), input as f64);
    assert_eq!(tokens("output"), output as f64);
    assert_eq!(
        total(
            &after,
            "gen_ai_client_operation_duration_seconds",
            &[
                ("gen_ai_operation_name", "chat"),
                ("gen_ai_agent_name", "codeact")
            ]
        ),
        2.0
    );
    assert!(
        total(
            &after,
            "droidmesh_adb_command_duration_seconds",
            &[("device_serial", serial.as_str())]
        ) >= 2.0,
        "the task read the screen and opened an app on {serial}"
    );
    assert!(
        total(
            &after,
            "rpc_server_requests_total",
            &[
                ("rpc_service", "droidmesh.v1.DeviceService"),
                ("rpc_method", "AcquireLease"),
                ("rpc_grpc_status_code", "0")
            ]
        ) >= 1.0
    );
    // The gateway drops the finished task's CodeAct stream as soon as it reads the finished
    // event, before the executor's status: still the executor's OK, not a cancellation.
    let codeact_ended = scrape_until(admin, "the CodeAct stream ended", |s| {
        total(
            s,
            "rpc_server_active_requests",
            &[("rpc_service", "droidmesh.v1.ExecutorService")],
        ) == 0.0
    })
    .await;
    let codeact_code = |code: &str| {
        let mut labels = codeact.to_vec();
        labels.push(("rpc_grpc_status_code", code));
        total(&codeact_ended, "rpc_server_requests_total", &labels)
    };
    assert_eq!((codeact_code("0"), codeact_code("1")), (1.0, 0.0));
}
