//! Secrets as the binary takes them: `keys new --secret` lists the ids a key's tasks may name,
//! and `serve executor` reads `[secrets] dir`, refusing to start when it cannot.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::process::Command;

fn droidmesh() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_droidmesh"));
    c.env_remove("OPENAI_API_KEY").env("RUST_LOG", "error");
    c
}

#[test]
fn a_new_key_lists_the_secrets_its_tasks_may_name() {
    let out = droidmesh()
        .args([
            "keys",
            "new",
            "--tenant",
            "acme",
            "--secret",
            "PIN",
            "--secret",
            "mail_password",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("secrets = [\"pin\", \"mail_password\"]"),
        "{text}"
    );
    let out = droidmesh()
        .args(["keys", "new", "--tenant", "acme", "--secret", "../pin"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("secret id \"../pin\" must be"), "{err}");
}

#[test]
fn an_executor_whose_secrets_directory_cannot_be_read_refuses_to_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("secrets");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = droidmesh()
        .args([
            "serve",
            "executor",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env("DROIDMESH_SECRETS__DIR", &missing)
        .env("DROIDMESH_LISTEN__ADMIN", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "executor cannot start: secrets.dir {}:",
            missing.display()
        )),
        "{err}"
    );
    // With the directory there, a file in it and a variable for the same id are refused too
    // (one secret, two values), naming both but neither value.
    std::fs::create_dir(&missing).unwrap();
    std::fs::write(missing.join("pin"), "4711\n").unwrap();
    let out = droidmesh()
        .args([
            "serve",
            "executor",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env("DROIDMESH_SECRETS__DIR", &missing)
        .env("DROIDMESH_SECRET_PIN", "0815")
        .env("DROIDMESH_LISTEN__ADMIN", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("DROIDMESH_SECRET_PIN both hold secret 'pin'")
            && !err.contains("4711")
            && !err.contains("0815"),
        "{err}"
    );
}
