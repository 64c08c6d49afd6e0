//! The view tree of the current screen: what `uiautomator dump` prints, what `screencap`
//! draws and what `input tap` hits. Built fresh from the device state by [`crate::layout`].
use crate::apps::Action;

/// Screen geometry of the simulated phone (a 1080x2400, 420 dpi device).
pub const WIDTH: i32 = 1080;
pub const HEIGHT: i32 = 2400;
pub const DENSITY: u32 = 420;
/// Status bar (drawn, not part of the app window's content).
pub const STATUS_BAR: i32 = 84;
/// App bar below the status bar.
pub const APP_BAR_BOTTOM: i32 = 252;
/// Top of the navigation bar (back, home, recents).
pub const NAV_BAR_TOP: i32 = 2274;
/// Height of the on-screen keyboard when shown.
pub const KEYBOARD_HEIGHT: i32 = 820;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rect {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Rect {
    pub const fn new(left: i32, top: i32, right: i32, bottom: i32) -> Self {
        Self {
            left,
            top,
            right,
            bottom,
        }
    }

    pub fn contains(&self, x: i32, y: i32) -> bool {
        x >= self.left && x < self.right && y >= self.top && y < self.bottom
    }

    pub fn is_empty(&self) -> bool {
        self.right <= self.left || self.bottom <= self.top
    }

    /// The part of `self` inside `clip` (possibly empty).
    pub fn clip(&self, clip: &Rect) -> Rect {
        Rect::new(
            self.left.max(clip.left),
            self.top.max(clip.top),
            self.right.min(clip.right),
            self.bottom.min(clip.bottom),
        )
    }

    pub fn height(&self) -> i32 {
        self.bottom - self.top
    }
}

/// What a tap on a node does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Tap {
    #[default]
    None,
    /// Open a screen of the current app (with the list record it was opened from).
    Goto {
        screen: usize,
        item: Option<usize>,
    },
    Back,
    Toggle {
        setting: String,
        on: String,
        off: String,
    },
    /// Set a setting to a value (a radio button).
    Set {
        setting: String,
        value: String,
    },
    /// Set an integer setting from where the finger is between `left` and `right` (a slider).
    Slide {
        setting: String,
        min: i64,
        max: i64,
        left: i32,
        right: i32,
    },
    /// Focus an editable field (by field key) and show the keyboard.
    Focus(String),
    Action(Action),
    /// Launch an app (launcher icons).
    Launch(usize),
}

/// How the renderer draws a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Plain,
    AppBar,
    Title,
    Text,
    Summary,
    Row,
    Switch {
        on: bool,
    },
    Edit {
        hint: bool,
    },
    Radio {
        on: bool,
    },
    /// A slider's track, filled this many thousandths of the way.
    Slider {
        permille: u16,
    },
    Button,
    Icon {
        color: u8,
    },
    Label,
    NavUp,
}

/// One node of the tree, in document (pre-)order.
#[derive(Debug, Clone, Default)]
pub struct Node {
    pub parent: Option<usize>,
    pub class: &'static str,
    pub resource_id: String,
    pub text: String,
    pub content_desc: String,
    pub bounds: Rect,
    pub clickable: bool,
    pub long_clickable: bool,
    pub checkable: bool,
    pub checked: bool,
    pub focusable: bool,
    pub focused: bool,
    pub scrollable: bool,
    pub password: bool,
    pub tap: Tap,
    pub style: Style,
}

/// The current screen.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub package: String,
    pub nodes: Vec<Node>,
    /// The scrolling container: its viewport and how far it can scroll.
    pub scroll: Option<(Rect, i32)>,
    pub keyboard: bool,
    /// Whether the screen has a dark background (launcher).
    pub dark: bool,
}

impl View {
    /// The deepest node under (x, y) that reacts to a tap.
    pub fn hit(&self, x: i32, y: i32) -> Option<&Node> {
        self.nodes
            .iter()
            .rev()
            .find(|n| n.tap != Tap::None && n.bounds.contains(x, y))
    }

    /// Children of `index`, in order.
    pub fn children(&self, index: usize) -> impl Iterator<Item = usize> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.parent == Some(index))
            .map(|(i, _)| i)
    }
}
