//! Finding typed secrets in a UI dump without holding them: each secret is kept as its length
//! and a rolling digest (a polynomial hash modulo 2^61 - 1 at a base drawn at random when the
//! service starts, never stored or sent), and every window of that length of every text and
//! content description is hashed in one pass per length and looked up. A hit masks the window
//! (one `•` per character, as Android shows a password); the element's bounds are what a
//! screenshot blacks out. Where a hit is not the field the secret was typed into, the app shows
//! the secret elsewhere, and [`Findings::elsewhere`] says so.
use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use droidmesh_proto::v1::{Bounds, UiElement};

use crate::secret_fields::{BULLET, FieldKey};
use crate::ui_dump::ParsedUi;

const P: u64 = (1 << 61) - 1;

fn mul(a: u64, b: u64) -> u64 {
    let x = u128::from(a) * u128::from(b);
    // Both halves are below 2^61 + 2^3, so one subtraction brings the sum under P.
    let lo = u64::try_from(x & u128::from(P)).unwrap_or(0);
    let hi = u64::try_from(x >> 61).unwrap_or(0);
    let s = lo + hi;
    if s >= P { s - P } else { s }
}

fn add(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= P { s - P } else { s }
}

fn sub(a: u64, b: u64) -> u64 {
    if a >= b { a - b } else { a + P - b }
}

/// Digests are keyed hashes already: a set of them needs no hashing of its own.
#[derive(Default)]
struct Passthrough(u64);

impl Hasher for Passthrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Digests = HashSet<u64, BuildHasherDefault<Passthrough>>;

/// The digest of a secret (or a part of one): its length in bytes and its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Piece {
    pub len: usize,
    pub hash: u64,
}

/// The keyed rolling hash. The base is secret to the process.
#[derive(Clone, Copy)]
pub struct Roller {
    base: u64,
}

impl std::fmt::Debug for Roller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Roller")
    }
}

impl Roller {
    /// A base kept from an earlier run of the service ([`crate::mask_store`]); `None` for a
    /// value no base drawn here can have.
    pub fn from_base(base: u64) -> Option<Self> {
        (2..P - 1).contains(&base).then_some(Self { base })
    }

    /// The base, to be kept with the digests made with it.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// A base drawn at random (in 2..P-1).
    pub fn random() -> Self {
        let r = uuid::Uuid::new_v4().as_u128();
        let r = u64::try_from(r % u128::from(P - 3)).unwrap_or(0) + 2;
        Self { base: r }
    }

    fn pow(&self, n: usize) -> u64 {
        let (mut acc, mut b, mut n) = (1u64, self.base, n);
        while n > 0 {
            if n & 1 == 1 {
                acc = mul(acc, b);
            }
            b = mul(b, b);
            n >>= 1;
        }
        acc
    }

    fn hash(&self, bytes: &[u8]) -> u64 {
        bytes
            .iter()
            .fold(0, |h, &c| add(mul(h, self.base), u64::from(c) + 1))
    }

    /// The pieces a secret is found by: the whole, and each line of a secret of several
    /// (a line break is typed as ENTER, so its lines may show apart).
    pub fn pieces(&self, secret: &str) -> Vec<Piece> {
        let mut out = vec![self.piece(secret)];
        if secret.contains('\n') {
            for line in secret.split('\n').filter(|l| !l.is_empty()) {
                out.push(self.piece(line));
            }
        }
        out.retain(|p| p.len > 0);
        out.sort();
        out.dedup();
        out
    }

    fn piece(&self, s: &str) -> Piece {
        Piece {
            len: s.len(),
            hash: self.hash(s.as_bytes()),
        }
    }
}

/// One secret to mask in a read: its pieces, and the field it went into when known.
#[derive(Debug, Clone)]
pub struct Mask {
    pub pieces: Vec<Piece>,
    pub field: Option<FieldKey>,
}

/// What masking one dump found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Findings {
    /// Bounds of every element masked (a remembered field, or one holding a secret), in
    /// screen pixels, sorted: what a screenshot blacks out.
    pub regions: Vec<Bounds>,
    /// Why screenshots cannot be trusted: a secret shows outside the field it was typed into,
    /// or in an element without a place on the screen.
    pub elsewhere: Option<String>,
}

/// The masks one read applies, ready for matching.
#[derive(Debug, Clone)]
pub struct MaskSet {
    roller: Roller,
    masks: Vec<Mask>,
    /// The digests of every piece, by length.
    by_len: BTreeMap<usize, Digests>,
}

