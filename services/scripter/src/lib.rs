//! The droidmesh scripter: runs the off-device JavaScript sessions of `<script>` subgoals.
pub mod config;
pub mod error;
pub mod policy;

pub use config::{HttpConfig, ScripterConfig};
pub use error::{ScripterError, to_status};
