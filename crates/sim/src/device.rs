//! The state of one simulated phone (screens, settings, fields, files, properties) and what
//! touches and keys do to it. Everything here is deterministic: same inputs, same screens.
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::apps::{Action, AppSet};
use crate::clock::Clock;
use crate::fs::Fs;
use crate::layout;
use crate::procs::Procs;
use crate::records::Records;
use crate::view::{NAV_BAR_TOP, Tap, View, WIDTH};

/// One entry of the back stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub app: usize,
    pub screen: usize,
    /// The `_id` of the list record the screen was opened from (kept by screens opened from
    /// it, such as an edit form).
    pub item: Option<usize>,
    pub scroll: i32,
}

#[derive(Debug)]
pub struct Device {
    pub apps: Arc<AppSet>,
    pub props: BTreeMap<String, String>,
    /// Settings keyed `namespace:key`.
    pub settings: BTreeMap<String, String>,
    pub fs: Fs,
    /// Back stack; the launcher's home screen is always at the bottom.
    pub stack: Vec<Frame>,
    /// Text of editable fields and status lines, keyed by [`Device::field_key`].
    pub fields: BTreeMap<String, String>,
    /// Key of the focused field.
    pub focus: Option<String>,
    pub keyboard: bool,
    /// The last screenshot and the dump it was drawn from.
    pub shot_cache: Option<(String, Arc<Vec<u8>>)>,
    /// What `logcat` shows: the last [`LOG_KEPT`] events (app starts, touches, keys, text).
    pub log: VecDeque<LogEntry>,
    log_seq: u64,
    /// Running apps.
    pub procs: Procs,
    /// Where `input motionevent DOWN` put a finger that has not been lifted.
    pub pointer: Option<(i32, i32)>,
    /// Whether screens change with the apps' delays ([`crate::apps::Timing`]) or at once.
    pub realtime: bool,
    /// What one `uiautomator dump` costs, waited before it dumps.
    pub dump_cost: Duration,
    /// Whether the companion accessibility service (`com.mobilerun.portal`) is installed and
    /// answers `content query`.
    pub portal: bool,
    /// Whether ADBKeyBoard (`com.android.adbkeyboard`) is installed ([`crate::keyboards`]).
    pub adb_keyboard: bool,
    /// The screen change in progress, if any (only in real time).
    pub transition: Option<Transition>,
    /// Setting changes that land later (switches with a delay), oldest first, at most
    /// [`PENDING_KEPT`].
    pub pending: VecDeque<(Instant, String, String)>,
    /// This phone's copy of its apps' record sets ([`crate::records`]).
    pub records: Records,
    /// The phone's clock ([`crate::clock`]).
    pub clock: Clock,
    /// The clipboard's text; `None` while empty ([`crate::clipboard`]).
    pub clipboard: Option<String>,
}

/// Delayed setting changes kept; one more applies the oldest at once.
pub const PENDING_KEPT: usize = 64;

/// A screen change in progress: the starting window until `starting_until`, then the new
/// screen sliding in until `slide_until`, then its spinner until
/// `loading_until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub starting_until: Instant,
    pub slide_until: Instant,
    pub loading_until: Instant,
}

/// What the screen shows at one moment of a [`Transition`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// The app's starting window (icon on a blank window).
    Starting,
    /// The new screen, `left` pixels right of its place.
    Sliding {
        left: i32,
    },
    /// The new screen's chrome and a progress spinner.
    Loading,
    Idle,
}

impl Transition {
    pub fn phase(&self, now: Instant) -> Phase {
        if now < self.starting_until {
            Phase::Starting
        } else if now < self.slide_until {
            let total = self
                .slide_until
                .duration_since(self.starting_until)
                .as_secs_f64();
            let left = self.slide_until.duration_since(now).as_secs_f64();
            let frac = if total > 0.0 { left / total } else { 0.0 };
            // Android's decelerating curve: most of the distance early.
            Phase::Sliding {
                left: (f64::from(crate::view::WIDTH) * frac * frac).round() as i32,
            }
        } else if now < self.loading_until {
            Phase::Loading
        } else {
            Phase::Idle
        }
    }

    /// Whether a window animation runs (what `dumpsys window` reports as the app transition).
    pub fn animating(&self, now: Instant) -> bool {
        now < self.slide_until
    }
}

/// Log entries kept, oldest dropped first.
pub const LOG_KEPT: usize = 2_000;

/// One `logcat` line. Time is the simulator's own: 10 ms per event from 01-01 00:00:00, so
/// the same inputs give the same log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub seq: u64,
    pub pid: u32,
    pub priority: char,
    pub tag: &'static str,
    pub message: String,
}

/// The process id the log names (system_server).
pub const PID_SYSTEM: u32 = 1234;

