//! The `fetch` API as scripts use it: methods, bodies, headers, binary downloads, errors.
use droidmesh_llm::testkit::MockResponse;
use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn every_method_reaches_the_server_with_its_body_and_headers() {
    let server = target(vec![
        MockResponse::raw(200, "put ok").header("x-trace", "a"),
        MockResponse::json(200, &json!({"patched": true})),
        MockResponse::raw(204, ""),
        MockResponse::raw(200, "").header("x-size", "12"),
    ])
    .await;
    let base = format!("http://127.0.0.1:{}", server.addr().port());
    let mut cfg = config();
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{}", server.addr().port())];
    let code = format!(
        r#"const a = await fetch('{base}/doc', {{ method: 'PUT', body: 'plain text', headers: {{ 'Content-Type': 'text/plain', 'X-Trace': 'a' }} }});
console.log(a.status, a.ok, a.headers.get('X-TRACE'), await a.text());
const b = await fetchJson('{base}/doc', {{ method: 'patch', body: {{ title: 'new' }} }});
console.log(JSON.stringify(b));
const c = await fetch('{base}/doc', {{ method: 'DELETE' }});
console.log(c.status, c.statusText);
const d = await fetch('{base}/doc', {{ method: 'HEAD' }});
console.log(d.headers.get('x-size'), (await d.text()).length)"#
    );
    let rig = rig_with(cfg, vec![step(&code), reply("Done.")]).await;
    let events = run(&rig, request("Edit the document.")).await;
    assert_eq!(
        observations(&events)[0],
        (
            "200 true a put ok\n{\"patched\":true}\n204 No Content\n12 0".to_string(),
            None
        )
    );
    let got = server.requests();
    let seen: Vec<(&str, &str, Option<&str>, &[u8])> = got
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.path.as_str(),
                r.header("content-type"),
                &r.body[..],
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("PUT", "/doc", Some("text/plain"), &b"plain text"[..]),
            (
                "PATCH",
                "/doc",
                Some("application/json"),
                &br#"{"title":"new"}"#[..]
            ),
            ("DELETE", "/doc", None, &b""[..]),
            ("HEAD", "/doc", None, &b""[..]),
        ]
    );
    assert_eq!(got[0].header("x-trace"), Some("a"));
    assert!(
        got[0]
            .header("user-agent")
            .unwrap()
            .starts_with("droidmesh-scripter/")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_binary_download_is_saved_byte_for_byte_and_errors_are_clear() {
    let bytes: Vec<u8> = vec![0, 1, 2, 255, 254];
    let server = target(vec![
        MockResponse::raw(200, bytes.clone()).header("content-type", "image/png"),
        MockResponse::raw(200, "<html>not json</html>"),
        MockResponse::raw(404, "no such thing"),
    ])
    .await;
    let base = format!("http://127.0.0.1:{}", server.addr().port());
    let mut cfg = config();
    cfg.http.allow_hosts = vec!["127.0.0.1".into()];
    let code = format!(
        r#"const img = await fetch('{base}/logo.png', {{ binary: true }});
const saved = write_file('logo.png', await img.base64(), 'base64');
console.log(img.headers.get('content-type'), saved.size_bytes);
try {{ await img.text() }} catch (e) {{ console.log(e.message) }}
try {{ await (await fetch('{base}/page')).json() }} catch (e) {{ console.log(e.name, e.message) }}
try {{ await fetchJson('{base}/missing') }} catch (e) {{ console.log(e.message) }}"#
    );
    let rig = rig_with(cfg, vec![step(&code), reply("Saved logo.png.")]).await;
    let events = run(&rig, request("Download the logo.")).await;
    let (output, error) = &observations(&events)[0];
    assert_eq!(error, &None);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines[0], "image/png 5");
    assert_eq!(
        lines[1],
        "this response was fetched with { binary: true }; read it with base64()"
    );
    assert!(
        lines[2].starts_with(&format!(
            "FetchError the response from {base}/page (status 200) is not JSON"
        )),
        "{}",
        lines[2]
    );
    assert!(lines[2].ends_with("it starts with: <html>not json</html>"));
    assert_eq!(
        lines[3],
        format!("{base}/missing answered 404 Not Found: no such thing")
    );
    let files = &finished(&events).result.as_ref().unwrap().files;
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].mime_type, "image/png");
    assert_eq!(std::fs::read(&files[0].path).unwrap(), bytes);
}
