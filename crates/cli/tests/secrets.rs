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