/// Android key codes the simulator acts on.
pub mod keycode {
    pub const HOME: u32 = 3;
    pub const BACK: u32 = 4;
    pub const ENTER: u32 = 66;
    pub const DEL: u32 = 67;
    pub const SPACE: u32 = 62;
    pub const TAB: u32 = 61;
}

impl Device {
    pub fn new(apps: Arc<AppSet>, serial: &str) -> Self {
        let mut props = BTreeMap::new();
        for (k, v) in [
            ("ro.product.model", "DroidMesh Sim"),
            ("ro.product.name", "droidmesh_sim"),
            ("ro.product.device", "sim"),
            ("ro.product.manufacturer", "droidmesh"),
            ("ro.product.brand", "droidmesh"),
            ("ro.build.version.release", "14"),
            ("ro.build.version.sdk", "34"),
            ("ro.build.display.id", "DMSIM.240101.001"),
            ("ro.build.type", "user"),
            ("ro.build.tags", "release-keys"),
            ("ro.debuggable", "0"),
            ("ro.secure", "1"),
            ("ro.adb.secure", "1"),
            ("ro.hardware", "sim"),
            ("ro.product.cpu.abi", "arm64-v8a"),
            ("ro.build.version.security_patch", "2026-01-05"),
            (
                "ro.build.fingerprint",
                "droidmesh/sim/sim:14/DMSIM.240101.001/1:user/release-keys",
            ),
            ("ro.sf.lcd_density", "420"),
            ("ro.kernel.qemu", "0"),
            ("sys.boot_completed", "1"),
            ("persist.sys.locale", "en-US"),
            ("ro.product.locale", "en-US"),
            ("ro.build.version.codename", "REL"),
            ("init.svc.bootanim", "stopped"),
            ("sim.battery.level", "87"),
        ] {
            props.insert(k.to_owned(), v.to_owned());
        }
        props.insert("ro.serialno".into(), serial.to_owned());
        let settings = apps.settings.clone();
        let records = Records::from_apps(&apps);
        Self {
            records,
            clock: Clock::start(),
            apps,
            props,
            settings,
            fs: Fs::new(),
            stack: vec![Frame {
                app: 0,
                screen: 0,
                item: None,
                scroll: 0,
            }],
            fields: BTreeMap::new(),
            focus: None,
            keyboard: false,
            shot_cache: None,
            log: VecDeque::new(),
            log_seq: 0,
            procs: Procs::new(),
            pointer: None,
            realtime: false,
            dump_cost: Duration::ZERO,
            portal: false,
            adb_keyboard: false,
            transition: None,
            pending: VecDeque::new(),
            clipboard: None,
        }
    }

    /// What the screen shows now.
    pub fn phase(&self) -> Phase {
        self.transition
            .map_or(Phase::Idle, |t| t.phase(Instant::now()))
    }

    /// Applies the delayed changes that are due and forgets a finished transition. Runs
    /// before every command reads or changes the device.
    pub fn tick(&mut self) {
        let now = Instant::now();
        while self.pending.front().is_some_and(|(due, _, _)| *due <= now) {
            if let Some((_, key, value)) = self.pending.pop_front() {
                self.settings.insert(key, value);
            }
        }
        if self.transition.is_some_and(|t| t.phase(now) == Phase::Idle) {
            self.transition = None;
        }
    }

    /// The timing of the app in front.
    pub(crate) fn timing(&self) -> crate::apps::Timing {
        if !self.realtime {
            return crate::apps::Timing::default();
        }
        self.apps
            .apps
            .get(self.top().app)
            .map(|a| a.timing)
            .unwrap_or_default()
    }

    /// Starts the change to the screen now on top: `starting` of starting window, `slide` of
    /// sliding in, then the screen's own loading time.
    fn begin(&mut self, starting: u64, slide: u64) {
        if !self.realtime {
            return;
        }
        let top = self.top();
        let loading = self
            .apps
            .apps
            .get(top.app)
            .and_then(|a| a.screens.get(top.screen))
            .map_or(0, |s| s.loading_ms);
        if starting + slide + loading == 0 {
            self.transition = None;
            return;
        }
        let now = Instant::now();
        let starting_until = now + Duration::from_millis(starting);
        let slide_until = starting_until + Duration::from_millis(slide);
        self.transition = Some(Transition {
            starting_until,
            slide_until,
            loading_until: slide_until + Duration::from_millis(loading),
        });
    }

    /// Adds a line to the event log.
    pub fn log(&mut self, priority: char, tag: &'static str, message: String) {
        self.log_seq += 1;
        if self.log.len() >= LOG_KEPT {
            self.log.pop_front();
        }
        self.log.push_back(LogEntry {
            seq: self.log_seq,
            pid: PID_SYSTEM,
            priority,
            tag,
            message,
        });
    }