impl MaskSet {
    pub fn new(roller: Roller, masks: Vec<Mask>) -> Self {
        let mut by_len: BTreeMap<usize, Digests> = BTreeMap::new();
        for p in masks.iter().flat_map(|m| &m.pieces) {
            by_len.entry(p.len).or_default().insert(p.hash);
        }
        Self {
            roller,
            masks,
            by_len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.masks.is_empty()
    }

    /// Byte ranges of `text` that are a secret (or a piece of one), with the piece.
    fn occurrences(&self, text: &str) -> Vec<(usize, usize, Piece)> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        for (&len, hashes) in self.by_len.range(..=bytes.len()) {
            let top = self.roller.pow(len - 1);
            let mut h = self.roller.hash(&bytes[..len]);
            for start in 0..=bytes.len() - len {
                if start > 0 {
                    let gone = mul(u64::from(bytes[start - 1]) + 1, top);
                    h = add(
                        mul(sub(h, gone), self.roller.base),
                        u64::from(bytes[start + len - 1]) + 1,
                    );
                }
                if hashes.contains(&h) && text.is_char_boundary(start) {
                    out.push((start, start + len, Piece { len, hash: h }));
                }
            }
        }
        out
    }

    /// Whether `piece` belongs to a secret typed into `e`.
    fn in_place(&self, piece: Piece, e: &UiElement) -> bool {
        self.masks
            .iter()
            .any(|m| m.pieces.contains(&piece) && m.field.as_ref().is_some_and(|k| k.matches(e)))
    }

    /// Masks `ui` in place: remembered fields wholly, secrets wherever they show in a text or
    /// content description. Says where a screenshot must be blacked out, and whether it can be
    /// trusted at all.
    pub fn apply(&self, ui: &mut ParsedUi) -> Findings {
        let mut found = Findings::default();
        if self.is_empty() {
            return found;
        }
        for e in &mut ui.elements {
            let field = self
                .masks
                .iter()
                .any(|m| m.field.as_ref().is_some_and(|k| k.matches(e)));
            let mut shown = false;
            let mut outside = false;
            for which in [Attr::Text, Attr::Desc] {
                let occ = self.occurrences(which.of(e));
                if occ.is_empty() {
                    continue;
                }
                shown = true;
                outside |= occ.iter().any(|&(_, _, p)| !self.in_place(p, e));
                let masked = bullets_over(which.of(e), &occ);
                *which.of_mut(e) = masked;
            }
            if field && !e.text.is_empty() {
                e.text = BULLET.to_string().repeat(e.text.chars().count());
            }
            if !(field || shown) {
                continue;
            }
            match e.bounds.filter(|b| b.right > b.left && b.bottom > b.top) {
                Some(b) => found.regions.push(b),
                None if shown => {
                    found.elsewhere.get_or_insert_with(|| {
                        format!(
                            "a typed secret shows in element {} ({}), whose place on the screen is not known",
                            e.index, e.class_name
                        )
                    });
                }
                None => {}
            }
            if outside {
                found.elsewhere.get_or_insert_with(|| {
                    format!(
                        "a typed secret shows outside the field it was typed into, in element {} ({})",
                        e.index, e.class_name
                    )
                });
            }
        }
        found
            .regions
            .sort_by_key(|b| (b.top, b.left, b.bottom, b.right));
        found.regions.dedup();
        found
    }
}

#[derive(Clone, Copy)]
enum Attr {
    Text,
    Desc,
}

impl Attr {
    fn of(self, e: &UiElement) -> &str {
        match self {
            Attr::Text => &e.text,
            Attr::Desc => &e.content_desc,
        }
    }
    fn of_mut(self, e: &mut UiElement) -> &mut String {
        match self {
            Attr::Text => &mut e.text,
            Attr::Desc => &mut e.content_desc,
        }
    }
}

/// `text` with every range of `occ` (merged where they overlap) shown as bullets, one per
/// character.
fn bullets_over(text: &str, occ: &[(usize, usize, Piece)]) -> String {
    let mut ranges: Vec<(usize, usize)> = occ.iter().map(|&(a, b, _)| (a, b)).collect();
    ranges.sort_unstable();
    let mut out = String::with_capacity(text.len() * 2);
    let mut at = 0;
    for (a, b) in ranges {
        let a = a.max(at);
        if b <= a {
            continue;
        }
        out.push_str(text.get(at..a).unwrap_or_default());
        let count = text.get(a..b).map_or(0, |s| s.chars().count());
        out.extend(std::iter::repeat_n(BULLET, count));
        at = b;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

#[cfg(test)]
#[path = "mask_set_tests.rs"]
mod tests;
