//! App cards as the agents get them: from a directory (edited between steps), a card server on
//! loopback (and what happens when it fails or is late), the built-in cards, and a step's choice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use droidmesh_app_cards::{AppCards, AppCardsConfig, Source, render};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join("android").join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn cards_in(root: &Path) -> AppCards {
    AppCards::new(&AppCardsConfig {
        dir: Some(root.to_owned()),
        ..AppCardsConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn a_card_from_the_directory_is_read_again_when_it_is_edited() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app_cards.json",
        r#"{"com.example.mail": "mail.md"}"#,
    );
    write(
        dir.path(),
        "mail.md",
        "# Mail\nThe inbox is the first screen.\n",
    );
    let cards = cards_in(dir.path());
    let card = cards.card("com.example.mail", "read mail").await.unwrap();
    assert_eq!(card.text, "# Mail\nThe inbox is the first screen.");
    assert_eq!(card.source, Source::Dir);

    write(
        dir.path(),
        "mail.md",
        "# Mail\nCompose is the pencil at the bottom right.\n",
    );
    let card = cards.card("com.example.mail", "read mail").await.unwrap();
    assert_eq!(
        card.text,
        "# Mail\nCompose is the pencil at the bottom right."
    );

    // The map itself is reread: a package added, another removed.
    write(
        dir.path(),
        "app_cards.json",
        r#"{"com.example.chat": {"file": "chat.md", "label": "Chat"}}"#,
    );
    write(dir.path(), "chat.md", "Threads are listed by time.");
    assert_eq!(cards.card("com.example.mail", "").await, None);
    assert_eq!(
        cards.card("com.example.chat", "").await.unwrap().text,
        "Threads are listed by time."
    );
}

#[tokio::test]
async fn a_damaged_map_keeps_the_last_good_one_and_paths_outside_the_folder_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.md");
    std::fs::write(&secret, "outside").unwrap();
    write(
        dir.path(),
        "app_cards.json",
        &format!(
            r#"{{"a.good": "good.md", "a.up": "../secret.md", "a.abs": "{}"}}"#,
            secret.display()
        ),
    );
    write(dir.path(), "good.md", "good card");
    let cards = cards_in(dir.path());
    assert_eq!(cards.card("a.good", "").await.unwrap().text, "good card");
    assert_eq!(cards.card("a.up", "").await, None);
    assert_eq!(cards.card("a.abs", "").await, None);

    write(dir.path(), "app_cards.json", "{ not json");
    assert_eq!(cards.card("a.good", "").await.unwrap().text, "good card");
    // A card too long to use is not used.
    write(dir.path(), "app_cards.json", r#"{"a.big": "big.md"}"#);
    write(dir.path(), "big.md", &"x".repeat(70 * 1024));
    assert_eq!(cards.card("a.big", "").await, None);
}

#[tokio::test]
async fn a_step_gets_the_card_of_the_app_in_front_then_of_the_apps_its_goal_names() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app_cards.json",
        r#"{"com.example.mail": "mail.md", "com.example.chat": {"file": "chat.md", "label": "Chatty"}}"#,
    );
    write(dir.path(), "mail.md", "# Mailbox\nInbox first.");
    write(dir.path(), "chat.md", "# Ignored heading\nThreads.");
    let cards = cards_in(dir.path());
    let packages = |c: Vec<droidmesh_app_cards::Card>| -> Vec<String> {
        c.into_iter().map(|c| c.package).collect()
    };
    // In front: its card only (the goal names no app).
    assert_eq!(
        packages(
            cards
                .for_step(Some("com.example.mail"), "archive the newest")
                .await
        ),
        ["com.example.mail"]
    );
    // Named by the heading, the map's label, or a built-in app's label; once each.
    assert_eq!(
        packages(
            cards
                .for_step(
                    Some("com.android.launcher3"),
                    "Copy the code from mailbox into chatty, then check Settings"
                )
                .await
        ),
        [
            "com.example.chat",
            "com.example.mail",
            "com.android.settings"
        ]
    );
    assert!(cards.for_step(None, "turn on wi-fi").await.is_empty());
    // Off: nothing.
    let off = AppCards::new(&AppCardsConfig {
        enabled: false,
        ..AppCardsConfig::default()
    })
    .unwrap();
    assert!(
        off.for_step(Some("com.android.settings"), "Settings")
            .await
            .is_empty()
    );
}

