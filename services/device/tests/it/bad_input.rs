//! Bad input to every public DeviceService RPC, case by case: the status code and the words of
//! the message a client gets. Runs against its own simulated phone (through Debian's adb), with
//! a lease held, so each case fails for its own reason and not for a missing lease.
use std::future::Future;
use std::pin::Pin;

use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, ConnectDeviceRequest, DragRequest, GetStateRequest, LeaseRef,
    ListPackagesRequest, LongPressRequest, Point, PressKeyRequest, ReleaseLeaseRequest,
    RenewLeaseRequest, StartAppRequest, SwipeRequest, TakeScreenshotRequest, TapRequest,
    TypeTextRequest, long_press_request, press_key_request, start_app_request, tap_request,
};
use tonic::{Code, Status};

use super::common::*;
use super::sims::*;

type Call = Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>;

/// Runs one RPC with `client` and forgets the answer.
macro_rules! call {
    ($client:expr, $rpc:ident, $req:expr) => {{
        let mut c = $client.clone();
        let req = $req;
        Box::pin(async move { c.$rpc(req).await.map(|_| ()) }) as Call
    }};
}

#[tokio::test(flavor = "multi_thread")]
async fn every_rpc_refuses_bad_input_with_a_clear_status() {
    let Some(shared) = shared() else { return };
    let fleet = start_fleet(1).await;
    let serial = shared.adb.connect(fleet.addrs()[0]).unwrap();
    // Attaching phones by address on, so ConnectDevice looks at what it is sent.
    let mut client = serve(DeviceConfig {
        allow_connect: true,
        ..config(shared)
    })
    .await;
    let lease = acquire(&mut client, &serial, "bad-input").await;
    let n = state(&mut client, &serial).await.elements.len();
    let good = lref(&lease);
    let wrong_id = Some(LeaseRef {
        serial: serial.clone(),
        lease_id: "lease-that-never-was".into(),
    });
    let p = |x, y| Some(Point { x, y });
    let c = &client;
    let s = serial.clone();
    let cases: Vec<(&str, Call, Code, String)> = vec![
        (
            "connect: empty address",
            call!(c, connect_device, ConnectDeviceRequest { address: String::new(), transport: 0 }),
            Code::InvalidArgument,
            "address must be ip:port such as 192.168.1.20:5555, got ''".into(),
        ),
        (
            "connect: not an address",
            call!(c, connect_device, ConnectDeviceRequest { address: "no such host:x".into(), transport: 0 }),
            Code::InvalidArgument,
            "no such host:x".into(),
        ),
        (
            "connect: unknown transport",
            call!(c, connect_device, ConnectDeviceRequest { address: "127.0.0.1:5555".into(), transport: 77 }),
            Code::InvalidArgument,
            "unknown transport 77".into(),
        ),
        (
            "acquire: empty holder",
            call!(c, acquire_lease, AcquireLeaseRequest { serial: s.clone(), holder: String::new(), ttl_ms: 0 }),
            Code::InvalidArgument,
            "holder must name who takes the lease".into(),
        ),
        (
            "acquire: unknown serial",
            call!(c, acquire_lease, AcquireLeaseRequest { serial: "no-such-phone".into(), holder: "h".into(), ttl_ms: 0 }),
            Code::NotFound,
            "device no-such-phone is not known".into(),
        ),
        (
            "acquire: already leased",
            call!(c, acquire_lease, AcquireLeaseRequest { serial: s.clone(), holder: "other".into(), ttl_ms: 0 }),
            Code::FailedPrecondition,
            "is leased by bad-input until".into(),
        ),
        (
            "renew: no lease",
            call!(c, renew_lease, RenewLeaseRequest { lease: None, ttl_ms: 0 }),
            Code::InvalidArgument,
            "lease is required".into(),
        ),
        (
            "renew: unknown lease id",
            call!(c, renew_lease, RenewLeaseRequest { lease: wrong_id.clone(), ttl_ms: 0 }),
            Code::FailedPrecondition,
            "is no longer valid: the device is held under another lease now".into(),
        ),
        (
            "release: no lease",
            call!(c, release_lease, ReleaseLeaseRequest { lease: None }),
            Code::InvalidArgument,
            "lease is required".into(),
        ),
        (
            "state: empty serial",
            call!(c, get_state, GetStateRequest { serial: String::new(), ..GetStateRequest::default() }),
            Code::InvalidArgument,
            "serial is empty; pass a serial from ListDevices".into(),
        ),
        (
            "state: unknown serial",
            call!(c, get_state, GetStateRequest { serial: "no-such-phone".into(), ..GetStateRequest::default() }),
            Code::NotFound,
            "device no-such-phone is not known".into(),
        ),
        (
            "screenshot: unknown serial",
            call!(c, take_screenshot, TakeScreenshotRequest { serial: "no-such-phone".into(), max_side: 0, masks: Vec::new() }),
            Code::NotFound,
            "device no-such-phone is not known".into(),
        ),
        (
            "packages: empty serial",
            call!(c, list_packages, ListPackagesRequest { serial: String::new(), include_system: false }),
            Code::InvalidArgument,
            "serial is empty; pass a serial from ListDevices".into(),
        ),
        (
            "tap: no lease",
            call!(c, tap, TapRequest { lease: None, target: Some(tap_request::Target::Index(0)) }),
            Code::InvalidArgument,
            "lease is required for actions".into(),
        ),
        (
            "tap: wrong lease id",
            call!(c, tap, TapRequest { lease: wrong_id.clone(), target: Some(tap_request::Target::Index(0)) }),
            Code::FailedPrecondition,
            "is no longer valid: the device is held under another lease now".into(),
        ),
        (
            "tap: no target",
            call!(c, tap, TapRequest { lease: good.clone(), target: None }),
            Code::InvalidArgument,
            "target is required: an element index or a point".into(),
        ),
        (
            "tap: index out of range",
            call!(c, tap, TapRequest { lease: good.clone(), target: Some(tap_request::Target::Index(n as u32 + 7)) }),
            Code::InvalidArgument,
            format!("index {} out of range: the screen has {n} elements", n + 7),
        ),
        (
            "tap: point off the screen",
            call!(c, tap, TapRequest { lease: good.clone(), target: Some(tap_request::Target::Point(Point { x: i32::MIN, y: 5 })) }),
            Code::InvalidArgument,
            "point (-2147483648, 5) is off the screen".into(),
        ),
        (
            "long press: overlong duration",
            call!(c, long_press, LongPressRequest { lease: good.clone(), target: Some(long_press_request::Target::Point(Point { x: 5, y: 5 })), duration_ms: u32::MAX }),
            Code::InvalidArgument,
            format!("duration_ms must be at most 10000, got {}", u32::MAX),
        ),
        (
            "swipe: no start",
            call!(c, swipe, SwipeRequest { lease: good.clone(), start: None, end: p(5, 5), duration_ms: 100 }),
            Code::InvalidArgument,
            "start point is required".into(),
        ),
        (
            "swipe: end off the screen",
            call!(c, swipe, SwipeRequest { lease: good.clone(), start: p(5, 5), end: p(5, 1_000_000), duration_ms: 100 }),
            Code::InvalidArgument,
            "point (5, 1000000) is off the screen".into(),
        ),
        (
            "swipe: overlong duration",
            call!(c, swipe, SwipeRequest { lease: good.clone(), start: p(5, 5), end: p(5, 50), duration_ms: u32::MAX }),
            Code::InvalidArgument,
            format!("duration_ms must be at most 10000, got {}", u32::MAX),
        ),
        (
            "drag: no end",
            call!(c, drag, DragRequest { lease: good.clone(), start: p(5, 5), end: None, duration_ms: 100 }),
            Code::InvalidArgument,
            "end point is required".into(),
        ),
        (
            "type: non-ASCII without a keyboard app",
            call!(c, type_text, TypeTextRequest { lease: good.clone(), text: "naïve".into(), index: None, clear: false, sensitive: false }),
            Code::FailedPrecondition,
            "accepts ASCII only; got 'ï' at position 2".into(),
        ),
        (
            "type: a tab without a keyboard app",
            call!(c, type_text, TypeTextRequest { lease: good.clone(), text: "a\tb".into(), index: None, clear: false, sensitive: false }),
            Code::FailedPrecondition,
            "cannot type a tab; got '\\t' at position 1".into(),
        ),
        (
            "type: a control character",
            call!(c, type_text, TypeTextRequest { lease: good.clone(), text: "a\u{7}".into(), index: None, clear: false, sensitive: false }),
            Code::InvalidArgument,
            "cannot type control characters; got '\\u{7}' at position 1".into(),
        ),
        (
            "type: oversized text",
            call!(c, type_text, TypeTextRequest { lease: good.clone(), text: "a".repeat(1 << 20), index: None, clear: false, sensitive: false }),
            Code::InvalidArgument,
            "text is 1048576 characters; at most 16384".into(),
        ),
        (
            "type: index out of range",
            call!(c, type_text, TypeTextRequest { lease: good.clone(), text: "a".into(), index: Some(n as u32 + 7), clear: false, sensitive: false }),
            Code::InvalidArgument,
            "out of range: the screen has".into(),
        ),
        (
            "key: none given",
            call!(c, press_key, PressKeyRequest { lease: good.clone(), key_spec: None }),
            Code::InvalidArgument,
            "key or keycode is required".into(),
        ),
        (
            "key: unknown enum value",
            call!(c, press_key, PressKeyRequest { lease: good.clone(), key_spec: Some(press_key_request::KeySpec::Key(999)) }),
            Code::InvalidArgument,
            "key 999 is not a known Key".into(),
        ),
        (
            "key: unspecified",
            call!(c, press_key, PressKeyRequest { lease: good.clone(), key_spec: Some(press_key_request::KeySpec::Key(0)) }),
            Code::InvalidArgument,
            "key 0 is not a known Key".into(),
        ),
        (
            "key: keycode out of range",
            call!(c, press_key, PressKeyRequest { lease: good.clone(), key_spec: Some(press_key_request::KeySpec::Keycode(1_000_000)) }),
            Code::InvalidArgument,
            "between 1 and 400, got 1000000".into(),
        ),
        (
            "start: no app",
            call!(c, start_app, StartAppRequest { lease: good.clone(), app: None, activity: String::new() }),
            Code::InvalidArgument,
            "package or label is required".into(),
        ),
        (
            "start: empty package",
            call!(c, start_app, StartAppRequest { lease: good.clone(), app: Some(start_app_request::App::Package(String::new())), activity: String::new() }),
            Code::InvalidArgument,
            "package must be a Java package name such as com.android.settings, got ''".into(),
        ),
        (
            "start: shell words in the package",
            call!(c, start_app, StartAppRequest { lease: good.clone(), app: Some(start_app_request::App::Package("a; reboot".into())), activity: String::new() }),
            Code::InvalidArgument,
            "got 'a; reboot'".into(),
        ),
        (
            "start: shell words in the activity",
            call!(c, start_app, StartAppRequest { lease: good.clone(), app: Some(start_app_request::App::Package("com.android.settings".into())), activity: ".Settings$(reboot)".into() }),
            Code::InvalidArgument,
            "activity must look like .MainActivity or com.example.MainActivity, got '.Settings$(reboot)'".into(),
        ),
        (
            "start: unknown label",
            call!(c, start_app, StartAppRequest { lease: good.clone(), app: Some(start_app_request::App::Label("No Such App".into())), activity: String::new() }),
            Code::InvalidArgument,
            "has the label 'No Such App'; ListPackages shows what is installed".into(),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, call, code, says) in cases {
        match call.await {
            Ok(()) => wrong.push(format!("{name}: accepted")),
            Err(e) if e.code() != code || !e.message().contains(&says) => wrong.push(format!(
                "{name}: {:?} '{}' (want {code:?} saying '{says}')",
                e.code(),
                e.message()
            )),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The phone is still leased to its holder and answers.
    assert_eq!(state(&mut client, &serial).await.elements.len(), n);
}
