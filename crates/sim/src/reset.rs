//! Starting a phone over: everything a task can change (settings, files, records such as the
//! clock's timer and stopwatch, the clipboard, screens, fields, running apps, the log) back to
//! how the phone first started, keeping what it is (its serial,
//! its apps, its installed companion apps and its timing), as a fresh emulator snapshot would.
use crate::device::Device;

impl Device {
    /// The phone as it first started, with the same serial and options.
    pub fn reset(&mut self) {
        let serial = self.props.get("ro.serialno").cloned().unwrap_or_default();
        let mut fresh = Device::new(self.apps.clone(), &serial);
        fresh.realtime = self.realtime;
        fresh.dump_cost = self.dump_cost;
        fresh.set_portal(self.portal);
        fresh.set_adb_keyboard(self.adb_keyboard);
        *self = fresh;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::apps::AppSet;
    use crate::device::Device;
    use crate::shell;

    #[test]
    fn a_reset_phone_forgets_what_was_done_and_keeps_what_it_is() {
        let mut dev = Device::new(Arc::new(AppSet::default_set().unwrap()), "sim-1");
        dev.set_portal(true);
        let state = Arc::new(Mutex::new(dev));
        let fresh_wifi = shell::run(&state, "settings get global wifi_on").stdout;
        for command in [
            "settings put global wifi_on 1",
            "echo hi > /sdcard/note.txt",
            "mkdir -p /sdcard/Notes/Work",
            "am start -n com.android.settings/.Settings",
        ] {
            assert_eq!(shell::run(&state, command).code, 0, "{command}");
        }
        let focus = |s: &Arc<Mutex<Device>>| s.lock().unwrap().focus_component();
        let before = focus(&state);
        state.lock().unwrap().reset();
        assert_eq!(
            shell::run(&state, "settings get global wifi_on").stdout,
            fresh_wifi
        );
        assert_ne!(shell::run(&state, "cat /sdcard/note.txt").code, 0);
        let notes = shell::run(&state, "ls /sdcard/Notes").stdout;
        assert!(!String::from_utf8_lossy(&notes).contains("Work"));
        assert_ne!(focus(&state), before);
        let dev = state.lock().unwrap();
        assert_eq!(dev.props["ro.serialno"], "sim-1");
        assert!(dev.portal);
    }
}
