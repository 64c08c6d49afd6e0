//! The built-in cards: one for each app of the simulated phone, written against its screens
//! (`crates/sim/apps/default.toml`).

/// (package, label, card) of every built-in card.
const CARDS: &[(&str, &str, &str)] = &[
    (
        "com.android.settings",
        "Settings",
        include_str!("../cards/settings.md"),
    ),
    (
        "com.droidmesh.notes",
        "Notes",
        include_str!("../cards/notes.md"),
    ),
    (
        "com.android.messaging",
        "Messages",
        include_str!("../cards/messages.md"),
    ),
    (
        "com.android.contacts",
        "Contacts",
        include_str!("../cards/contacts.md"),
    ),
    (
        "com.droidmesh.tasks",
        "Tasks",
        include_str!("../cards/tasks.md"),
    ),
    (
        "com.droidmesh.expenses",
        "Expenses",
        include_str!("../cards/expenses.md"),
    ),
    (
        "com.droidmesh.clock",
        "Clock",
        include_str!("../cards/clock.md"),
    ),
];

/// The built-in card of `package`.
pub fn card(package: &str) -> Option<&'static str> {
    CARDS
        .iter()
        .find(|(p, _, _)| *p == package)
        .map(|(_, _, c)| c.trim_end())
}

/// (package, label) of every built-in card.
pub fn labels() -> Vec<(&'static str, &'static str)> {
    CARDS.iter().map(|(p, l, _)| (*p, *l)).collect()
}
