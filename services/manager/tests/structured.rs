//! StructureOutput against a scripted LLM HTTP server, through a real gRPC client.
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{LlmClient, LlmConfig, WireFormat};
use droidmesh_manager::{ManagerConfig, manager_service};
use droidmesh_proto::v1::manager_service_client::ManagerServiceClient;
use droidmesh_proto::v1::{LlmOverride, StructureOutputRequest};
use tonic::Code;
use tonic::transport::server::TcpIncoming;

const SCHEMA: &str = r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}"#;

async fn start(
    script: Vec<&str>,
) -> (
    MockLlmServer,
    ManagerServiceClient<tonic::transport::Channel>,
) {
    let llm = MockLlmServer::start(
        script
            .into_iter()
            .map(|t| MockResponse::success(WireFormat::Openai, t, "m", 100, 10)),
    )
    .await
    .unwrap();
    let toml = format!(
        "[providers.mock]\nwire = \"openai\"\nbase_url = \"{}/v1\"\nretry = {{ max_attempts = 1, initial_backoff = \"10ms\", max_backoff = \"10ms\" }}\n[profiles.structured_output]\nprovider = \"mock\"\nmodel = \"m\"\n",
        llm.url()
    );
    let client = LlmClient::from_config(&LlmConfig::from_toml_str(&toml).unwrap()).unwrap();
    let svc = manager_service(ManagerConfig::default(), client, String::new()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    (
        llm,
        ManagerServiceClient::connect(format!("http://{addr}"))
            .await
            .unwrap(),
    )
}

fn request(schema: &str) -> StructureOutputRequest {
    StructureOutputRequest {
        task_id: "t".into(),
        goal: "What is the name of the 3rd contact?".into(),
        final_answer: "The third contact is Barbara Liskov.".into(),
        json_schema: schema.into(),
        llm: None,
    }
}

#[tokio::test]
async fn an_invalid_first_try_is_corrected_with_the_violations() {
    let (llm, mut client) = start(vec![
        "```json\n{\"name\": 3}\n```",
        "{\"name\": \"Barbara Liskov\"}",
    ])
    .await;
    let r = client
        .structure_output(request(SCHEMA))
        .await
        .unwrap()
        .into_inner();
    assert!(r.valid, "{r:?}");
    assert_eq!(r.attempts, 2);
    let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
    assert_eq!(json, serde_json::json!({"name": "Barbara Liskov"}));
    assert_eq!(r.usage.unwrap().usage.unwrap().calls, 2);
    let second = llm.requests()[1].json().to_string();
    assert!(
        second.contains("previous attempt") && second.contains("/name"),
        "{second}"
    );
}

#[tokio::test]
async fn answers_that_never_fit_say_why_and_bad_schemas_are_refused() {
    let (_llm, mut client) = start(vec!["no json here", "{\"nom\": 1}", "{\"name\": 1}"]).await;
    let r = client
        .structure_output(request(SCHEMA))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.valid);
    assert_eq!(r.attempts, 3);
    assert!(!r.validation_errors.is_empty());
    let err = client
        .structure_output(request("{\"type\": 5}"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn the_task_s_model_override_is_the_model_called() {
    let (llm, mut client) = start(vec!["{\"name\": \"Barbara Liskov\"}"]).await;
    let r = client
        .structure_output(StructureOutputRequest {
            llm: Some(LlmOverride {
                model: "bigger-model".into(),
                ..LlmOverride::default()
            }),
            ..request(SCHEMA)
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.valid, "{r:?}");
    assert_eq!(llm.requests()[0].json()["model"], "bigger-model");
    // An override naming a provider that is not configured is refused before any call.
    let err = client
        .structure_output(StructureOutputRequest {
            llm: Some(LlmOverride {
                provider: "nowhere".into(),
                ..LlmOverride::default()
            }),
            ..request(SCHEMA)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(llm.request_count(), 1);
}

#[tokio::test]
async fn a_refused_key_is_a_failed_precondition_naming_the_model() {
    let (llm, mut client) = start(vec![]).await;
    llm.push(MockResponse::error(401, "invalid api key"));
    let err = client.structure_output(request(SCHEMA)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("mock/m"), "{err:?}");
    llm.push(MockResponse::error(503, "overloaded"));
    let err = client.structure_output(request(SCHEMA)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
}
