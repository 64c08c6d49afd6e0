//! The task's workspace: files written are reported with their sizes and stay inside it.
use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn files_written_are_reported_and_stay_inside_the_workspace() {
    let mut cfg = config();
    cfg.workspace_max_bytes = 64;
    cfg.replica = Some("scripter-1".into());
    let rig = rig_with(
        cfg,
        vec![
            step(
                "write_file('report.csv', 'a,b\\n1,2\\n');\nwrite_file('data/raw.json', JSON.stringify({x: 1}));\nwrite_file('pixel.bin', 'AAEC', 'base64');\nfor (const bad of ['../escape.txt', '/etc/owned', 'big.txt']) {\n  try { write_file(bad, bad === 'big.txt' ? 'z'.repeat(100) : 'no') } catch (e) { console.log(e.message) }\n}\nlist_files()",
            ),
            reply("Saved report.csv and data/raw.json."),
            step("console.log(read_file('report.csv').trim(), read_file('pixel.bin', 'base64'))"),
            reply("Read them back."),
        ],
    )
    .await;
    let mut req = request("Save the report.");
    req.task_id = "task/7".into();
    let events = run(&rig, req.clone()).await;
    let (output, error) = &observations(&events)[0];
    assert_eq!(error, &None);
    let lines: Vec<&str> = output.lines().collect();
    assert!(
        lines[0].starts_with(
            "write_file: file name `../escape.txt` is refused: `..` would leave the workspace"
        ),
        "{output}"
    );
    assert!(
        lines[1]
            .starts_with("write_file: file name `/etc/owned` is refused: it is an absolute path"),
        "{output}"
    );
    assert!(lines[2].starts_with("write_file: writing `big.txt` (100 bytes) would bring the workspace to 118 bytes, over its limit of 64 bytes"), "{output}");
    assert_eq!(
        lines[3],
        r#"=> [{"name":"data/raw.json","size_bytes":7},{"name":"pixel.bin","size_bytes":3},{"name":"report.csv","size_bytes":8}]"#
    );

    let f = finished(&events);
    assert!(f.success);
    let files = &f.result.as_ref().unwrap().files;
    let root = rig.workspace.path().canonicalize().unwrap();
    let shown: Vec<(&str, u64, &str, &str)> = files
        .iter()
        .map(|f| {
            (
                f.name.as_str(),
                f.size_bytes,
                f.mime_type.as_str(),
                f.location.as_str(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "data/raw.json",
                7,
                "application/json",
                "scripter://scripter-1/task%2F7/data/raw.json"
            ),
            (
                "pixel.bin",
                3,
                "application/octet-stream",
                "scripter://scripter-1/task%2F7/pixel.bin"
            ),
            (
                "report.csv",
                8,
                "text/csv",
                "scripter://scripter-1/task%2F7/report.csv"
            ),
        ]
    );
    for file in files {
        let path = std::path::Path::new(&file.path);
        assert!(
            path.is_absolute() && path.starts_with(&root),
            "{}",
            file.path
        );
        assert_eq!(std::fs::metadata(path).unwrap().len(), file.size_bytes);
    }
    assert!(!root.join("escape.txt").exists());
    assert!(!std::path::Path::new("/etc/owned").exists());

    // A later script of the same task sees the files.
    let again = run(&rig, req).await;
    let (system, _) = prompts(&rig, 2);
    assert!(system.contains("- report.csv (8 bytes)"), "{system}");
    assert_eq!(observations(&again)[0], ("a,b\n1,2 AAEC".to_string(), None));
}
