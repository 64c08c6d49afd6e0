//! `screencap -p`: draws the view tree into a palette image (text in an 8x8 bitmap font,
//! scaled) and encodes it as PNG, so screenshots show what the dump describes.
use font8x8::legacy::BASIC_LEGACY;

use crate::view::{
    HEIGHT, KEYBOARD_HEIGHT, NAV_BAR_TOP, Node, Rect, STATUS_BAR, Style, View, WIDTH,
};

const PALETTE: [[u8; 3]; 16] = [
    [250, 250, 252], // 0 background
    [28, 27, 31],    // 1 text
    [96, 96, 104],   // 2 secondary text
    [236, 232, 244], // 3 bars
    [26, 115, 232],  // 4 accent
    [202, 196, 208], // 5 outlines, dividers, switch off
    [22, 60, 84],    // 6 launcher wallpaper
    [255, 255, 255], // 7 white
    [222, 222, 228], // 8 keyboard
    [219, 68, 55],   // 9.. icon colours
    [15, 157, 88],
    [244, 160, 0],
    [103, 58, 183],
    [0, 137, 123],
    [216, 27, 96],
    [12, 30, 44], // 15 launcher bars
];
const BG: u8 = 0;
const TEXT: u8 = 1;
const SECONDARY: u8 = 2;
const BARS: u8 = 3;
const ACCENT: u8 = 4;
const OUTLINE: u8 = 5;
const WALLPAPER: u8 = 6;
const WHITE: u8 = 7;
const KEYBOARD: u8 = 8;
const ICONS: u8 = 9;
const DARK_BARS: u8 = 15;

struct Canvas {
    px: Vec<u8>,
}

fn to_usize(v: i32) -> usize {
    usize::try_from(v.max(0)).unwrap_or(0)
}

impl Canvas {
    fn fill(&mut self, r: Rect, color: u8) {
        let r = r.clip(&Rect::new(0, 0, WIDTH, HEIGHT));
        if r.is_empty() {
            return;
        }
        let w = to_usize(WIDTH);
        for y in to_usize(r.top)..to_usize(r.bottom) {
            let row = y * w;
            if let Some(span) = self
                .px
                .get_mut(row + to_usize(r.left)..row + to_usize(r.right))
            {
                span.fill(color);
            }
        }
    }

    fn outline(&mut self, r: Rect, t: i32, color: u8) {
        self.fill(Rect::new(r.left, r.top, r.right, r.top + t), color);
        self.fill(Rect::new(r.left, r.bottom - t, r.right, r.bottom), color);
        self.fill(Rect::new(r.left, r.top, r.left + t, r.bottom), color);
        self.fill(Rect::new(r.right - t, r.top, r.right, r.bottom), color);
    }

    /// Draws one line of text at (x, y) with `scale`-pixel font pixels, clipped to `clip`.
    fn text(&mut self, s: &str, x: i32, y: i32, scale: i32, color: u8, clip: Rect) {
        let mut cx = x;
        for ch in s.chars() {
            if cx >= clip.right {
                break;
            }
            let code = match ch {
                '\u{2022}' => b'*',
                c if c.is_ascii() && !c.is_ascii_control() => c as u8,
                _ => b'?',
            };
            let glyph = BASIC_LEGACY
                .get(usize::from(code))
                .copied()
                .unwrap_or([0; 8]);
            for (gy, bits) in glyph.iter().enumerate() {
                for gx in 0..8 {
                    if bits & (1 << gx) != 0 {
                        let px = cx + gx * scale;
                        let py = y + i32::try_from(gy).unwrap_or(0) * scale;
                        self.fill(Rect::new(px, py, px + scale, py + scale).clip(&clip), color);
                    }
                }
            }
            cx += 8 * scale;
        }
    }

    /// Text wrapped to the width of `r`, one line per 10 font pixels of height.
    fn paragraph(&mut self, s: &str, r: Rect, scale: i32, color: u8) {
        let per_line = to_usize((r.right - r.left) / (8 * scale)).max(1);
        if r.height() < 18 * scale {
            // Room for one line only: cut it with an ellipsis rather than wrap.
            let line = s.lines().next().unwrap_or("");
            let count = line.chars().count();
            let shown: String = if count > per_line {
                line.chars()
                    .take(per_line.saturating_sub(3))
                    .chain("...".chars())
                    .collect()
            } else {
                line.to_owned()
            };
            self.text(&shown, r.left, r.top, scale, color, r);
            return;
        }
        let mut y = r.top;
        for line in s.split('\n') {
            let chars: Vec<char> = line.chars().collect();
            let chunks: Vec<&[char]> = if chars.is_empty() {
                vec![&[]]
            } else {
                chars.chunks(per_line).collect()
            };
            for chunk in chunks {
                if y >= r.bottom {
                    return;
                }
                let text: String = chunk.iter().collect();
                self.text(&text, r.left, y, scale, color, r);
                y += 10 * scale;
            }
        }
    }

    fn centered(&mut self, s: &str, r: Rect, scale: i32, color: u8) {
        let width = i32::try_from(s.chars().count()).unwrap_or(0) * 8 * scale;
        let x = r.left + ((r.right - r.left - width) / 2).max(0);
        let y = r.top + (r.height() - 8 * scale) / 2;
        self.text(s, x, y, scale, color, r);
    }

