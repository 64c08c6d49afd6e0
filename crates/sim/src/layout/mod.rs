//! Lays the screen in front out as a view tree: app bar, then the screen's widgets in a
//! column that scrolls when it is taller than the space between app bar and navigation bar.
mod parts;

use crate::apps::{Action, App, Widget, split_setting};
use crate::device::{Device, Phase};
use crate::view::{
    APP_BAR_BOTTOM, HEIGHT, NAV_BAR_TOP, Node, Rect, STATUS_BAR, Style, Tap, View, WIDTH,
};

const PAD: i32 = 48;
const ROW: i32 = 168;
const ROW_SUMMARY: i32 = 220;
const TEXT: i32 = 120;
const BUTTON: i32 = 168;
const GRID_COLUMNS: i32 = 4;
const GRID_CELL_H: i32 = 330;
const ICON_COLORS: u8 = 6;

/// What sits at the right end of a row.
#[derive(Clone, Copy)]
enum Control {
    Switch(bool),
    Radio(bool),
}

/// Height of a slider's track under its row.
const SLIDER: i32 = 132;

struct Builder<'a> {
    dev: &'a Device,
    app: &'a App,
    nodes: Vec<Node>,
    viewport: Rect,
    /// Content position of the next widget (before scrolling).
    y: i32,
    scroll: i32,
    container: usize,
}

