//! Transport faults injected with a fake device: a device that stalls mid-call fails within
//! the command timeout, and direct-TCP connections are reused across calls.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{GetStateRequest, ListPackagesRequest};
use tonic::Code;

use super::common::*;
use super::fake_adbd::{Reply, start};

const DUMP: &str = include_str!("../../testdata/settings_dump.xml");

fn phone(cmd: &str) -> Reply {
    // An observation (one script, sections ended by marker lines) as a phone's shell runs it.
    if let Some(nonce) = cmd
        .split("@@dm-")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
    {
        let out = format!(
            "{DUMP}\n@@dm-{nonce} ui 0@@\n  mCurrentFocus=Window{{1 u0 com.android.settings/com.android.settings.Settings}}\n@@dm-{nonce} window 0@@\n  mInputShown=false\n@@dm-{nonce} ime 0@@\n"
        );
        return Reply::Output(out.into_bytes());
    }
    let out: &str = match cmd {
        "uiautomator dump /dev/tty" => DUMP,
        "dumpsys window" => {
            "  mCurrentFocus=Window{1 u0 com.android.settings/com.android.settings.Settings}\n"
        }
        "dumpsys input_method" => "  mInputShown=false\n",
        "wm size" => "Physical size: 1080x2400\n",
        "wm density" => "Physical density: 420\n",
        "pm list packages -3" => "package:com.droidmesh.notes\n",
        _ => "",
    };
    Reply::Output(out.as_bytes().to_vec())
}

/// A fake phone that never answers the commands `stalls` picks and answers the others as
/// [`phone`] does; the count is of the commands it left unanswered.
async fn stalling(stalls: fn(&str) -> bool) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let addr = start(Arc::new(move |cmd: &str| {
        if stalls(cmd) {
            seen.fetch_add(1, Ordering::SeqCst);
            Reply::Stall
        } else {
            phone(cmd)
        }
    }))
    .await;
    (addr, count)
}

#[tokio::test(flavor = "multi_thread")]
async fn state_over_direct_tcp_from_a_scripted_device() {
    let addr = start(Arc::new(phone)).await;
    let mut client = serve(direct_config(&addr.to_string())).await;
    let st = state(&mut client, &addr.to_string()).await;
    assert_eq!(st.elements.len(), 11);
    let phone = st.phone.unwrap();
    assert_eq!(phone.package, "com.android.settings");
    assert_eq!(
        phone.activity,
        "com.android.settings/com.android.settings.Settings"
    );
    assert_eq!(phone.focused_index, Some(7));
    let screen = st.screen.unwrap();
    assert_eq!(
        (screen.width, screen.height, screen.density_dpi),
        (1080, 2400, 420)
    );
    let pkgs = client
        .list_packages(ListPackagesRequest {
            serial: addr.to_string(),
            include_system: false,
        })
        .await
        .unwrap()
        .into_inner()
        .packages;
    assert_eq!(pkgs.len(), 1);
    assert_eq!(
        (
            pkgs[0].package.as_str(),
            pkgs[0].label.as_str(),
            pkgs[0].system
        ),
        ("com.droidmesh.notes", "Notes", false)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_device_is_unavailable_within_the_command_timeout() {
    let (addr, calls) = stalling(|cmd| cmd.starts_with("uiautomator")).await;
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 500,
        ..direct_config(&addr.to_string())
    })
    .await;
    let started = Instant::now();
    let err = client
        .get_state(GetStateRequest {
            serial: addr.to_string(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("did not finish within 500 ms"),
        "{}",
        err.message()
    );
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(calls.load(Ordering::SeqCst) >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_phone_that_never_answers_its_screen_size_holds_up_one_listing_only() {
    let (addr, asked) = stalling(|cmd| cmd == "wm size").await;
    let mut client = serve(DeviceConfig {
        command_timeout_ms: 2_000,
        ..direct_config(&addr.to_string())
    })
    .await;
    // The first listing asks for the screen size and waits for it, up to the command timeout.
    let started = Instant::now();
    assert_eq!(devices(&mut client).await.len(), 1);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1_900), "{took:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // Later listings do not ask again, so they do not wait.
    let started = Instant::now();
    assert_eq!(devices(&mut client).await.len(), 1);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the screen size was asked again"
    );
}
