//! The droidmesh text manipulator: rewrites the focused text field for `TEXT_TASK:` subgoals.
