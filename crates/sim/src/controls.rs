//! What the setting controls do when touched: a switch, a radio button and a slider all end in
//! a setting changed, at once or after the app's switch delay when the simulator runs in real
//! time ([`crate::apps::Timing::switch_ms`]).
use std::time::{Duration, Instant};

use crate::device::{Device, PENDING_KEPT};
use crate::view::Tap;

impl Device {
    /// Sets a setting as a control does: at once, or after the app's switch delay (the oldest
    /// waiting change lands at once when [`PENDING_KEPT`] are waiting).
    pub(crate) fn put_setting(&mut self, setting: String, value: String) {
        let delay = self.timing().switch_ms;
        if delay == 0 {
            self.settings.insert(setting, value);
            return;
        }
        if self.pending.len() >= PENDING_KEPT
            && let Some((_, key, value)) = self.pending.pop_front()
        {
            self.settings.insert(key, value);
        }
        self.pending.push_back((
            Instant::now() + Duration::from_millis(delay),
            setting,
            value,
        ));
    }

    /// A slider touched at `x`: its setting gets the value at that point of the track.
    pub(crate) fn slide(&mut self, tap: &Tap, x: i32) {
        let Tap::Slide {
            setting,
            min,
            max,
            left,
            right,
        } = tap
        else {
            return;
        };
        let width = f64::from((right - left - 1).max(1));
        let at = (f64::from(x - left) / width).clamp(0.0, 1.0);
        let value = *min + ((*max - *min) as f64 * at).round() as i64;
        self.put_setting(setting.clone(), value.to_string());
    }
}
