//! What the app-screen tests share: a phone with the default apps, its shell, and finding,
//! tapping and reading the nodes of the screen in front.
#![allow(dead_code)]
use std::sync::{Arc, Mutex};

use droidmesh_sim::apps::AppSet;
use droidmesh_sim::device::Device;
use droidmesh_sim::shell::run;

pub fn phone() -> Mutex<Device> {
    Mutex::new(Device::new(Arc::new(AppSet::default_set().unwrap()), "sim"))
}

/// Runs `line` on the phone's shell, which must succeed; its output.
pub fn sh(dev: &Mutex<Device>, line: &str) -> String {
    let out = run(dev, line);
    assert_eq!(
        out.code,
        0,
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The middle (x, y) and the left and right edges of the first node whose text or resource
/// id (after `:id/`) is `what`.
pub fn spot(dev: &Mutex<Device>, what: &str) -> (i32, i32, i32, i32) {
    let d = dev.lock().unwrap();
    let view = d.view();
    let node = view
        .nodes
        .iter()
        .find(|n| n.text == what || n.resource_id.ends_with(&format!(":id/{what}")))
        .unwrap_or_else(|| {
            let shown: Vec<&str> = view.nodes.iter().map(|n| n.text.as_str()).collect();
            panic!("no {what:?} on the screen; it shows {shown:?}")
        });
    let b = node.bounds;
    (
        (b.left + b.right) / 2,
        (b.top + b.bottom) / 2,
        b.left,
        b.right,
    )
}

/// Taps the middle of the node [`spot`] finds.
pub fn tap(dev: &Mutex<Device>, what: &str) {
    let (x, y, _, _) = spot(dev, what);
    sh(dev, &format!("input tap {x} {y}"));
}

/// The texts of the screen's nodes.
pub fn texts(dev: &Mutex<Device>) -> Vec<String> {
    let d = dev.lock().unwrap();
    d.view().nodes.iter().map(|n| n.text.clone()).collect()
}

/// Whether a node of the screen reads `text`.
pub fn shows(dev: &Mutex<Device>, text: &str) -> bool {
    texts(dev).iter().any(|t| t == text)
}
