//! TLS across processes: certificates made by `droidmesh tls dev-certs`, then the gateway, the
//! device service and the executor as separate `droidmesh serve` processes with `[tls]
//! mutual = true`. A task runs end to end over TLS (gateway → executor → device, each
//! checking the other's certificate); the device service refuses a caller without a
//! certificate; the gateway's ports refuse cleartext; its HTTP face answers over HTTPS; the
//! CLI's own client (`droidmesh devices`) presents the config's certificate.
use super::*;
use droidmesh_e2e::{droidmesh_bin, start_sims};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_runtime::tls::{ClientTls, TlsConfig};
use droidmesh_runtime::{ClientOptions, connect};
use std::path::Path;
use std::time::Instant;

/// Runs the droidmesh binary to its end; its stdout, or a panic with its stderr.
fn droidmesh(args: &[&str]) -> String {
    let out = std::process::Command::new(droidmesh_bin().unwrap())
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "droidmesh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn client_tls(dir: &Path, with_cert: bool) -> ClientTls {
    ClientTls::from_config(&TlsConfig {
        ca: Some(dir.join("ca.crt")),
        cert: with_cert.then(|| dir.join("client.crt")),
        key: with_cert.then(|| dir.join("client.key")),
        ..TlsConfig::default()
    })
    .unwrap()
}

fn options(tls: ClientTls) -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Some(Duration::from_secs(10)),
        tls,
        ..ClientOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mesh_of_processes_runs_a_task_over_mutual_tls_and_refuses_callers_without_certificates()
{
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path().to_str().unwrap();
    let said = droidmesh(&["tls", "dev-certs", dir]);
    assert!(said.contains("wrote a new CA"), "{said}");
    assert!(said.contains("[tls]"), "{said}");
    let said = droidmesh(&[
        "tls",
        "dev-certs",
        dir,
        "--name",
        "client",
        "--host",
        "droidmesh-client",
    ]);
    assert!(said.contains("signed with the CA in"), "{said}");

    let llm = MockLlmServer::start(vec![
        reply("```javascript\nopen_app('Settings')\n```"),
        reply("```javascript\nconst w = ui_state.find(e => e.text === 'Wi-Fi');\ntap(w.index);\ncomplete(true, 'Wi-Fi is on')\n```"),
    ])
    .await
    .unwrap();
    let (_sim, phones) = start_sims(1).unwrap();
    let (dev, exe, gw, http) = (free_port(), free_port(), free_port(), free_port());
    let unused = free_port();
    let config = format!(
        r#"[listen]
host = "127.0.0.1"
device = {dev}
executor = {exe}
gateway = {gw}
gateway_http = {http}
admin = 0

[endpoints]
device = "https://127.0.0.1:{dev}"
executor = "https://127.0.0.1:{exe}"
gateway = "https://127.0.0.1:{gw}"
manager = "https://127.0.0.1:{unused}"
scripter = "https://127.0.0.1:{unused}"
text_manipulator = "https://127.0.0.1:{unused}"

[device]
adb_server = ""
direct_devices = ["{phone}"]

[gateway]
store = "memory"

[tls]
cert = "{dir}/tls.crt"
key = "{dir}/tls.key"
ca = "{dir}/ca.crt"
mutual = true

[llm.providers.mock]
wire = "openai"
base_url = "{url}/v1"

[llm.profiles.default]
provider = "mock"
model = "scripted-model"
"#,
        phone = phones[0],
        url = llm.url(),
    );
    let path = certs.path().join("droidmesh.toml");
    std::fs::write(&path, config).unwrap();
    let cfg = path.to_str().unwrap();
    let _procs: Vec<Proc> = ["device", "executor", "gateway"]
        .iter()
        .map(|svc| Proc::spawn(svc, &["--config", cfg, "serve", svc]).unwrap())
        .collect();

    for port in [dev, exe, gw, http] {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nothing listens on {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // A client that trusts the CA, without a certificate of its own: the gateway serves it
    // (its callers authenticate with API keys).
    let gateway = connect(
        &format!("https://127.0.0.1:{gw}"),
        &options(client_tls(certs.path(), false)),
    )
    .unwrap();
    let mut gateway = GatewayClient::new(gateway);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(list) = gateway.list_devices(ListDevicesRequest {}).await
            && list.get_ref().devices.len() == 1
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway never listed the phone over TLS"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut stream = gateway
        .run_task(TaskRequest {
            goal: "Turn on Wi-Fi".into(),
            ..TaskRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(60), stream.next()).await {
        events.push(ev.unwrap());
    }
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.answer, "Wi-Fi is on");

    // The device service asks for a certificate signed by the CA.
    let refused = DeviceServiceClient::new(
        connect(
            &format!("https://127.0.0.1:{dev}"),
            &options(client_tls(certs.path(), false)),
        )
        .unwrap(),
    )
    .list_devices(ListDevicesRequest {})
    .await
    .unwrap_err();
    // TLS 1.3 refuses a missing certificate after the client's side of the handshake is
    // done: the client sees its connection closed.
    assert!(
        matches!(
            refused.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
        ),
        "{refused:?}"
    );
    let listed = DeviceServiceClient::new(
        connect(
            &format!("https://127.0.0.1:{dev}"),
            &options(client_tls(certs.path(), true)),
        )
        .unwrap(),
    )
    .list_devices(ListDevicesRequest {})
    .await
    .unwrap()
    .into_inner();
    assert_eq!(listed.devices.len(), 1);

    // Cleartext to the gateway's gRPC port is not served.
    let plain = GatewayClient::new(
        connect(
            &format!("http://127.0.0.1:{gw}"),
            &options(client_tls(certs.path(), false)),
        )
        .unwrap(),
    )
    .clone()
    .list_devices(ListDevicesRequest {})
    .await;
    assert!(plain.is_err(), "cleartext was served: {plain:?}");

    // The HTTP face over HTTPS, checked against the CA; not over HTTP.
    droidmesh_llm::install_crypto_provider();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(certs.path().join("ca.crt")).unwrap())
        .unwrap();
    let https = reqwest::Client::builder()
        .tls_certs_only([ca])
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let devices: serde_json::Value = https
        .get(format!("https://127.0.0.1:{http}/v1/devices"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        devices["devices"].as_array().map(Vec::len),
        Some(1),
        "{devices}"
    );
    let cleartext = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{http}/v1/devices"))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    assert!(
        cleartext.is_err(),
        "cleartext HTTP was served: {cleartext:?}"
    );

    // The CLI's client presents the config's certificate to the device service.
    let said = droidmesh(&["--config", cfg, "devices"]);
    assert!(said.contains(&phones[0]), "{said}");
}
