//! The parts of a screen that take more than one node: rows (title, summary, a switch or
//! radio button at the end), a slider under its row, and the launcher's icon grid.
use super::{
    Builder, Control, GRID_CELL_H, GRID_COLUMNS, ICON_COLORS, PAD, ROW, ROW_SUMMARY, SLIDER,
};
use crate::apps::App;
use crate::view::{Node, Rect, Style, Tap, WIDTH};

impl Builder<'_> {
    /// A row: title, optional summary, optional switch.
    pub(super) fn row(
        &mut self,
        id: &str,
        title: String,
        summary: String,
        control: Option<Control>,
        tap: Tap,
    ) {
        let height = if summary.is_empty() { ROW } else { ROW_SUMMARY };
        let Some(r) = self.block(height) else { return };
        let row = self.push(
            self.container,
            Node {
                class: "android.widget.LinearLayout",
                resource_id: self.rid(id),
                bounds: self.clipped(r),
                clickable: tap != Tap::None,
                focusable: tap != Tap::None,
                tap,
                style: Style::Row,
                ..Node::default()
            },
        );
        let text_right = if control.is_some() {
            WIDTH - 240
        } else {
            WIDTH - PAD
        };
        let (title_box, summary_box) = if summary.is_empty() {
            (Rect::new(PAD, r.top + 48, text_right, r.bottom - 48), None)
        } else {
            (
                Rect::new(PAD, r.top + 40, text_right, r.top + 112),
                Some(Rect::new(PAD, r.top + 120, text_right, r.bottom - 40)),
            )
        };
        for (text, b, rid, style) in [
            (
                Some(title),
                Some(title_box),
                "android:id/title",
                Style::Text,
            ),
            (
                Some(summary),
                summary_box,
                "android:id/summary",
                Style::Summary,
            ),
        ] {
            if let (Some(text), Some(b)) = (text, b) {
                let b = self.clipped(b);
                if !b.is_empty() {
                    self.push(
                        row,
                        Node {
                            class: "android.widget.TextView",
                            resource_id: rid.into(),
                            text,
                            bounds: b,
                            style,
                            ..Node::default()
                        },
                    );
                }
            }
        }
        if let Some(control) = control {
            let (class, resource_id, on, text, style, left) = match control {
                Control::Switch(on) => (
                    "android.widget.Switch",
                    "android:id/switch_widget",
                    on,
                    if on { "ON" } else { "OFF" },
                    Style::Switch { on },
                    WIDTH - 204,
                ),
                Control::Radio(on) => (
                    "android.widget.RadioButton",
                    "android:id/checkbox",
                    on,
                    "",
                    Style::Radio { on },
                    WIDTH - PAD - 84,
                ),
            };
            let b = self.clipped(Rect::new(
                left,
                r.top + (height - 84) / 2,
                WIDTH - PAD,
                r.top + (height + 84) / 2,
            ));
            if !b.is_empty() {
                self.push(
                    row,
                    Node {
                        class,
                        resource_id: resource_id.into(),
                        text: text.into(),
                        bounds: b,
                        checkable: true,
                        checked: on,
                        focusable: true,
                        style,
                        ..Node::default()
                    },
                );
            }
        }
    }

    /// A row (title and summary) over a slider's track.
    pub(super) fn slider(
        &mut self,
        id: &str,
        text: &str,
        summary: &str,
        setting: &str,
        (min, max): (i64, i64),
    ) {
        let dev = self.dev;
        self.row("", dev.expand(text), dev.expand(summary), None, Tap::None);
        let value = dev
            .settings
            .get(setting)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .unwrap_or(min as f64)
            .clamp(min as f64, max as f64);
        let span = (max - min).max(1) as f64;
        let permille = ((value - min as f64) / span * 1000.0).round() as u16;
        let Some(r) = self.block(SLIDER) else { return };
        let track = Rect::new(PAD, r.top + 18, WIDTH - PAD, r.bottom - 42);
        let b = self.clipped(track);
        self.push(
            self.container,
            Node {
                class: "android.widget.SeekBar",
                resource_id: self.rid(id),
                content_desc: dev.expand(text),
                bounds: b,
                clickable: true,
                focusable: true,
                tap: Tap::Slide {
                    setting: setting.to_owned(),
                    min,
                    max,
                    left: track.left,
                    right: track.right,
                },
                style: Style::Slider { permille },
                ..Node::default()
            },
        );
    }

    pub(super) fn grid(&mut self) {
        let apps: Vec<(usize, &App)> = self
            .dev
            .apps
            .apps
            .iter()
            .enumerate()
            .filter(|(_, a)| a.launcher)
            .collect();
        let cell_w = WIDTH / GRID_COLUMNS;
        for chunk in apps.chunks(usize::try_from(GRID_COLUMNS).unwrap_or(4)) {
            let Some(r) = self.block(GRID_CELL_H) else {
                continue;
            };
            for (col, (app_index, app)) in chunk.iter().enumerate() {
                let left = cell_w * i32::try_from(col).unwrap_or(0);
                let b = self.clipped(Rect::new(
                    left + 12,
                    r.top + 24,
                    left + cell_w - 12,
                    r.bottom - 24,
                ));
                let color = u8::try_from(*app_index % usize::from(ICON_COLORS)).unwrap_or(0);
                self.push(
                    self.container,
                    Node {
                        class: "android.widget.TextView",
                        resource_id: "com.android.launcher3:id/icon".into(),
                        text: app.label.clone(),
                        content_desc: app.label.clone(),
                        bounds: b,
                        clickable: true,
                        long_clickable: true,
                        focusable: true,
                        tap: Tap::Launch(*app_index),
                        style: Style::Icon { color },
                        ..Node::default()
                    },
                );
            }
        }
    }
}
