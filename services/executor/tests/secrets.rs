//! Where the executor's secrets come from and what a request naming one it lacks gets: a
//! refusal at the start, before any model call, naming the id and where it was looked for;
//! a secret from a mounted file is typed as the file holds it, less its newline.
use std::collections::HashMap;
use std::time::Duration;

use droidmesh_executor::{ExecutorConfig, Secrets};
use droidmesh_proto::v1::{
    CodeActInput, CodeActStart, DeviceBinding, ExecuteSubgoalRequest, code_act_input,
};
use tonic::Code;

use crate::rig::{Rig, reply, rig_full};

fn cfg() -> ExecutorConfig {
    ExecutorConfig {
        step_timeout_ms: 5_000,
        ..ExecutorConfig::default()
    }
}

/// Opens a CodeAct run naming `ids`; the status it is refused with, if it is.
async fn start_code_act(rig: &Rig, ids: &[&str]) -> Result<(), tonic::Status> {
    let (_device, lease) = rig.lease().await;
    let start = CodeActStart {
        task_id: "t-1".into(),
        goal: "Type the PIN".into(),
        device: Some(DeviceBinding {
            endpoint: rig.device_ep.clone(),
            lease: Some(lease),
        }),
        max_steps: 3,
        secret_ids: ids.iter().map(|s| s.to_string()).collect(),
        ..CodeActStart::default()
    };
    let input = tokio_stream::iter([CodeActInput {
        kind: Some(code_act_input::Kind::Start(start)),
    }]);
    let mut exec = rig.executor.clone();
    tokio::time::timeout(Duration::from_secs(30), exec.run_code_act(input))
        .await
        .expect("RunCodeAct did not answer within 30 s")
        .map(|_| ())
}

/// Asks for one subgoal naming `ids`.
async fn execute_subgoal(rig: &Rig, ids: &[&str]) -> Result<(), tonic::Status> {
    let (_device, lease) = rig.lease().await;
    let req = ExecuteSubgoalRequest {
        task_id: "t-1".into(),
        subgoal: "Type the PIN".into(),
        device: Some(DeviceBinding {
            endpoint: rig.device_ep.clone(),
            lease: Some(lease),
        }),
        secret_ids: ids.iter().map(|s| s.to_string()).collect(),
        ..ExecuteSubgoalRequest::default()
    };
    let mut exec = rig.executor.clone();
    tokio::time::timeout(Duration::from_secs(30), exec.execute_subgoal(req))
        .await
        .expect("ExecuteSubgoal did not answer within 30 s")
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_naming_a_secret_the_executor_lacks_is_refused_before_any_model_call() {
    let secrets = HashMap::from([("pin".to_owned(), "4711-held".to_owned())]);
    let rig = rig_full(vec![], cfg(), secrets).await;
    let check = |ids: &[&str]| droidmesh_proto::v1::CheckSecretsRequest {
        secret_ids: ids.iter().map(|s| s.to_string()).collect(),
    };
    let mut exec = rig.executor.clone();
    exec.check_secrets(check(&["PIN", "pin"])).await.unwrap();
    exec.check_secrets(check(&[])).await.unwrap();
    for e in [
        start_code_act(&rig, &["PIN", "Card"]).await.unwrap_err(),
        execute_subgoal(&rig, &["pin", "Card"]).await.unwrap_err(),
        exec.check_secrets(check(&["pin", "Card"]))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        let m = e.message();
        assert!(
            m.starts_with("secret 'Card' is not held by this executor: it looked for the environment variable DROIDMESH_SECRET_CARD"),
            "{m}"
        );
        assert!(!m.contains("4711-held"), "{m}");
    }
    assert_eq!(rig.llm.requests().len(), 0, "a model was asked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_from_a_mounted_file_is_typed_without_its_newline() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mail_password"), "hunter2-File\n").unwrap();
    let secrets = Secrets::new(HashMap::new(), Some(dir.path().to_owned())).unwrap();
    let rig = rig_full(vec![], cfg(), secrets).await;
    let (_device, lease, field) = rig.open_notes().await;
    rig.llm.push(reply(&format!(
        "### Thought\nThe field is there.\n\n### Action\n{{\"action\": \"type_secret\", \"secret_id\": \"Mail_Password\", \"index\": {field}}}\n\n### Description\nType it."
    )));
    let mut exec = rig.executor.clone();
    let resp = exec
        .execute_subgoal(ExecuteSubgoalRequest {
            task_id: "t-1".into(),
            subgoal: "Type the password".into(),
            device: Some(DeviceBinding {
                endpoint: rig.device_ep.clone(),
                lease: Some(lease),
            }),
            secret_ids: vec!["Mail_Password".into()],
            ..ExecuteSubgoalRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(resp.result.as_ref().unwrap().success, "{resp:?}");
    assert!(!format!("{resp:?}").contains("hunter2"), "{resp:?}");
    let dump = rig.fleet.devices()[0].shell("uiautomator dump /dev/tty");
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(
        dump.contains("text=\"hunter2-File\""),
        "the field does not hold the file's value without its newline: {dump}"
    );
}
