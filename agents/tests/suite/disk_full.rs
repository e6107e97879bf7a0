//! The file tools on a full disk: a real tmpfs of 64 KiB, filled up, then `write_file` and
//! `edit_file` through the tool registry. The original bytes stay intact, no empty or partial
//! file appears, no temporary file is left, and the error says "No space left on device".
//!
//! Mounting needs root (CAP_SYS_ADMIN); without it each test prints why it is skipped.

use ahelper_agents::tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a temporary directory; unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `64k`), or says why it cannot and returns `None`.
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs ({}); run the tests as root to cover a full disk",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount ({e})");
                None
            }
        }
    }

    fn path(&self) -> PathBuf {
        fs::canonicalize(self.dir.path()).unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Writes a filler file in `dir` until the filesystem is full.
fn fill(dir: &Path) {
    let mut filler = fs::File::create(dir.join("filler")).unwrap();
    let chunk = [0u8; 1024];
    loop {
        if let Err(e) = filler.write_all(&chunk).and_then(|()| filler.sync_all()) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            return;
        }
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
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

    let e = call(
        &ctx,
        "write_file",
        json!({"path": "notes.txt", "content": big}),
    )
    .await;
    assert!(e.contains("No space left on device"), "{e}");
    assert!(e.contains("notes.txt"), "{e}");
    assert_eq!(
        fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "original notes\n"
    );

    let e = call(
        &ctx,
        "write_file",
        json!({"path": "new.txt", "content": big}),
    )
    .await;
    assert!(e.contains("No space left on device"), "{e}");
    assert!(!ws.join("new.txt").exists(), "no 0-byte file is left");

    let e = call(
        &ctx,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "original", "new_string": big}),
    )
    .await;
    assert!(e.contains("No space left on device"), "{e}");
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