    pub fn top(&self) -> Frame {
        self.stack.last().copied().unwrap_or(Frame {
            app: 0,
            screen: 0,
            item: None,
            scroll: 0,
        })
    }

    /// The key of field `id` on the current screen: per app, and per record for screens
    /// opened from a list row.
    pub fn field_key(&self, id: &str) -> String {
        let top = self.top();
        let package = self
            .apps
            .apps
            .get(top.app)
            .map_or("", |a| a.package.as_str());
        match top.item {
            Some(item) => format!("{package}/{id}#{item}"),
            None => format!("{package}/{id}"),
        }
    }

    pub fn view(&self) -> View {
        layout::build(self)
    }

    /// Package and fully qualified activity of the screen in front.
    pub fn focus_component(&self) -> (String, String) {
        let top = self.top();
        let Some(app) = self.apps.apps.get(top.app) else {
            return (String::new(), String::new());
        };
        let activity = app
            .screens
            .get(top.screen)
            .map_or("", |s| s.activity.as_str());
        let full = if activity.starts_with('.') {
            format!("{}{activity}", app.package)
        } else {
            activity.to_owned()
        };
        (app.package.clone(), full)
    }

    fn leave_screen(&mut self) {
        self.focus = None;
        self.keyboard = false;
        self.transition = None;
    }

    pub fn home(&mut self) {
        self.stack.truncate(1);
        self.leave_screen();
    }

    pub fn back(&mut self) {
        if self.keyboard {
            self.keyboard = false;
            return;
        }
        if self.stack.len() > 1 {
            self.stack.pop();
            self.leave_screen();
        }
    }

    /// Brings `app` to the front at `screen` (its first screen unless an activity was named).
    pub fn launch(&mut self, app: usize, screen: Option<usize>) {
        if app == 0 {
            self.home();
            return;
        }
        let top = self.top();
        let in_app = top.app == app;
        match screen {
            None if in_app => {}
            Some(s) if in_app && top.screen == s => {}
            _ => {
                self.procs.start(app);
                self.stack.truncate(1);
                self.stack.push(Frame {
                    app,
                    screen: 0,
                    item: None,
                    scroll: 0,
                });
                if let Some(s) = screen.filter(|s| *s != 0) {
                    self.stack.push(Frame {
                        app,
                        screen: s,
                        item: None,
                        scroll: 0,
                    });
                }
                self.leave_screen();
                self.open_form();
                let launch = self.timing().launch_ms;
                self.begin(launch, 0);
                let (package, activity) = self.focus_component();
                // Android shortens a component in its own package: `pkg/.Name`.
                let activity = match activity.strip_prefix(package.as_str()) {
                    Some(rest) if rest.starts_with('.') => rest.to_owned(),
                    _ => activity,
                };
                self.log(
                    'I',
                    "ActivityTaskManager",
                    format!("START u0 {{act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] flg=0x10200000 cmp={package}/{activity}}} from uid 2000"),
                );
            }
        }
    }

    /// Ends `app`'s process, as `am force-stop` does: its screens leave the back stack.
    pub fn force_stop(&mut self, app: usize) {
        if app != 0 && self.procs.stop(app) && self.top().app == app {
            self.home();
        }
    }

    pub fn tap(&mut self, x: i32, y: i32) {
        self.log('I', "droidmesh.input", format!("tap ({x}, {y})"));
        if y >= NAV_BAR_TOP {
            match x * 3 / WIDTH {
                0 => self.back(),
                1 => self.home(),
                _ => {}
            }
            return;
        }
        let view = self.view();
        let Some(node) = view.hit(x, y) else { return };
        let tap = node.tap.clone();
        match tap {
            Tap::None => {}
            Tap::Back => self.back(),
            Tap::Launch(app) => self.launch(app, None),
            Tap::Goto { screen, item } => {
                let app = self.top().app;
                self.stack.push(Frame {
                    app,
                    screen,
                    item,
                    scroll: 0,
                });
                self.leave_screen();
                self.open_form();
                let open = self.timing().open_ms;
                self.begin(0, open);
            }
            Tap::Toggle { setting, on, off } => {
                // A second tap before the first lands flips what the first will set.
                let now = self
                    .pending
                    .iter()
                    .rev()
                    .find(|(_, k, _)| *k == setting)
                    .map(|(_, _, v)| v.clone())
                    .or_else(|| self.settings.get(&setting).cloned())
                    .unwrap_or_default();
                let next = if now == on { off } else { on };
                self.put_setting(setting, next);
            }
            Tap::Set { setting, value } => self.put_setting(setting, value),
            slide @ Tap::Slide { .. } => self.slide(&slide, x),
            Tap::Focus(key) => {
                self.focus = Some(key);
                self.keyboard = true;
            }
            Tap::Action(action) => {
                self.act(&action);
            }
        }
    }