/// A card server on loopback that answers for one package, 404 for others, and never answers
/// for `com.slow`; it keeps every request body.
async fn card_server() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/app-cards",
        post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let kept = Arc::clone(&kept);
            async move {
                kept.lock().unwrap().push(body.clone());
                match body["package_name"].as_str() {
                    Some("com.android.settings") => (
                        axum::http::StatusCode::OK,
                        axum::Json(serde_json::json!({ "app_card": "from the server" })),
                    ),
                    Some("com.broken") => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        axum::Json(serde_json::json!({})),
                    ),
                    Some("com.slow") => std::future::pending().await,
                    _ => (
                        axum::http::StatusCode::NOT_FOUND,
                        axum::Json(serde_json::json!({})),
                    ),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn the_card_server_is_asked_first_and_the_local_cards_answer_when_it_has_none_fails_or_is_late()
 {
    let (url, seen) = card_server().await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app_cards.json",
        r#"{"com.slow": "slow.md", "com.broken": "slow.md"}"#,
    );
    write(dir.path(), "slow.md", "local card");
    let cards = AppCards::new(&AppCardsConfig {
        dir: Some(dir.path().to_owned()),
        server: Some(format!("{url}/")),
        server_timeout_ms: 300,
        ..AppCardsConfig::default()
    })
    .unwrap();
    let card = cards
        .card("com.android.settings", "turn on wi-fi")
        .await
        .unwrap();
    assert_eq!(
        (card.text.as_str(), card.source),
        ("from the server", Source::Server)
    );
    assert_eq!(
        seen.lock().unwrap()[0],
        serde_json::json!({
            "package_name": "com.android.settings",
            "instruction": "turn on wi-fi",
            "platform": "android"
        })
    );
    // 404: the built-in card.
    let card = cards.card("com.android.contacts", "x").await.unwrap();
    assert_eq!(card.source, Source::Builtin);
    // A failing server and a late one: the directory's card, within the timeout.
    assert_eq!(
        cards.card("com.broken", "x").await.unwrap().source,
        Source::Dir
    );
    let started = std::time::Instant::now();
    assert_eq!(
        cards.card("com.slow", "x").await.unwrap().text,
        "local card"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A server's answer is kept a while: the same question is not asked again.
    let asked = seen.lock().unwrap().len();
    cards
        .card("com.android.settings", "turn on wi-fi")
        .await
        .unwrap();
    assert_eq!(seen.lock().unwrap().len(), asked);
}

#[test]
fn a_configuration_that_cannot_work_names_its_field() {
    let err = |cfg: AppCardsConfig| AppCards::new(&cfg).unwrap_err().to_string();
    let e = err(AppCardsConfig {
        dir: Some("/no/such/dir".into()),
        ..AppCardsConfig::default()
    });
    assert!(
        e.starts_with("app_cards.dir: /no/such/dir is not a directory"),
        "{e}"
    );
    let e = err(AppCardsConfig {
        server: Some("ftp://cards".into()),
        ..AppCardsConfig::default()
    });
    assert!(e.starts_with("app_cards.server: must be an http"), "{e}");
    let e = err(AppCardsConfig {
        max_chars: 0,
        ..AppCardsConfig::default()
    });
    assert!(e.starts_with("app_cards.max_chars"), "{e}");
}

/// Every quoted name in a built-in card is a text the simulated app shows, so a card does
/// not send the agent looking for a button that is not there.
#[tokio::test]
async fn the_built_in_cards_name_only_what_the_simulated_apps_show() {
    let apps = include_str!("../../sim/apps/default.toml");
    let cards = AppCards::new(&AppCardsConfig::default()).unwrap();
    for (package, _) in [
        ("com.android.settings", ()),
        ("com.droidmesh.notes", ()),
        ("com.android.messaging", ()),
        ("com.android.contacts", ()),
        ("com.droidmesh.tasks", ()),
        ("com.droidmesh.expenses", ()),
        ("com.droidmesh.clock", ()),
    ] {
        let card = cards.card(package, "").await.unwrap();
        assert_eq!(card.source, Source::Builtin);
        assert!(
            apps.contains(&format!("package = \"{package}\"")),
            "{package}"
        );
        for quoted in card.text.split('"').skip(1).step_by(2) {
            assert!(
                apps.contains(&format!("text = \"{quoted}\""))
                    || apps.contains(&format!("hint = \"{quoted}\""))
                    || apps.contains(&format!("hint = \"{quoted} ")),
                "{package}'s card names \"{quoted}\", which its app does not show"
            );
        }
    }
    let r = render(&[cards.card("com.android.settings", "").await.unwrap()], 50);
    assert!(r.cut() && r.cap_note().unwrap().contains("of"), "{r:?}");
}

#[tokio::test]
async fn a_prompt_gets_the_requests_card_then_the_steps_cards_and_the_cut_said() {
    let cards = AppCards::new(&AppCardsConfig {
        max_chars: 60,
        ..AppCardsConfig::default()
    })
    .unwrap();
    let text = cards
        .prompt_text(
            Some("com.android.settings"),
            "turn on wi-fi",
            Some(" Given card. "),
        )
        .await
        .unwrap();
    assert!(
        text.starts_with("Given card.\n\n### com.android.settings\n# Settings"),
        "{text}"
    );
    assert!(
        text.ends_with("characters)") && text.contains("(app cards cut to "),
        "{text}"
    );
    // Nothing in front, nothing named, nothing given: no text at all.
    assert_eq!(
        cards
            .prompt_text(Some("com.android.launcher3"), "hello", None)
            .await,
        None
    );
    assert_eq!(
        cards
            .prompt_text(None, "hello", Some("only this"))
            .await
            .as_deref(),
        Some("only this")
    );
}
