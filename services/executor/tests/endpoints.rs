//! The device service endpoints an executor calls: its own and those in
//! `executor.device_endpoints`, however a request spells them; a request naming another is
//! refused before any connection is made (a loopback listener there sees none).
use std::time::Duration;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_executor::ExecutorConfig;
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, CodeActInput, CodeActStart, DeviceBinding, ExecuteSubgoalRequest,
    LeaseRef, code_act_input,
};
use tokio::net::TcpListener;

use crate::codeact::{finished, run_with};
use crate::rig::{Rig, reply, rig, rig_with};

/// How long a listener at a refused address is watched for a late connection. The executor
/// never dials it, so the outcome does not depend on this; a longer watch only catches a
/// slower wrong dial.
const WATCH: Duration = Duration::from_millis(700);

fn binding(endpoint: &str) -> Option<DeviceBinding> {
    Some(DeviceBinding {
        endpoint: endpoint.into(),
        lease: Some(LeaseRef {
            serial: "127.0.0.1:5555".into(),
            lease_id: "lease-1".into(),
        }),
    })
}

/// Races `call` against a connection at `outside`, then watches `outside` a while longer
/// with the call's answer held (a stream kept open could still dial): the answer, provided
/// nothing connected.
async fn refused_unreached<T>(
    outside: &TcpListener,
    call: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> tonic::Status {
    let at = outside.local_addr().unwrap();
    let answer = tokio::select! {
        _ = outside.accept() => panic!("the executor connected to {at}, outside its allow-list"),
        answer = call => answer,
    };
    let late = tokio::time::timeout(WATCH, outside.accept()).await;
    assert!(
        late.is_err(),
        "the executor connected to {at}, outside its allow-list"
    );
    match answer {
        Ok(_) => panic!("a request naming {at} was taken"),
        Err(status) => status,
    }
}

fn assert_refusal(status: &tonic::Status, endpoint: &str) {
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains(&format!("'{endpoint}'"))
            && status.message().contains("executor.device_endpoints"),
        "the refusal names neither the endpoint nor the setting: {}",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_endpoint_outside_the_allow_list_is_refused_unreached() {
    let rig = rig(vec![]).await;
    let outside = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", outside.local_addr().unwrap());

    // RunCodeAct.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(CodeActInput {
        kind: Some(code_act_input::Kind::Start(CodeActStart {
            task_id: "t-outside".into(),
            goal: "Open Settings".into(),
            device: binding(&endpoint),
            max_steps: 1,
            ..CodeActStart::default()
        })),
    })
    .await
    .unwrap();
    let mut exec = rig.executor.clone();
    let status = refused_unreached(
        &outside,
        exec.run_code_act(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
    .await;
    assert_refusal(&status, &endpoint);

    // ExecuteSubgoal.
    let mut exec = rig.executor.clone();
    let status = refused_unreached(
        &outside,
        exec.execute_subgoal(ExecuteSubgoalRequest {
            task_id: "t-outside".into(),
            instruction: "Go back".into(),
            subgoal: "Go back".into(),
            device: binding(&endpoint),
            ..ExecuteSubgoalRequest::default()
        }),
    )
    .await;
    assert_refusal(&status, &endpoint);
    assert_eq!(
        rig.llm.request_count(),
        0,
        "a refused request reached the model"
    );
}

/// The executor's own device service, spelled otherwise (case, a trailing slash), is its own.
#[tokio::test(flavor = "multi_thread")]
async fn another_spelling_of_the_configured_endpoint_is_served() {
    let rig: Rig = rig(vec![reply("```js\ncomplete(true, 'seen')\n```")]).await;
    let spelled = format!("{}/", rig.device_ep.replacen("http://", "HTTP://", 1));
    let events = run_with(&rig, "Look at the screen", 1, None, |s| {
        s.device.as_mut().unwrap().endpoint = spelled.clone();
    })
    .await;
    assert!(finished(&events).success, "{:?}", finished(&events));
}

/// A second device service listed in `executor.device_endpoints` is served: a subgoal acts on
/// the phone through it.
#[tokio::test(flavor = "multi_thread")]
async fn a_device_service_on_the_allow_list_is_served() {
    let second = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second_ep = format!("http://{}", second.local_addr().unwrap());
    let cfg = ExecutorConfig {
        step_timeout_ms: 5_000,
        device_endpoints: vec![second_ep.clone()],
        ..ExecutorConfig::default()
    };
    let rig = rig_with(vec![reply(r#"{"action": "back"}"#)], cfg).await;
    let device = device_service(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![rig.fleet.addrs()[0].to_string()],
        ..DeviceConfig::default()
    })
    .unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(device)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(second)),
    );
    let mut through_second = DeviceServiceClient::connect(second_ep.clone())
        .await
        .unwrap();
    let serial = rig.fleet.addrs()[0].to_string();
    let lease = through_second
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: "second".into(),
            ttl_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut exec = rig.executor.clone();
    let resp = exec
        .execute_subgoal(ExecuteSubgoalRequest {
            task_id: "t-second".into(),
            instruction: "Go back".into(),
            subgoal: "Go back".into(),
            device: Some(DeviceBinding {
                endpoint: second_ep.to_uppercase(),
                lease: Some(LeaseRef {
                    serial,
                    lease_id: lease.lease_id,
                }),
            }),
            ..ExecuteSubgoalRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let result = resp.result.unwrap();
    assert!(result.success, "{result:?}");
}