    /// Does what a button or row says; `false` when it failed (a sequence stops there).
    fn act(&mut self, action: &Action) -> bool {
        match action {
            Action::Seq(steps) => return steps.iter().all(|a| self.act(a)),
            Action::Need { .. }
            | Action::AddRecord { .. }
            | Action::PutRecord { .. }
            | Action::UpdateRecord { .. }
            | Action::DeleteRecord => return self.act_on_records(action),
            // A button's back closes its screen even while the keyboard shows (a form's Save).
            Action::Back => {
                self.keyboard = false;
                self.back();
            }
            Action::Clear { field } => {
                let key = self.field_key(field);
                self.fields.insert(key, String::new());
            }
            Action::Copy { template } => {
                let text = self.expand(template);
                self.copy(&text);
            }
            Action::Save { field, path } => {
                let key = self.field_key(field);
                let text = self.fields.get(&key).cloned().unwrap_or_default();
                let status = match self.fs.write(path, text.into_bytes(), false) {
                    Ok(()) => format!("Saved to {path}"),
                    Err(e) => format!("Could not save: {e}"),
                };
                let status_key = self.field_key("status");
                self.fields.insert(status_key, status);
            }
            Action::Append { field, target } => {
                let key = self.field_key(field);
                let text = self.fields.insert(key, String::new()).unwrap_or_default();
                if !text.is_empty() {
                    let target_key = self.field_key(target);
                    let line = self.fields.entry(target_key).or_default();
                    if !line.is_empty() {
                        line.push('\n');
                    }
                    line.push_str(&text);
                }
            }
        }
        true
    }

    /// A press without movement held for `duration_ms`.
    pub fn long_press(&mut self, x: i32, y: i32) {
        // Long press focuses text fields (and selects nothing); elsewhere it does nothing.
        let view = self.view();
        if let Some(Tap::Focus(key)) = view.hit(x, y).map(|n| n.tap.clone()) {
            self.focus = Some(key);
            self.keyboard = true;
        }
    }

    pub fn swipe(&mut self, x1: i32, y1: i32, x2: i32, y2: i32, duration_ms: u64) {
        self.log(
            'I',
            "droidmesh.input",
            format!("swipe ({x1}, {y1}) -> ({x2}, {y2}) in {duration_ms} ms"),
        );
        if (x2 - x1).abs() < 24 && (y2 - y1).abs() < 24 {
            if duration_ms >= 400 {
                self.long_press(x1, y1);
            } else {
                self.tap(x1, y1);
            }
            return;
        }
        let view = self.view();
        // A drag that starts on a slider moves it to where the finger stops.
        if let Some(slide @ Tap::Slide { .. }) = view.hit(x1, y1).map(|n| n.tap.clone()) {
            self.slide(&slide, x2);
            return;
        }
        if let Some((viewport, max)) = view.scroll
            && viewport.contains(x1, y1)
            && let Some(top) = self.stack.last_mut()
        {
            top.scroll = (top.scroll + (y1 - y2)).clamp(0, max);
        }
    }

    /// Types into the focused field, as `input text` does (nothing happens without focus).
    pub fn type_text(&mut self, text: &str) {
        // The log names the field and the length, never the text (it may be a secret).
        let field = self.focused_field();
        self.log(
            'I',
            "droidmesh.input",
            format!(
                "text: {} characters into {}",
                text.chars().count(),
                field.as_deref().unwrap_or("no focused field")
            ),
        );
        if let Some(key) = field {
            self.fields.entry(key).or_default().push_str(text);
        }
    }

    /// The focused field, if it is on the screen in front.
    pub(crate) fn focused_field(&self) -> Option<String> {
        let key = self.focus.clone()?;
        let view = self.view();
        view.nodes
            .iter()
            .any(|n| n.tap == Tap::Focus(key.clone()))
            .then_some(key)
    }

    pub fn key(&mut self, code: u32) {
        self.log('I', "droidmesh.input", format!("keyevent {code}"));
        match code {
            keycode::HOME => self.home(),
            keycode::BACK => self.back(),
            keycode::DEL => {
                if let Some(key) = self.focused_field() {
                    self.fields.entry(key).or_default().pop();
                }
            }
            keycode::ENTER => self.type_text("\n"),
            keycode::SPACE => self.type_text(" "),
            keycode::TAB => self.type_text("\t"),
            crate::clipboard::KEYCODE_PASTE => self.paste(),
            7..=16 => {
                let digit = char::from(b'0' + u8::try_from(code - 7).unwrap_or(0));
                self.type_text(&digit.to_string());
            }
            29..=54 => {
                let letter = char::from(b'a' + u8::try_from(code - 29).unwrap_or(0));
                self.type_text(&letter.to_string());
            }
            _ => {}
        }
    }
}
