//! API keys and tenants through the public API: a tenant sees and steers only its own tasks
//! (another's are not found, in the words of an unknown id), a key restricted to a device
//! leases only that one, bad keys are refused, and a rotated keys file takes effect while the
//! gateway runs.
use std::path::Path;
use std::time::Duration;

use droidmesh_gateway::auth::{hash_key, key_entry};
use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, ListDevicesRequest, ListTasksRequest, SendMessageRequest,
    TaskState, WatchTaskRequest, send_message_request,
};
use tonic::{Code, Request, Status};

use super::harness::*;

pub const ACME: &str = "dmk_acme_test_key";
pub const GLOBEX: &str = "dmk_globex_test_key";

/// `msg` sent with `authorization: Bearer <key>`.
pub fn with_key<T>(key: &str, msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    r
}

/// Cancels the task `id` as the holder of `key`.
pub async fn cancel(
    g: &mut droidmesh_proto::v1::gateway_client::GatewayClient<tonic::transport::Channel>,
    key: &str,
    id: String,
) {
    g.cancel_task(with_key(
        key,
        CancelTaskRequest {
            task_id: id,
            reason: String::new(),
        },
    ))
    .await
    .unwrap();
}

pub fn write_keys(path: &Path, entries: &[String]) {
    // Written whole and renamed, as a deployment tool does, so a reader never sees half.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, entries.concat()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub fn entry(key: &str, tenant: &str, devices: &[&str]) -> String {
    let devices: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    key_entry(key, tenant, &devices, &[], None).unwrap()
}

/// A stack whose gateway takes the keys in its keys file (returned with the directory).
async fn keyed_stack(shared: &Shared, entries: &[String]) -> (Stack, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    write_keys(&path, entries);
    let mut cfg = test_config();
    cfg.auth.keys_file = Some(path);
    (stack_with(shared, None, cfg).await, dir)
}

async fn state(stack: &Stack, key: &str, id: &str) -> TaskState {
    let mut g = stack.gateway.clone();
    let t = g
        .get_task(with_key(key, GetTaskRequest { task_id: id.into() }))
        .await
        .unwrap()
        .into_inner();
    TaskState::try_from(t.state).unwrap()
}

