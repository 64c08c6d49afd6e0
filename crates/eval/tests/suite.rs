//! The built-in suite against a simulated phone: every template loads, its setup runs, and its
//! check reads the phone back: it fails on the state a task starts from (unless the task starts
//! satisfied) and passes once the phone holds what the goal asks. Task files with mistakes are
//! refused naming the file and the field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use droidmesh_eval::{Check, Phone, ShellOutput, builtin, select, set_up};
use droidmesh_sim::{SimDevice, SimOptions};

struct Sim(SimDevice);

impl Phone for Sim {
    async fn shell(&self, command: &str) -> Result<ShellOutput, String> {
        let out = self.0.shell(command);
        let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(ShellOutput {
            stdout,
            exit_code: out.code,
        })
    }
}

/// One simulated phone (on a free port) and its fleet, to shut down at the end.
async fn one_phone() -> (droidmesh_sim::SimFleet, Sim) {
    let fleet = droidmesh_sim::start(SimOptions {
        base_port: 0,
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let phone = Sim(fleet.devices()[0].clone());
    (fleet, phone)
}

/// Puts the phone in the state a setting check wants, through the shell; a question is
/// answered with the value it wants. Returns that answer, or `None` for a check this test
/// cannot satisfy by hand (records: the oracles satisfy those through the mesh).
async fn satisfy(phone: &Sim, check: &Check) -> Option<String> {
    match check {
        Check::Setting { name, equals } => {
            let (ns, key) = name.split_once(':').unwrap();
            let out = phone
                .shell(&format!("settings put {ns} {key} {equals}"))
                .await
                .unwrap();
            assert_eq!(out.exit_code, 0, "{}", out.stdout);
            Some(String::new())
        }
        Check::Answer { contains } => Some(format!("It is {contains}.")),
        Check::Clipboard { equals, contains } => {
            let text = equals.as_ref().or(contains.as_ref()).unwrap();
            let out = phone
                .shell(&format!(
                    "am broadcast -a clipper.set -e text '{}'",
                    text.replace('\'', "'\\''")
                ))
                .await
                .unwrap();
            assert!(out.stdout.contains("result=-1"), "{}", out.stdout);
            Some(String::new())
        }
        Check::All(checks) => {
            let mut answer = String::new();
            for c in checks {
                answer.push_str(&Box::pin(satisfy(phone, c)).await?);
            }
            Some(answer)
        }
        _ => None,
    }
}

#[tokio::test]
async fn every_check_fails_where_its_task_starts_and_passes_once_the_goal_holds() {
    let (fleet, phone) = one_phone().await;
    let families = builtin().unwrap();
    let instances = select(&families, &[], 2).unwrap();
    assert!(instances.len() >= 16, "{}", instances.len());
    for inst in &instances {
        set_up(&phone, inst).await.unwrap();
        let start = inst.check.run(&phone, "").await.unwrap();
        assert_eq!(
            start.success, inst.satisfied_at_start,
            "{}: at the start the check found {}",
            inst.id, start.detail
        );
        if !inst.satisfied_at_start {
            assert!(start.score < 1.0, "{}: {}", inst.id, start.detail);
        }
        let Some(answer) = satisfy(&phone, &inst.check).await else {
            continue;
        };
        let done = inst.check.run(&phone, &answer).await.unwrap();
        assert!(
            done.success && done.score == 1.0,
            "{}: {}",
            inst.id,
            done.detail
        );
    }
    fleet.shutdown().await;
}

#[tokio::test]
async fn a_composite_goal_scores_the_fraction_done_and_names_what_is_missing() {
    let (fleet, phone) = one_phone().await;
    let families = builtin().unwrap();
    let inst = select(&families, &["settings/offline".into()], 1)
        .unwrap()
        .remove(0);
    set_up(&phone, &inst).await.unwrap();
    phone
        .shell("settings put global airplane_mode_on 1")
        .await
        .unwrap();
    let f = inst.check.run(&phone, "").await.unwrap();
    assert!(!f.success);
    assert!((f.score - 1.0 / 3.0).abs() < 1e-9, "{}", f.score);
    assert!(
        f.detail.contains("1 of 3 parts done")
            && f.detail.contains("global wifi_on is 1; the task wants 0"),
        "{}",
        f.detail
    );
    fleet.shutdown().await;
}

#[test]
fn seeds_give_reproducible_goals_and_a_glob_selects_templates() {
    let families = builtin().unwrap();
    let a = select(&families, &["settings/wifi*".into()], 4).unwrap();
    let b = select(&families, &["settings/wifi*".into()], 4).unwrap();
    assert_eq!(a, b);
    let templates: std::collections::BTreeSet<_> = a.iter().map(|i| i.template.as_str()).collect();
    assert_eq!(
        templates.into_iter().collect::<Vec<_>>(),
        [
            "settings/wifi",
            "settings/wifi_already",
            "settings/wifi_and_bluetooth"
        ]
    );
    assert!(a.iter().all(|i| !i.goal.contains("{{")), "{a:?}");
    assert_eq!(a[0].id, "settings/wifi#0");
}

#[test]
fn mistakes_in_a_task_file_name_the_file_and_the_field() {
    let good = r#"
family = "mine"
[[task]]
id = "t"
goal = "Turn {{state.word}} Wi-Fi"
params.state.one_of = [{ word = "on", value = "1" }]
max_steps = 5
check.setting = { name = "global:wifi_on", equals = "{{state.value}}" }
oracle = ["complete(true, 'done')"]
"#;
    droidmesh_eval::task::parse_family("mine.toml", good).unwrap();
    for (broken, field, words) in [
        (
            good.replace("{{state.word}}", "{{state.wrod}}"),
            "task[0] (t).goal",
            "no field wrod",
        ),
        (
            good.replace("max_steps = 5", "max_steps = 0"),
            "task[0] (t).max_steps",
            "must be 1 to 100",
        ),
        (
            good.replace("global:wifi_on", "wifi_on"),
            "task[0] (t).check",
            "namespace:key",
        ),
        (
            good.replace("oracle = [\"complete(true, 'done')\"]", "oracle = []"),
            "task[0] (t).oracle",
            "is empty",
        ),
        (
            good.replace("max_steps", "max_stesp"),
            "task[0] (t)",
            "unknown field `max_stesp`",
        ),
        (
            good.replace("family = \"mine\"", "family = \"Mine!\""),
            "family",
            "not a name",
        ),
        (good.replace("goal =", "goal = ["), "(file)", "TOML"),
        (
            good.replace(
                "check.setting = { name = \"global:wifi_on\", equals = \"{{state.value}}\" }",
                "check.clipboard = {}",
            ),
            "task[0] (t).check",
            "give equals, contains or both",
        ),
        (
            good.replace(
                "check.setting = { name = \"global:wifi_on\", equals = \"{{state.value}}\" }",
                "check.clipboard = { contains = \" \" }",
            ),
            "task[0] (t).check",
            "clipboard.contains is empty",
        ),
        (
            good.replace(
                "check.setting = { name = \"global:wifi_on\", equals = \"{{state.value}}\" }",
                "check.clipboard = { equals = \"{{state.wrod}}\" }",
            ),
            "task[0] (t).check",
            "no field wrod",
        ),
    ] {
        let e = droidmesh_eval::task::parse_family("mine.toml", &broken).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.field.as_str()),
            ("mine.toml", field),
            "{e}"
        );
        assert!(e.message.contains(words), "{e}");
    }
}

