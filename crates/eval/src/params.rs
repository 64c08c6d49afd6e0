//! A task's parameters and how an instance draws them from its seed: the same template and
//! seed give the same values on every machine and in every version that keeps the template
//! (a fixed generator, SplitMix64, and a fixed hash of the template's id, FNV-1a).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How one parameter is drawn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum ParamSpec {
    /// One of the listed values: plain words (`{{name}}`) or tables of fields that belong
    /// together (`{{state.word}}`, `{{state.value}}`).
    OneOf(Vec<Choice>),
    /// A whole number from `lo` to `hi`, both included.
    Int([i64; 2]),
}

/// One value a `one_of` parameter may take.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Choice {
    Word(String),
    Fields(BTreeMap<String, String>),
}

/// A parameter's drawn value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Word(String),
    Fields(BTreeMap<String, String>),
}

impl Value {
    /// `{{name}}` (no field) or `{{name.field}}`; `None` when the value has no such part.
    pub fn part(&self, field: Option<&str>) -> Option<&str> {
        match (self, field) {
            (Value::Word(w), None) => Some(w),
            (Value::Fields(f), Some(k)) => f.get(k).map(String::as_str),
            _ => None,
        }
    }
}

/// The values of one instance, by parameter name.
pub type Values = BTreeMap<String, Value>;

/// A small generator that gives the same numbers everywhere (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of instance `seed` of the template `id`.
    pub fn for_instance(id: &str, seed: u64) -> Self {
        Self(fnv1a(id.as_bytes()) ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        // Rejection keeps every outcome equally likely.
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Draws every parameter, in name order (so adding a parameter changes only its own value
/// and those after it).
pub fn draw(specs: &BTreeMap<String, ParamSpec>, rng: &mut Rng) -> Values {
    specs
        .iter()
        .map(|(name, spec)| (name.clone(), draw_one(spec, rng)))
        .collect()
}

fn draw_one(spec: &ParamSpec, rng: &mut Rng) -> Value {
    match spec {
        ParamSpec::OneOf(choices) => {
            let i = rng.below(choices.len().max(1) as u64) as usize;
            match choices.get(i) {
                Some(Choice::Word(w)) => Value::Word(w.clone()),
                Some(Choice::Fields(f)) => Value::Fields(f.clone()),
                None => Value::Word(String::new()),
            }
        }
        ParamSpec::Int([lo, hi]) => {
            let span = hi.saturating_sub(*lo).max(0) as u64 + 1;
            Value::Word((lo + rng.below(span) as i64).to_string())
        }
    }
}

/// What is wrong with a parameter's specification (checked when the file loads).
pub fn problem(spec: &ParamSpec) -> Option<String> {
    match spec {
        ParamSpec::OneOf(choices) if choices.is_empty() => {
            Some("one_of lists no values: give at least one".into())
        }
        ParamSpec::OneOf(choices) => {
            let words = choices
                .iter()
                .filter(|c| matches!(c, Choice::Word(_)))
                .count();
            if words != 0 && words != choices.len() {
                return Some(
                    "one_of mixes words and tables: give all values as words or all as tables"
                        .into(),
                );
            }
            let keys = |c: &Choice| match c {
                Choice::Fields(f) => f.keys().cloned().collect::<Vec<_>>(),
                Choice::Word(_) => Vec::new(),
            };
            let first = keys(&choices[0]);
            choices.iter().position(|c| keys(c) != first).map(|i| {
                format!(
                    "one_of value {} has the fields {:?}, the first has {:?}: every table needs the same fields",
                    i + 1,
                    keys(&choices[i]),
                    first
                )
            })
        }
        ParamSpec::Int([lo, hi]) if lo > hi => Some(format!(
            "int range [{lo}, {hi}] is empty: the first bound must not exceed the second"
        )),
        ParamSpec::Int(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_template_and_seed_draw_the_same_values_and_seeds_differ() {
        let mut specs = BTreeMap::new();
        specs.insert("n".to_owned(), ParamSpec::Int([0, 1_000_000]));
        let a = draw(&specs, &mut Rng::for_instance("settings/wifi", 3));
        let b = draw(&specs, &mut Rng::for_instance("settings/wifi", 3));
        assert_eq!(a, b);
        let others: std::collections::BTreeSet<String> = (0..20)
            .map(|s| {
                format!(
                    "{:?}",
                    draw(&specs, &mut Rng::for_instance("settings/wifi", s))
                )
            })
            .collect();
        assert!(others.len() > 15, "{others:?}");
        // Pinned (SplitMix64 of FNV-1a("x"), computed independently): a change of generator
        // would silently change every published instance.
        assert_eq!(Rng::for_instance("x", 0).next_u64(), 0x3382_62d8_f096_398f);
    }

    #[test]
    fn ints_stay_in_their_range_and_every_choice_is_drawn() {
        let mut rng = Rng::for_instance("t", 1);
        let spec = ParamSpec::Int([-2, 2]);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let Value::Word(w) = draw_one(&spec, &mut rng) else {
                panic!("an int is a word")
            };
            let n: i64 = w.parse().unwrap();
            assert!((-2..=2).contains(&n));
            seen.insert(n);
        }
        assert_eq!(seen.len(), 5);
    }

    #[test]
    fn bad_specs_are_named() {
        assert!(
            problem(&ParamSpec::OneOf(vec![]))
                .unwrap()
                .contains("no values")
        );
        assert!(problem(&ParamSpec::Int([3, 1])).unwrap().contains("empty"));
        let mixed = ParamSpec::OneOf(vec![
            Choice::Word("a".into()),
            Choice::Fields(BTreeMap::from([("k".into(), "v".into())])),
        ]);
        assert!(problem(&mixed).unwrap().contains("mixes"));
        let uneven = ParamSpec::OneOf(vec![
            Choice::Fields(BTreeMap::from([("k".into(), "v".into())])),
            Choice::Fields(BTreeMap::from([("j".into(), "v".into())])),
        ]);
        assert!(problem(&uneven).unwrap().contains("value 2"));
    }
}
