//! The droidmesh scripter: runs the off-device JavaScript sessions of `<script>` subgoals.
