//! The droidmesh binary.
fn main() {}
