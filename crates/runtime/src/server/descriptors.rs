//! The process's open-file limit against what its ports may hold: each held connection is a
//! file descriptor, so a process checks at start that its ports' caps fit, and raises its soft
//! limit toward the hard one when they do not (as a shell's default of 1024 would not).

/// Descriptors a process keeps beyond its ports' connections: outgoing connections (peers,
/// phones, the model), files, the task store, the runtime's own.
pub const RESERVED_DESCRIPTORS: u64 = 1024;

/// Makes sure this process may open `ports` descriptors for its ports' connections plus
/// [`RESERVED_DESCRIPTORS`], raising the soft open-file limit (never beyond the hard one) when
/// it is lower. Returns the limit in force; when even the hard limit is too low, an error that
/// names `keys`, the settings that size the ports.
pub fn ensure_descriptors(ports: u64, keys: &str) -> Result<u64, String> {
    let needed = ports.saturating_add(RESERVED_DESCRIPTORS);
    imp::ensure(needed).map_err(|(limit, why)| {
        format!(
            "{keys} let this process's ports hold up to {ports} connections, and with \
             {RESERVED_DESCRIPTORS} file descriptors for its own files and outgoing connections \
             it needs {needed}, but it may open {limit} ({why}): lower {keys}, or raise the \
             open-file limit (ulimit -n, LimitNOFILE=)"
        )
    })
}

#[cfg(unix)]
mod imp {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    pub(super) fn ensure(needed: u64) -> Result<u64, (u64, String)> {
        let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
        // `None` is unlimited.
        let soft = current.unwrap_or(u64::MAX);
        if soft >= needed {
            return Ok(soft);
        }
        if maximum.is_some_and(|hard| hard < needed) {
            return Err((soft, format!("its hard limit is {}", maximum.unwrap_or(0))));
        }
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(needed),
                maximum,
            },
        )
        .map_err(|e| (soft, format!("raising it to {needed} failed: {e}")))?;
        Ok(needed)
    }
}

#[cfg(not(unix))]
mod imp {
    pub(super) fn ensure(_needed: u64) -> Result<u64, (u64, String)> {
        Ok(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_within_reach_is_granted_and_one_beyond_it_names_the_keys() {
        let limit = ensure_descriptors(2_000, "grpc.max_connections").unwrap();
        assert!(limit >= 2_000 + RESERVED_DESCRIPTORS, "{limit}");
        let err = ensure_descriptors(u64::MAX / 4, "grpc.max_connections").unwrap_err();
        assert!(
            err.starts_with("grpc.max_connections let this process's ports hold up to")
                && err.contains("lower grpc.max_connections, or raise the open-file limit"),
            "{err}"
        );
    }
}