    fn node(&mut self, n: &Node, dark: bool) {
        let b = n.bounds;
        let fg = if dark { WHITE } else { TEXT };
        match n.style {
            Style::Plain => {}
            Style::AppBar => self.fill(b, BARS),
            Style::Title => self.paragraph(&n.text, b, 6, fg),
            Style::Text => self.paragraph(&n.text, b, 5, fg),
            Style::Summary => self.paragraph(&n.text, b, 4, SECONDARY),
            Style::Row => self.fill(
                Rect::new(b.left + 48, b.bottom - 2, b.right - 48, b.bottom),
                OUTLINE,
            ),
            Style::Switch { on } => {
                let track = Rect::new(b.left, b.top + 12, b.right, b.bottom - 12);
                self.fill(track, if on { ACCENT } else { OUTLINE });
                let knob = if on {
                    Rect::new(b.right - 72, b.top + 18, b.right - 8, b.bottom - 18)
                } else {
                    Rect::new(b.left + 8, b.top + 18, b.left + 72, b.bottom - 18)
                };
                self.fill(knob, WHITE);
            }
            Style::Radio { on } => {
                let side = (b.bottom - b.top).min(b.right - b.left);
                let ring = Rect::new(b.left, b.top, b.left + side, b.top + side);
                self.outline(ring, 6, if on { ACCENT } else { OUTLINE });
                if on {
                    let dot = Rect::new(
                        ring.left + 18,
                        ring.top + 18,
                        ring.right - 18,
                        ring.bottom - 18,
                    );
                    self.fill(dot, ACCENT);
                }
            }
            Style::Slider { permille } => {
                let mid = (b.top + b.bottom) / 2;
                self.fill(Rect::new(b.left, mid - 6, b.right, mid + 6), OUTLINE);
                let x = b.left + (b.right - b.left) * i32::from(permille.min(1000)) / 1000;
                self.fill(Rect::new(b.left, mid - 6, x, mid + 6), ACCENT);
                self.fill(Rect::new(x - 24, mid - 24, x + 24, mid + 24), ACCENT);
            }
            Style::Edit { hint } => {
                self.outline(
                    b,
                    if n.focused { 6 } else { 3 },
                    if n.focused { ACCENT } else { OUTLINE },
                );
                let inner = Rect::new(b.left + 24, b.top + 24, b.right - 24, b.bottom - 12);
                self.paragraph(&n.text, inner, 5, if hint { SECONDARY } else { TEXT });
            }
            Style::Button => {
                self.fill(b, ACCENT);
                self.centered(&n.text.to_uppercase(), b, 5, WHITE);
            }
            Style::Icon { color } => {
                let cx = (b.left + b.right) / 2;
                let icon = Rect::new(cx - 80, b.top + 20, cx + 80, b.top + 180);
                self.fill(icon, ICONS + color);
                let initial: String = n.text.chars().take(1).collect();
                self.centered(&initial, icon, 10, WHITE);
                self.centered(
                    &n.text,
                    Rect::new(b.left, b.top + 200, b.right, b.bottom),
                    4,
                    fg,
                );
            }
            Style::Label => self.centered(&n.text, b, 4, fg),
            Style::NavUp => self.centered("<", b, 8, TEXT),
        }
    }
}

/// The palette image of `view`: one byte per pixel, row-major.
pub fn draw(view: &View) -> Vec<u8> {
    let size = to_usize(WIDTH) * to_usize(HEIGHT);
    let mut c = Canvas {
        px: vec![if view.dark { WALLPAPER } else { BG }; size],
    };
    let (bars, bar_fg) = if view.dark {
        (DARK_BARS, WHITE)
    } else {
        (BARS, TEXT)
    };
    let status = Rect::new(0, 0, WIDTH, STATUS_BAR);
    c.fill(status, bars);
    c.text("12:00", 48, 26, 4, bar_fg, status);
    c.text("5G 87%", WIDTH - 48 - 6 * 32, 26, 4, bar_fg, status);
    for n in &view.nodes {
        c.node(n, view.dark);
    }
    if view.keyboard {
        let kb = Rect::new(0, NAV_BAR_TOP - KEYBOARD_HEIGHT, WIDTH, NAV_BAR_TOP);
        c.fill(kb, KEYBOARD);
        for (i, row) in ["qwertyuiop", "asdfghjkl", "zxcvbnm", "     space     "]
            .iter()
            .enumerate()
        {
            let y = kb.top + 40 + i32::try_from(i).unwrap_or(0) * 190;
            c.centered(row, Rect::new(0, y, WIDTH, y + 150), 7, TEXT);
        }
    }
    let nav = Rect::new(0, NAV_BAR_TOP, WIDTH, HEIGHT);
    c.fill(nav, bars);
    for (i, label) in ["<", "O", "[]"].iter().enumerate() {
        let left = WIDTH / 3 * i32::try_from(i).unwrap_or(0);
        c.centered(
            label,
            Rect::new(left, nav.top, left + WIDTH / 3, nav.bottom),
            6,
            bar_fg,
        );
    }
    c.px
}

/// Encodes a palette image as PNG.
pub fn png(pixels: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::with_capacity(64 * 1024);
    {
        let w = u32::try_from(WIDTH).unwrap_or(0);
        let h = u32::try_from(HEIGHT).unwrap_or(0);
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Indexed);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_palette(PALETTE.concat());
        enc.set_compression(png::Compression::Fast);
        let mut writer = enc.write_header()?;
        writer.write_image_data(pixels)?;
        writer.finish()?;
    }
    Ok(out)
}

/// Raw `screencap` output (no `-p`): width, height, format (1 = RGBA_8888), colour space,
/// then the pixels.
pub fn raw(pixels: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + pixels.len() * 4);
    for v in [WIDTH, HEIGHT, 1, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for p in pixels {
        let [r, g, b] = PALETTE.get(usize::from(*p)).copied().unwrap_or([0, 0, 0]);
        out.extend_from_slice(&[r, g, b, 255]);
    }
    out
}