impl Builder<'_> {
    fn push(&mut self, parent: usize, node: Node) -> usize {
        self.nodes.push(Node {
            parent: Some(parent),
            ..node
        });
        self.nodes.len() - 1
    }

    fn rid(&self, id: &str) -> String {
        if id.is_empty() {
            String::new()
        } else {
            format!("{}:id/{id}", self.app.package)
        }
    }

    /// Reserves `height` pixels of content; returns the on-screen rectangle and whether any
    /// of it is visible.
    fn block(&mut self, height: i32) -> Option<Rect> {
        let top = self.viewport.top + self.y - self.scroll;
        self.y += height;
        let r = Rect::new(0, top, WIDTH, top + height);
        (!r.clip(&self.viewport).is_empty()).then_some(r)
    }

    fn clipped(&self, r: Rect) -> Rect {
        r.clip(&self.viewport)
    }

    fn widget(&mut self, w: &Widget) {
        let dev = self.dev;
        match w {
            Widget::Text {
                id,
                text,
                field,
                desc,
                ..
            } => {
                let value = if field.is_empty() {
                    dev.expand(text)
                } else {
                    dev.fields
                        .get(&dev.field_key(field))
                        .cloned()
                        .unwrap_or_default()
                };
                let Some(r) = self.block(TEXT) else { return };
                let b = self.clipped(Rect::new(PAD, r.top + 24, WIDTH - PAD, r.bottom - 24));
                self.push(
                    self.container,
                    Node {
                        class: "android.widget.TextView",
                        resource_id: self.rid(id),
                        text: value,
                        content_desc: dev.expand(desc),
                        bounds: b,
                        style: Style::Text,
                        ..Node::default()
                    },
                );
            }
            Widget::Row {
                id,
                text,
                summary,
                goto,
                action,
                ..
            } => {
                let tap = if !goto.is_empty() {
                    // A screen opened from a record's screen is about the same record.
                    self.goto(goto, dev.top().item)
                } else {
                    Action::parse(action).map(Tap::Action).unwrap_or_default()
                };
                self.row(id, dev.expand(text), dev.expand(summary), None, tap);
            }
            Widget::Switch {
                id,
                text,
                summary,
                setting,
                on,
                off,
            } => {
                let value = split_setting(setting)
                    .ok()
                    .and_then(|_| dev.settings.get(setting))
                    .cloned()
                    .unwrap_or_default();
                let tap = Tap::Toggle {
                    setting: setting.clone(),
                    on: on.clone(),
                    off: off.clone(),
                };
                self.row(
                    id,
                    dev.expand(text),
                    dev.expand(summary),
                    Some(Control::Switch(&value == on)),
                    tap,
                );
            }
            Widget::Radio {
                id,
                text,
                summary,
                setting,
                value,
            } => {
                let on = dev.settings.get(setting) == Some(value);
                let tap = Tap::Set {
                    setting: setting.clone(),
                    value: value.clone(),
                };
                let (text, summary) = (dev.expand(text), dev.expand(summary));
                self.row(id, text, summary, Some(Control::Radio(on)), tap);
            }
            Widget::Slider {
                id,
                text,
                summary,
                setting,
                min,
                max,
            } => self.slider(id, text, summary, setting, (*min, *max)),
            Widget::Edit {
                id,
                hint,
                lines,
                password,
                ..
            } => {
                let key = dev.field_key(id);
                let value = dev.fields.get(&key).cloned().unwrap_or_default();
                let height = 72 + 96 * i32::try_from((*lines).clamp(1, 12)).unwrap_or(1);
                let Some(r) = self.block(height + 48) else {
                    return;
                };
                let b = self.clipped(Rect::new(PAD, r.top + 24, WIDTH - PAD, r.top + 24 + height));
                let shown = if value.is_empty() {
                    hint.clone()
                } else if *password {
                    "\u{2022}".repeat(value.chars().count())
                } else {
                    value.clone()
                };
                self.push(
                    self.container,
                    Node {
                        class: "android.widget.EditText",
                        resource_id: self.rid(id),
                        text: shown,
                        bounds: b,
                        clickable: true,
                        long_clickable: true,
                        focusable: true,
                        focused: dev.focus.as_deref() == Some(key.as_str()),
                        password: *password,
                        tap: Tap::Focus(key),
                        style: Style::Edit {
                            hint: value.is_empty(),
                        },
                        ..Node::default()
                    },
                );
            }
            Widget::Button {
                id, text, action, ..
            } => {
                let Some(r) = self.block(BUTTON) else { return };
                let b = self.clipped(Rect::new(PAD, r.top + 20, WIDTH - PAD, r.bottom - 20));
                self.push(
                    self.container,
                    Node {
                        class: "android.widget.Button",
                        resource_id: self.rid(id),
                        text: dev.expand(text),
                        bounds: b,
                        clickable: true,
                        focusable: true,
                        tap: Action::parse(action).map(Tap::Action).unwrap_or_default(),
                        style: Style::Button,
                        ..Node::default()
                    },
                );
            }
            Widget::List {
                id,
                source,
                text,
                summary,
                goto,
                filter,
                sort,
            } => {
                let wanted: Vec<(&String, String)> =
                    filter.iter().map(|(k, v)| (k, dev.expand(v))).collect();
                let all = dev.source_records(&dev.expand(source));
                let mut records: Vec<&crate::records::Record> = all
                    .iter()
                    .filter(|r| wanted.iter().all(|(k, v)| r.get(*k) == Some(v)))
                    .collect();
                if let Ok(order) = crate::query::parse_sort(sort, &|_| true) {
                    crate::query::sort(&mut records, &order);
                }
                for record in records {
                    let item = crate::records::id_of(record).and_then(|i| usize::try_from(i).ok());
                    let tap = if goto.is_empty() {
                        Tap::None
                    } else {
                        self.goto(goto, item)
                    };
                    let title = dev.expand_with(text, Some(record));
                    let sub = dev.expand_with(summary, Some(record));
                    self.row(id, title, sub, None, tap);
                }
            }
            Widget::Grid => self.grid(),
        }
    }

    fn goto(&self, screen: &str, item: Option<usize>) -> Tap {
        match self.app.screens.iter().position(|s| s.id == screen) {
            Some(screen) => Tap::Goto { screen, item },
            None => Tap::None,
        }
    }
}

