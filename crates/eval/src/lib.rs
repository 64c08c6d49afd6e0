//! droidmesh's task suite (`droidmesh eval`): task templates read from TOML files, each
//! instance made from a seed, the initial state it starts from, and the check that reads the
//! phone's state back over its shell (never the agent's own claims).
