//! A typed secret across the whole mesh, every service a separate process: typed with
//! `type_secret` into an ordinary field, then looked at for several steps with vision and
//! streamed screenshots, through a device service killed and restarted mid-lease, and shown
//! by the app inside a longer text and a content description. No model request, event, span,
//! log line, stored record or screenshot carries it: the secret (a canary) is grepped across
//! every file the mesh wrote, and every screenshot is decoded and its field's pixels compared
//! with the phone's own rendering.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine;
use droidmesh_device::screenshot::{decode_rgb, fit_png};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

use super::*;

const CANARY: &str = "canary-7Qx2-vault-91";
const BULLET: char = '\u{2022}';

/// An app that repeats a typed code in a longer text and a content description.
const VAULT: &str = include_str!("../../crates/sim/apps/vault.toml");

/// Waits for the device service to go away, then to answer again (ListPackages needs no lease).
const THROUGH_RESTART: &str = "let down = false;
for (let i = 0; i < 600 && !down; i++) { try { list_packages(); wait(100); } catch (e) { down = true; } }
let up = false;
for (let i = 0; i < 600 && !up; i++) { try { list_packages(); up = true; } catch (e) { wait(100); } }
console.log(down && up ? 'the device service came back' : 'down ' + down + ', up ' + up);";

fn js(code: &str) -> MockResponse {
    reply(&format!("```javascript\n{code}\n```"))
}

fn plan(items: &str) -> MockResponse {
    reply(&format!(
        "<thought>\nNext step.\n</thought>\n<plan>\n{items}\n</plan>"
    ))
}

fn act(action: &str) -> MockResponse {
    reply(&format!(
        "### Thought\nThe subgoal's action.\n\n### Action\n{action}\n\n### Description\nThe action."
    ))
}

fn done(answer: &str) -> MockResponse {
    reply(&format!(
        "<thought>\nFinished.\n</thought>\n<request_accomplished success=\"true\">\n{answer}\n</request_accomplished>"
    ))
}

/// An OTLP trace collector on loopback that appends every span it receives to a file.
#[derive(Clone)]
struct SpanFile(Arc<Mutex<std::fs::File>>);

#[tonic::async_trait]
impl TraceService for SpanFile {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        use std::io::Write;
        let text = format!("{:?}\n", request.into_inner());
        self.0.lock().unwrap().write_all(text.as_bytes()).unwrap();
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

async fn span_file(path: &Path) -> (String, tokio::task::JoinHandle<()>) {
    let file = std::fs::File::create(path).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = format!("http://{}", listener.local_addr().unwrap());
    let svc = TraceServiceServer::new(SpanFile(Arc::new(Mutex::new(file))));
    let server = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await;
    });
    (otlp, server)
}

/// The code field's bounds as the phone itself reports them (no device service involved).
fn field_bounds(mesh: &Mesh, serial: &str) -> [i32; 4] {
    let dump = mesh.adb.shell(serial, "uiautomator dump /dev/tty").unwrap();
    let at = dump
        .find("com.droidmesh.vault:id/code")
        .expect("the vault is not on screen");
    let rest = &dump[at..];
    let b = &rest[rest.find("bounds=\"").unwrap() + 8..];
    let b = &b[..b.find('"').unwrap()];
    let n: Vec<i32> = b
        .split(|c: char| !c.is_ascii_digit() && c != '-')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    [n[0], n[1], n[2], n[3]]
}

/// The pixels of `b` (device pixels) in an image scaled by `scale`, one pixel in from its edges
/// (which the scaling averages with the neighbours).
fn region(png: &[u8], b: [i32; 4], scale: f64) -> Vec<[u8; 3]> {
    let (w, _, rgb) = decode_rgb(png).unwrap();
    let to = |v: i32| (f64::from(v) / scale) as usize;
    let mut out = Vec::new();
    for y in to(b[1]) + 1..to(b[3]) - 1 {
        for x in to(b[0]) + 1..to(b[2]) - 1 {
            let i = (y * w as usize + x) * 3;
            out.push([rgb[i], rgb[i + 1], rgb[i + 2]]);
        }
    }
    out
}

/// Checks that `png` (the screen scaled by `scale`) has the field black where the phone's
/// own rendering, scaled the same, does not.
fn assert_field_black(png: &[u8], scale: f64, field: [i32; 4], unmasked: &[u8], what: &str) {
    let masked = region(png, field, scale);
    assert!(!masked.is_empty(), "{what}: no pixels in the field");
    assert!(
        masked.iter().all(|p| *p == [0, 0, 0]),
        "{what}: the field's pixels are not black"
    );
    let (w, h, _) = decode_rgb(png).unwrap();
    let shown = fit_png(unmasked, w.max(h)).unwrap();
    assert!(
        region(&shown.png, field, shown.scale_x)
            .iter()
            .any(|p| *p != [0, 0, 0]),
        "{what}: the phone's own rendering of the field is black too"
    );
}

