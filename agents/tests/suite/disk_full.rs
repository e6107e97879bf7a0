//! The file tools on a full disk: a real tmpfs of 64 KiB, filled up, then `write_file` and
//! `edit_file` through the tool registry. The original bytes stay intact, no empty or partial
//! file appears, no temporary file is left, and the error says "No space left on device".
//!
//! Mounting needs root (CAP_SYS_ADMIN); without it each test prints why it is skipped.

use super::support::tmpfs::{Tmpfs, fill};
use ahelper_agents::tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use std::fs;
use std::path::Path;

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Calls `tool` with `input` on a full disk; asserts it fails saying "No space left on
/// device" and returns what it said.
async fn no_space(ctx: &ToolContext, tool: &str, input: Value) -> String {
    let e = call(ctx, tool, input).await;
    assert!(e.contains("No space left on device"), "{e}");
    e
}

async fn call(ctx: &ToolContext, tool: &str, input: Value) -> String {
    let result: Result<ToolOutput, ToolError> = ToolRegistry::standard()
        .get(tool)
        .unwrap()
        .call(input, ctx)
        .await;
    match result {
        Ok(o) if o.is_error => o.content,
        Ok(o) => panic!("{tool} should fail on a full disk, got {o:?}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn write_and_edit_on_a_full_disk_keep_the_original_and_say_no_space() {
    let Some(fs_) = Tmpfs::mount("64k") else {
        return;
    };
    let ws = fs_.path();
    fs::write(ws.join("notes.txt"), "original notes\n").unwrap();
    fill(&ws);
    let ctx = ToolContext::new(&ws).unwrap();
    let big = "x".repeat(16 * 1024);

    let e = no_space(
        &ctx,
        "write_file",
        json!({"path": "notes.txt", "content": big}),
    )
    .await;
    assert!(e.contains("notes.txt"), "{e}");
    assert_eq!(
        fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "original notes\n"
    );

    no_space(
        &ctx,
        "write_file",
        json!({"path": "new.txt", "content": big}),
    )
    .await;
    assert!(!ws.join("new.txt").exists(), "no 0-byte file is left");

    no_space(
        &ctx,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "original", "new_string": big}),
    )
    .await;
    assert_eq!(
        fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "original notes\n"
    );
    assert_eq!(
        entries(&ws),
        vec!["filler", "notes.txt"],
        "no temporary file left behind"
    );

    // Once space is freed the same write succeeds.
    fs::remove_file(ws.join("filler")).unwrap();
    let ok = ToolRegistry::standard()
        .get("write_file")
        .unwrap()
        .call(json!({"path": "notes.txt", "content": big}), &ctx)
        .await
        .unwrap();
    assert!(!ok.is_error, "{ok:?}");
    assert_eq!(fs::read_to_string(ws.join("notes.txt")).unwrap(), big);
}

#[tokio::test]
async fn an_overwrite_keeps_the_file_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ws = fs::canonicalize(dir.path()).unwrap();
    fs::write(ws.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o751)).unwrap();
    let ctx = ToolContext::new(&ws).unwrap();
    let out = ToolRegistry::standard()
        .get("write_file")
        .unwrap()
        .call(
            json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    let mode = fs::metadata(ws.join("run.sh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o751);
    assert_eq!(entries(&ws), vec!["run.sh"]);
}