#[tokio::test]
async fn file_and_answer_checks_read_the_phone_and_the_answer() {
    let (fleet, phone) = one_phone().await;
    let parse = |toml: &str| -> Check {
        #[derive(serde::Deserialize)]
        struct W {
            check: Check,
        }
        let w: W = toml::from_str(toml).unwrap();
        assert_eq!(w.check.problem(), None);
        w.check
    };
    let file = parse(r#"check.file = { path = "/sdcard/Notes/list.md", contains = "milk" }"#);
    let f = file.run(&phone, "").await.unwrap();
    assert!(
        !f.success && f.detail.contains("does not exist"),
        "{}",
        f.detail
    );
    phone.shell("mkdir -p /sdcard/Notes").await.unwrap();
    phone
        .shell("echo 'eggs and milk' > /sdcard/Notes/list.md")
        .await
        .unwrap();
    let f = file.run(&phone, "").await.unwrap();
    assert!(f.success, "{}", f.detail);
    let gone = parse(r#"check.no_file = { path = "/sdcard/Notes/list.md" }"#);
    assert!(!gone.run(&phone, "").await.unwrap().success);
    phone.shell("rm /sdcard/Notes/list.md").await.unwrap();
    assert!(gone.run(&phone, "").await.unwrap().success);

    let folder = parse(r#"check.dir = { path = "/sdcard/Notes/Work" }"#);
    let f = folder.run(&phone, "").await.unwrap();
    assert!(!f.success && f.detail.contains("no folder"), "{}", f.detail);
    phone.shell("echo x > /sdcard/Notes/Work").await.unwrap();
    let f = folder.run(&phone, "").await.unwrap();
    assert!(!f.success, "a file is not a folder: {}", f.detail);
    phone.shell("rm /sdcard/Notes/Work").await.unwrap();
    phone.shell("mkdir -p /sdcard/Notes/Work").await.unwrap();
    let f = folder.run(&phone, "").await.unwrap();
    assert!(f.success, "{}", f.detail);

    let answer = parse(r#"check.answer = { contains = "Ada  Lovelace" }"#);
    assert!(
        answer
            .run(&phone, "Your high priority contact is ada lovelace.")
            .await
            .unwrap()
            .success
    );
    let f = answer.run(&phone, "Alan Turing").await.unwrap();
    assert!(
        !f.success && f.detail.contains("does not name"),
        "{}",
        f.detail
    );
    fleet.shutdown().await;
}

#[tokio::test]
async fn the_clipboard_check_reads_the_phones_clipboard_and_says_what_it_found() {
    let (fleet, phone) = one_phone().await;
    let parse = |toml: &str| -> Check {
        #[derive(serde::Deserialize)]
        struct W {
            check: Check,
        }
        let w: W = toml::from_str(toml).unwrap();
        assert_eq!(w.check.problem(), None);
        w.check
    };
    let exact = parse(r#"check.clipboard = { equals = "Zoë Müller: +49 89 5550 2041" }"#);
    let words = parse(r#"check.clipboard = { contains = "+49 89 5550 2041" }"#);
    let f = exact.run(&phone, "").await.unwrap();
    assert!(!f.success);
    assert_eq!(
        f.detail,
        "the clipboard is empty; the task wants exactly \"Zoë Müller: +49 89 5550 2041\""
    );
    phone
        .shell("am broadcast -a clipper.set -e text 'Zoë Müller: +49 89 5550 2041'")
        .await
        .unwrap();
    for check in [&exact, &words] {
        let f = check.run(&phone, "").await.unwrap();
        assert!(f.success && f.score == 1.0, "{}", f.detail);
    }
    phone
        .shell("am broadcast -a clipper.set -e text '+49 89 5550 20411'")
        .await
        .unwrap();
    let f = words.run(&phone, "").await.unwrap();
    assert!(!f.success);
    assert_eq!(
        f.detail,
        "the clipboard holds \"+49 89 5550 20411\"; the task wants \"+49 89 5550 2041\" as whole words"
    );
    fleet.shutdown().await;
}
