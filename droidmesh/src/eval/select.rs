//! Which task instances a run makes: the templates its `--tasks` globs match, `--seeds` each,
//! refused before any is made when none matches or when there would be more than a run holds
//! (every instance is made up front, with its goal, setup and check rendered).
use anyhow::{Result, bail};
use droidmesh_eval::task::glob;
use droidmesh_eval::{Family, Instance};

/// Most instances of each template (`--seeds`).
pub const MAX_SEEDS: u64 = 1_000;
/// Most task instances one run makes.
pub const MAX_INSTANCES: u64 = 10_000;

/// The instances of the templates `patterns` match (all when there are none), `seeds` each.
pub fn instances(families: &[Family], patterns: &[String], seeds: u64) -> Result<Vec<Instance>> {
    let ids: Vec<String> = families
        .iter()
        .flat_map(|f| {
            f.templates
                .iter()
                .map(move |t| format!("{}/{}", f.name, t.id))
        })
        .collect();
    let matched = ids
        .iter()
        .filter(|id| patterns.is_empty() || patterns.iter().any(|p| glob(p, id)))
        .count();
    if matched == 0 {
        bail!(
            "no task matches {patterns:?}; the suite has: {}",
            ids.join(", ")
        );
    }
    let total = u64::try_from(matched)
        .unwrap_or(u64::MAX)
        .saturating_mul(seeds);
    if total > MAX_INSTANCES {
        bail!(
            "{matched} templates × {seeds} seeds make {total} task instances, and a run makes \
             at most {MAX_INSTANCES}: lower --seeds or narrow --tasks"
        );
    }
    Ok(droidmesh_eval::select(families, patterns, seeds)?)
}
