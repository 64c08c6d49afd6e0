//! What the metrics tests share: the admin server's `/metrics` read over a plain TCP
//! connection on loopback and parsed with a Prometheus text parser, sample look-ups by labels,
//! and a scrape repeated until a condition holds (with a deadline).
#![allow(dead_code)]
use prometheus_parse::{Sample, Scrape, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` over a plain TCP connection: (status line, lower-cased headers, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("the admin server answers within 10 s")
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_owned(), headers.to_lowercase(), body.to_owned())
}

/// The text of `/metrics`, checked for status and content type.
pub async fn scrape_text(addr: SocketAddr) -> String {
    let (status, headers, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        headers.contains("content-type: text/plain; version=0.0.4"),
        "{headers}"
    );
    body
}

pub async fn scrape(addr: SocketAddr) -> Scrape {
    let body = scrape_text(addr).await;
    Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The value of the first sample `metric` whose labels include every pair of `labels` (a
/// histogram reads as its count).
pub fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matches =
        |s: &&Sample| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v));
    scrape.samples.iter().find(matches).map(|s| match &s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
        Value::Summary(_) => panic!("{metric} is a summary"),
    })
}

/// The labels of one call's series: gRPC, `service`, `method`, status `code`.
pub fn call(service: &str, method: &str, code: &str) -> Vec<(&'static str, String)> {
    vec![
        ("rpc_system", "grpc".to_owned()),
        ("rpc_service", service.to_owned()),
        ("rpc_method", method.to_owned()),
        ("rpc_grpc_status_code", code.to_owned()),
    ]
}

/// [`value`] with owned labels, 0 when there is no such sample.
pub fn get(scrape: &Scrape, metric: &str, labels: &[(&'static str, String)]) -> f64 {
    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    value(scrape, metric, &labels).unwrap_or(0.0)
}

/// Calls of `service`/`method` in progress, 0 when there is no such sample.
pub fn active(scrape: &Scrape, service: &str, method: &str) -> f64 {
    value(
        scrape,
        "rpc_server_active_requests",
        &[("rpc_service", service), ("rpc_method", method)],
    )
    .unwrap_or(0.0)
}

/// Scrapes until `ok` holds (the server records a call as its response ends, which the
/// client may see first), failing after `within`.
pub async fn scrape_until(
    addr: SocketAddr,
    within: Duration,
    ok: impl Fn(&Scrape) -> bool,
) -> Scrape {
    let deadline = Instant::now() + within;
    loop {
        let s = scrape(addr).await;
        if ok(&s) {
            return s;
        }
        if Instant::now() >= deadline {
            let requests: Vec<String> = s
                .samples
                .iter()
                .filter(|x| x.metric == "rpc_server_requests_total")
                .take(40)
                .map(|x| format!("{:?} {:?}", x.labels, x.value))
                .collect();
            panic!(
                "the metrics never got there within {within:?}; requests: {}",
                requests.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Installs the process's meter provider and serves its `/metrics` on a loopback port until
/// the process ends; returns that port's address.
pub async fn start_admin() -> SocketAddr {
    let metrics = droidmesh_runtime::metrics::install("metrics-test", None).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(droidmesh_runtime::metrics::serve_admin(
        listener,
        metrics,
        droidmesh_runtime::metrics::AdminOptions::default(),
        std::future::pending(),
    ));
    addr
}