pub async fn wait_running(stack: &Stack, key: &str, id: &str) {
    for _ in 0..400 {
        if state(stack, key, id).await == TaskState::Running {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {id} did not start running within 10 s");
}

fn not_found_like_unknown(e: &Status, id: &str, unknown: &Status) {
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert_eq!(
        e.message(),
        unknown.message().replace("task-nope", id),
        "another tenant's task must read as an unknown id"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_sees_and_steers_only_its_own_tasks() {
    let Some(shared) = shared() else { return };
    let keys = [entry(ACME, "acme", &[]), entry(GLOBEX, "globex", &[])];
    let (stack, _dir) = keyed_stack(shared, &keys).await;
    let mut g = stack.gateway.clone();
    let submit = |key: &'static str, serial: &str| {
        let mut g = stack.gateway.clone();
        let req = with_key(key, request("slow work", serial));
        async move { g.submit_task(req).await.unwrap().into_inner().task_id }
    };
    let ours = submit(ACME, &shared.serials[0]).await;
    let theirs = submit(GLOBEX, &shared.serials[1]).await;
    wait_running(&stack, ACME, &ours).await;
    wait_running(&stack, GLOBEX, &theirs).await;

    let unknown = g
        .get_task(with_key(
            GLOBEX,
            GetTaskRequest {
                task_id: "task-nope".into(),
            },
        ))
        .await
        .unwrap_err();
    let e = g
        .get_task(with_key(
            GLOBEX,
            GetTaskRequest {
                task_id: ours.clone(),
            },
        ))
        .await
        .unwrap_err();
    not_found_like_unknown(&e, &ours, &unknown);
    let e = g
        .watch_task(with_key(
            GLOBEX,
            WatchTaskRequest {
                task_id: ours.clone(),
                from_seq: 1,
            },
        ))
        .await
        .unwrap_err();
    not_found_like_unknown(&e, &ours, &unknown);
    let e = g
        .cancel_task(with_key(
            GLOBEX,
            CancelTaskRequest {
                task_id: ours.clone(),
                reason: String::new(),
            },
        ))
        .await
        .unwrap_err();
    not_found_like_unknown(&e, &ours, &unknown);
    let e = g
        .send_message(with_key(
            GLOBEX,
            SendMessageRequest {
                task_id: ours.clone(),
                kind: Some(send_message_request::Kind::Note("hi".into())),
            },
        ))
        .await
        .unwrap_err();
    not_found_like_unknown(&e, &ours, &unknown);
    // Still running: the other tenant's cancel did nothing.
    assert_eq!(state(&stack, ACME, &ours).await, TaskState::Running);

    let listed = |key: &'static str| {
        let mut g = stack.gateway.clone();
        async move {
            g.list_tasks(with_key(key, ListTasksRequest::default()))
                .await
                .unwrap()
                .into_inner()
                .summaries
                .into_iter()
                .map(|s| s.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(ACME).await, std::slice::from_ref(&ours));
    assert_eq!(listed(GLOBEX).await, std::slice::from_ref(&theirs));

    // The HTTP face asks the same question with the same key.
    let http = super::http::client();
    let get = |key: &str, id: &str| {
        http.get(format!("{}/v1/tasks/{id}", stack.http))
            .header("authorization", format!("Bearer {key}"))
            .send()
    };
    assert_eq!(get(GLOBEX, &ours).await.unwrap().status(), 404);
    assert_eq!(get(ACME, &ours).await.unwrap().status(), 200);
    let anonymous = http
        .get(format!("{}/v1/tasks", stack.http))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    let task = g
        .cancel_task(with_key(
            ACME,
            CancelTaskRequest {
                task_id: ours.clone(),
                reason: "done".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (task.state, task.tenant.as_str()),
        (TaskState::Cancelled as i32, "acme")
    );
    g.cancel_task(with_key(
        GLOBEX,
        CancelTaskRequest {
            task_id: theirs,
            reason: "done".into(),
        },
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_restricted_to_a_device_leases_only_that_device() {
    let Some(shared) = shared() else { return };
    let only = shared.serials[2].as_str();
    let other = shared.serials[3].as_str();
    let keys = [entry(ACME, "acme", &[only]), entry(GLOBEX, "globex", &[])];
    let (stack, _dir) = keyed_stack(shared, &keys).await;
    let mut g = stack.gateway.clone();

    let e = g
        .submit_task(with_key(ACME, request("slow work", other)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains(other), "{}", e.message());

    let id = g
        .submit_task(with_key(ACME, request("slow work", "")))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_running(&stack, ACME, &id).await;
    let task = g
        .get_task(with_key(
            ACME,
            GetTaskRequest {
                task_id: id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.device, only);
    // Its one device is taken: another task for any device is refused, though others are free.
    let e = g
        .submit_task(with_key(ACME, request("slow work", "")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("leased"), "{}", e.message());

    let devices = |key: &'static str| {
        let mut g = stack.gateway.clone();
        async move {
            g.list_devices(with_key(key, ListDevicesRequest {}))
                .await
                .unwrap()
                .into_inner()
                .devices
                .into_iter()
                .map(|d| d.serial)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(devices(ACME).await, [only.to_owned()]);
    assert_eq!(devices(GLOBEX).await.len(), FLEET);
    cancel(&mut g, ACME, id).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_malformed_unknown_or_expired_key_is_unauthenticated() {
    let Some(shared) = shared() else { return };
    let expired = key_entry("dmk_expired", "acme", &[], &[], Some(1)).unwrap();
    let (stack, _dir) = keyed_stack(shared, &[entry(ACME, "acme", &[]), expired]).await;
    let mut g = stack.gateway.clone();
    let mut malformed = Request::new(ListTasksRequest::default());
    malformed
        .metadata_mut()
        .insert("authorization", "Basic dmk_secret".parse().unwrap());
    let refusals = [
        (
            g.list_tasks(ListTasksRequest::default()).await.unwrap_err(),
            "no API key",
        ),
        (g.list_tasks(malformed).await.unwrap_err(), "malformed"),
        (
            g.list_tasks(with_key("dmk_secret", ListTasksRequest::default()))
                .await
                .unwrap_err(),
            "not known",
        ),
        (
            g.list_tasks(with_key("dmk_expired", ListTasksRequest::default()))
                .await
                .unwrap_err(),
            "expired",
        ),
        (
            g.submit_task(with_key("dmk_secret", request("x", "")))
                .await
                .unwrap_err(),
            "not known",
        ),
        (
            g.list_devices(ListDevicesRequest {}).await.unwrap_err(),
            "no API key",
        ),
    ];
    for (e, says) in refusals {
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        let m = e.message();
        assert!(
            m.contains(says) && m.contains("authorization: Bearer"),
            "{m}"
        );
        assert!(
            !m.contains("dmk_secret") && !m.contains("dmk_expired"),
            "{m}"
        );
    }
    g.list_tasks(with_key(ACME, ListTasksRequest::default()))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_keys_file_takes_effect_without_a_restart() {
    let Some(shared) = shared() else { return };
    let (stack, dir) = keyed_stack(shared, &[entry(ACME, "acme", &[])]).await;
    let path = dir.path().join("keys.toml");
    let code = |key: &'static str| {
        let mut g = stack.gateway.clone();
        async move {
            match g
                .list_tasks(with_key(key, ListTasksRequest::default()))
                .await
            {
                Ok(_) => Code::Ok,
                Err(e) => e.code(),
            }
        }
    };
    assert_eq!(code(GLOBEX).await, Code::Unauthenticated);
    write_keys(&path, &[entry(GLOBEX, "globex", &[])]);
    let mut waited = 0;
    while code(GLOBEX).await != Code::Ok {
        assert!(waited < 200, "the new key was not taken within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert_eq!(
        code(ACME).await,
        Code::Unauthenticated,
        "the removed key still works"
    );

    // A broken file keeps the keys in use until a good one replaces it.
    std::fs::write(
        &path,
        format!("[[key]]\ntenant = \"x\"\nsha256 = \"{}", hash_key("k")),
    )
    .unwrap();
    write_keys(
        &path.with_file_name("next.toml"),
        &[entry(GLOBEX, "globex", &[]), entry(ACME, "acme", &[])],
    );
    let mut waited = 0;
    let mut renamed = false;
    while code(ACME).await != Code::Ok {
        assert_eq!(
            code(GLOBEX).await,
            Code::Ok,
            "a broken keys file dropped the keys"
        );
        assert!(
            waited < 200,
            "the repaired keys file was not taken within 10 s"
        );
        if waited == 30 && !renamed {
            std::fs::rename(path.with_file_name("next.toml"), &path).unwrap();
            renamed = true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(renamed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_task_of_a_restricted_key_waits_for_its_own_device() {
    let Some(shared) = shared() else { return };
    let only = shared.serials[7].as_str();
    let (stack, _dir) = keyed_stack(shared, &[entry(ACME, "acme", &[only])]).await;
    let mut g = stack.gateway.clone();
    let first = g
        .submit_task(with_key(ACME, request("slow work", only)))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_running(&stack, ACME, &first).await;
    let mut queued = request("answer: queued", "");
    queued.wait_for_device = true;
    let second = g
        .submit_task(with_key(ACME, queued))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    // Every other device is free, yet it waits for its own.
    let waiting = poll_task(&g, &second, |t| {
        assert_eq!(t.device, "", "the queued task took another device");
        t.last_seq >= 2
    })
    .await;
    assert!(waiting.is_some(), "the queued task never said it waits");
    cancel(&mut g, ACME, first).await;
    let device = poll_task(&g, &second, |t| !t.device.is_empty())
        .await
        .map(|t| t.device)
        .unwrap_or_default();
    assert_eq!(device, only);
}

/// ACME's task `id`, read every 25 ms until `done` holds (within 10 s); `None` when it never did.
async fn poll_task(
    g: &droidmesh_proto::v1::gateway_client::GatewayClient<tonic::transport::Channel>,
    id: &str,
    mut done: impl FnMut(&droidmesh_proto::v1::Task) -> bool,
) -> Option<droidmesh_proto::v1::Task> {
    let mut g = g.clone();
    for _ in 0..400 {
        let t = g
            .get_task(with_key(
                ACME,
                GetTaskRequest {
                    task_id: id.to_owned(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        if done(&t) {
            return Some(t);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    None
}