/// Builds the view of the device's screen in front.
pub fn build(dev: &Device) -> View {
    let top = dev.top();
    let Some(app) = dev.apps.apps.get(top.app) else {
        return View::default();
    };
    let Some(screen) = app.screens.get(top.screen) else {
        return View::default();
    };
    let phase = dev.phase();
    if phase == Phase::Starting {
        return starting_window(app);
    }
    let full = Rect::new(0, 0, WIDTH, HEIGHT);
    let mut nodes = vec![Node {
        class: "android.widget.FrameLayout",
        bounds: full,
        ..Node::default()
    }];
    nodes.push(Node {
        parent: Some(0),
        class: "android.widget.FrameLayout",
        resource_id: "android:id/content".into(),
        bounds: full,
        ..Node::default()
    });
    let content_top = if screen.chrome {
        let bar = nodes.len();
        nodes.push(Node {
            parent: Some(1),
            class: "android.view.ViewGroup",
            resource_id: format!("{}:id/toolbar", app.package),
            bounds: Rect::new(0, STATUS_BAR, WIDTH, APP_BAR_BOTTOM),
            style: Style::AppBar,
            ..Node::default()
        });
        let has_up = dev.stack.len() > 2 || top.screen != 0;
        if has_up {
            nodes.push(Node {
                parent: Some(bar),
                class: "android.widget.ImageButton",
                content_desc: "Navigate up".into(),
                bounds: Rect::new(0, STATUS_BAR, 168, APP_BAR_BOTTOM),
                clickable: true,
                focusable: true,
                tap: Tap::Back,
                style: Style::NavUp,
                ..Node::default()
            });
        }
        let left = if has_up { 180 } else { PAD };
        nodes.push(Node {
            parent: Some(bar),
            class: "android.widget.TextView",
            resource_id: format!("{}:id/toolbar_title", app.package),
            text: dev.expand(&screen.title),
            bounds: Rect::new(left, STATUS_BAR + 40, WIDTH - PAD, APP_BAR_BOTTOM - 40),
            style: Style::Title,
            ..Node::default()
        });
        APP_BAR_BOTTOM
    } else {
        STATUS_BAR
    };
    let viewport = Rect::new(0, content_top, WIDTH, NAV_BAR_TOP);
    let is_list = screen
        .widgets
        .iter()
        .any(|w| matches!(w, Widget::List { .. }));
    let container = nodes.len();
    nodes.push(Node {
        parent: Some(1),
        class: if is_list {
            "androidx.recyclerview.widget.RecyclerView"
        } else {
            "android.widget.ScrollView"
        },
        resource_id: format!(
            "{}:id/{}",
            app.package,
            if is_list {
                "recycler_view"
            } else {
                "scroll_view"
            }
        ),
        bounds: viewport,
        ..Node::default()
    });
    let mut b = Builder {
        dev,
        app,
        nodes,
        viewport,
        y: 0,
        scroll: top.scroll,
        container,
    };
    if phase == Phase::Loading {
        let side = 144;
        let (cx, cy) = (WIDTH / 2, (viewport.top + viewport.bottom) / 2);
        b.nodes.push(Node {
            parent: Some(container),
            class: "android.widget.ProgressBar",
            resource_id: format!("{}:id/progress", app.package),
            bounds: Rect::new(cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2),
            style: Style::Icon { color: 0 },
            ..Node::default()
        });
    } else {
        for w in screen.widgets.iter().filter(|w| dev.shown(w)) {
            b.widget(w);
        }
    }
    let content_height = b.y;
    let max_scroll = (content_height - viewport.height()).max(0);
    let mut nodes = b.nodes;
    if let Some(c) = nodes.get_mut(container) {
        c.scrollable = max_scroll > 0;
    }
    if let Phase::Sliding { left } = phase {
        // The whole window moves in from the right; what is past the edge is not shown.
        let screen_rect = Rect::new(0, 0, WIDTH, HEIGHT);
        for n in nodes.iter_mut().skip(1) {
            n.bounds = Rect::new(
                n.bounds.left + left,
                n.bounds.top,
                n.bounds.right + left,
                n.bounds.bottom,
            )
            .clip(&screen_rect);
        }
    }
    let package = app.package.clone();
    View {
        package,
        nodes,
        scroll: Some((viewport, max_scroll)),
        keyboard: dev.keyboard,
        dark: !screen.chrome,
    }
}

/// An app's starting window: a blank window with the app's icon, shown while it launches.
fn starting_window(app: &App) -> View {
    let full = Rect::new(0, 0, WIDTH, HEIGHT);
    let side = 192;
    let (cx, cy) = (WIDTH / 2, HEIGHT / 2);
    View {
        package: app.package.clone(),
        nodes: vec![
            Node {
                class: "android.widget.FrameLayout",
                bounds: full,
                ..Node::default()
            },
            Node {
                parent: Some(0),
                class: "android.widget.ImageView",
                content_desc: app.label.clone(),
                bounds: Rect::new(cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2),
                style: Style::Icon { color: 1 },
                ..Node::default()
            },
        ],
        scroll: None,
        keyboard: false,
        dark: false,
    }
}