/// Every file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The files under `dirs` whose bytes hold `needle`.
fn holding(dirs: &[&Path], needle: &str) -> (usize, Vec<PathBuf>) {
    let mut all = Vec::new();
    for d in dirs {
        files(d, &mut all);
    }
    let hits = all
        .iter()
        .filter(|p| {
            std::fs::read(p)
                .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        })
        .cloned()
        .collect();
    (all.len(), hits)
}

fn screenshots(events: &[TaskEvent]) -> Vec<(usize, &droidmesh_proto::v1::Screenshot)> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.kind {
            Some(task_event::Kind::Screenshot(s)) => Some((i, s)),
            _ => None,
        })
        .collect()
}

/// Where the first event matching `f` is.
fn position(events: &[TaskEvent], f: impl Fn(&task_event::Kind) -> bool) -> usize {
    events
        .iter()
        .position(|e| e.kind.as_ref().is_some_and(&f))
        .unwrap_or_else(|| panic!("no such event in {events:#?}"))
}

fn said(k: &task_event::Kind, words: &str) -> bool {
    matches!(k, task_event::Kind::Observation(o) if o.output.contains(words) || o.notes.iter().any(|n| n.contains(words)))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typed_secret_reaches_no_model_event_span_log_store_or_screenshot() {
    if !require_adb("cross-process tests") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (logs, data) = (root.path().join("logs"), root.path().join("data"));
    std::fs::create_dir_all(&logs).unwrap();
    let apps = root.path().join("apps.toml");
    std::fs::write(
        &apps,
        format!(
            "{}\n{VAULT}",
            include_str!("../../crates/sim/apps/default.toml")
        ),
    )
    .unwrap();
    let (otlp, collector) = span_file(&root.path().join("spans.txt")).await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        (
            "RUST_LOG",
            "debug,h2=info,hyper=info,hyper_util=info,tower=info,rustls=info",
        ),
        ("DROIDMESH_SECRET_VAULT", CANARY),
        ("DROIDMESH_TELEMETRY__CAPTURE_CONTENT", "true"),
        // The restart below must not cost the task its lease before it ends.
        ("DROIDMESH_GATEWAY__LEASE_TTL_MS", "600000"),
    ];
    let code = "ui_state.find(e => e.resource_id.endsWith(':id/code'))";
    let mut mesh = start_with(
        vec![
            // Task 1: type the secret, look five times, the device service restarting between.
            js("open_app('com.droidmesh.vault')"),
            js(&format!("type_secret('vault', {code}.index)")),
            js(&format!("console.log('look 1: ' + {code}.text)")),
            js(&format!("console.log('look 2: ' + {code}.text)")),
            js(THROUGH_RESTART),
            js(&format!(
                "console.log('after the restart 1: ' + {code}.text)"
            )),
            js(&format!(
                "console.log('after the restart 2: ' + {code}.text)"
            )),
            js("complete(true, 'looked')"),
            // Task 2: the app shows the secret elsewhere.
            js("tap(ui_state.find(e => e.text == 'Search').index)"),
            js("console.log(JSON.stringify(ui_state.map(e => [e.text, e.content_desc])))"),
            js("complete(true, 'searched')"),
            // Task 3, reasoning mode: the manager plans on the screen that repeats the code,
            // the executor goes back and types it again.
            plan("1. Go back to the code field"),
            act(r#"{"action": "back"}"#),
            plan("1. Type the vault code into the code field (element 1)"),
            act(r#"{"action": "type_secret", "secret_id": "vault", "index": 1}"#),
            done("typed again"),
        ],
        Extra {
            env: &env,
            gateway: &format!("data_dir = \"{}\"", data.display()),
            sim: &["--apps", apps.to_str().unwrap()],
            logs: Some(&logs),
            ..Extra::default()
        },
    )
    .await;
    let serial = mesh.serials[0].clone();
    let req = |goal: &str| TaskRequest {
        goal: goal.into(),
        device: serial.clone(),
        secret_ids: vec!["vault".into()],
        vision: true,
        stream_screenshots: true,
        ..TaskRequest::default()
    };

    // Task 1, the device service killed and started again while a step's code runs.
    let (id, mut watch) = submit_until(
        &mesh,
        req("Type the vault code and look"),
        |e| matches!(&e.kind, Some(task_event::Kind::Code(c)) if c.code.contains("list_packages")),
    )
    .await;
    mesh.device.kill();
    let args: Vec<&str> = mesh.device_args.iter().map(String::as_str).collect();
    mesh.device = Proc::spawn_logged("device", &args, &env, &logs.join("device.log")).unwrap();
    let done = rest_of(&mut watch).await;
    assert!(completed(&done).success, "{:?}", completed(&done));
    let mut g = mesh.gateway.clone();
    let mut replay = g
        .watch_task(WatchTaskRequest {
            task_id: id.clone(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let first = rest_of(&mut replay).await;
    assert!(completed(&first).success, "{:?}", completed(&first));
    // The phone holds the secret: the test types it for real.
    let dump = mesh
        .adb
        .shell(&serial, "uiautomator dump /dev/tty")
        .unwrap();
    assert!(dump.contains(CANARY), "the secret was not typed");
    let field = field_bounds(&mesh, &serial);
    let unmasked = mesh
        .adb
        .adb(&["-s", &serial, "exec-out", "screencap", "-p"])
        .unwrap()
        .stdout;

    // Every screenshot after the secret was typed has the field blacked out: five looks and
    // more, two of them from the restarted device service.
    let typed = position(
        &first,
        |k| matches!(k, task_event::Kind::ToolResult(r) if r.tool == "type_secret"),
    );
    let restarted = position(&first, |k| said(k, "the device service came back"));
    let shots = screenshots(&first);
    let after: Vec<_> = shots.iter().filter(|(i, _)| *i > typed).collect();
    assert!(after.len() >= 5, "{} screenshots after typing", after.len());
    assert!(
        after.iter().filter(|(i, _)| *i > restarted).count() >= 2,
        "fewer than two screenshots after the restart"
    );
    for (i, s) in &after {
        assert_field_black(&s.png, s.scale_x, field, &unmasked, &format!("event {i}"));
    }
    let bullets = BULLET.to_string().repeat(CANARY.len());
    assert!(
        position(&first, |k| said(
            k,
            &format!("after the restart 2: {bullets}")
        )) > restarted
    );

    // Task 2: the app repeats the code; the mesh shows it masked and stops sending screenshots.
    let second = run(&mesh, req("Search with the code")).await;
    assert!(completed(&second).success, "{:?}", completed(&second));
    assert!(
        second.iter().any(|e| e
            .kind
            .as_ref()
            .is_some_and(|k| said(k, &format!("Results for {bullets}")))),
        "{second:#?}"
    );
    let withheld = position(&second, |k| {
        said(k, "screenshots are withheld for the rest of the task")
    });
    let late: Vec<_> = screenshots(&second)
        .into_iter()
        .filter(|(i, _)| *i > withheld)
        .collect();
    assert!(late.is_empty(), "a screenshot after they were withheld");
    for (i, s) in screenshots(&second) {
        assert_field_black(
            &s.png,
            s.scale_x,
            field,
            &unmasked,
            &format!("task 2 event {i}"),
        );
    }

    // Task 3 in reasoning mode: the manager reads the screen that repeats the code (no
    // screenshot: withheld for this lease too), the executor types it again.
    let third = run(
        &mesh,
        TaskRequest {
            mode: droidmesh_proto::v1::Mode::Reasoning as i32,
            ..req("Type the vault code again")
        },
    )
    .await;
    assert!(completed(&third).success, "{:?}", completed(&third));
    assert!(screenshots(&third).is_empty(), "a screenshot in task 3");
    // ... and says so, once, with the device service's reason.
    let told: Vec<_> = third
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Message(m))
                if m.text
                    .starts_with("screenshots are withheld for the rest of the task: ") =>
            {
                Some(m.text.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{third:#?}");
    assert!(told[0].contains("typed secret"), "{}", told[0]);

    // The model saw no secret, in words or in pixels.
    let requests = mesh.llm.requests();
    assert_eq!(requests.len(), 16);
    let manager = String::from_utf8_lossy(&requests[11].body).into_owned();
    assert!(
        manager.contains(&format!("Results for {bullets}")),
        "the manager did not read the masked screen: {manager}"
    );
    let mut images = 0;
    for (i, r) in requests.iter().enumerate() {
        let body = String::from_utf8_lossy(&r.body);
        assert!(
            !body.contains(CANARY),
            "model request {i} carries the secret"
        );
        if i < 2 {
            continue;
        }
        for part in body.split("data:image/png;base64,").skip(1) {
            let b64 = &part[..part.find('"').unwrap()];
            let png = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            let (w, _, _) = decode_rgb(&png).unwrap();
            let scale = 1080.0 / f64::from(w);
            assert_field_black(&png, scale, field, &unmasked, &format!("model request {i}"));
            images += 1;
        }
    }
    assert!(images >= 6, "{images} images reached the model");

    // Nothing any process wrote holds the secret: its own data directory, its log (at debug),
    // the exported spans, the task store.
    let own: Vec<PathBuf> = std::iter::once(&mesh.device)
        .chain(&mesh.procs)
        .chain(std::iter::once(&mesh.executor))
        .map(|p| p.data_dir().to_owned())
        .collect();
    let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
    let (n, hits) = holding(&own, CANARY);
    assert!(hits.is_empty(), "{hits:?} of {n} files hold the secret");
    let spans = root.path().join("spans.txt");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&spans)
        .unwrap_or_default()
        .contains("execute_tool type_secret")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no span of type_secret"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config = mesh.dir.clone();
    drop(mesh);
    collector.abort();
    // The task store (its file or its write-ahead log) holds the tasks: the grep reads it.
    let stored = holding(&[&data], &id).1;
    assert!(
        stored.iter().any(|p| p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("gateway.sqlite"))),
        "the store does not hold task {id}: {stored:?}"
    );
    let log = std::fs::read_to_string(logs.join("executor.log")).unwrap();
    assert!(
        log.contains("DEBUG"),
        "the executor's log holds no debug line"
    );
    let (n, hits) = holding(&[root.path(), &config], CANARY);
    assert!(n >= 10, "only {n} files were written");
    assert!(hits.is_empty(), "{hits:?} of {n} files hold the secret");
}
