//! Help texts and the README say what the program does (issue 10 item 8).

use predicates::prelude::*;
use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// `-v` is described for each mode it affects (and for those it does not change).
#[test]
fn verbose_help_covers_every_mode() {
    let help = assert_cmd::Command::cargo_bin("ahelper")
        .unwrap()
        .arg("--help")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let help = String::from_utf8(help).unwrap();
    let verbose = &help[help.find("--verbose").unwrap()..];
    let verbose = &verbose[..verbose.find("\n\n").unwrap_or(verbose.len())];
    for mode in ["`-p`", "REPL", "`swarm`", "ahelper.log"] {
        assert!(verbose.contains(mode), "-v help lacks {mode}: {verbose}");
    }
    assert_cmd::Command::cargo_bin("ahelper")
        .unwrap()
        .args(["swarm", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--verbose"));
}

/// The README mentions `AGENTS.md` and the demo's temporary directory with how to remove it,
/// and every file it points at is inside the repository and exists.
#[test]
fn readme_points_only_at_files_in_the_repository() {
    let text = readme();
    assert!(text.contains("`AGENTS.md`"));
    assert!(text.contains("mktemp -d") && text.contains("rm -rf"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for link in text.split("](").skip(1) {
        let target = link.split(')').next().unwrap();
        if target.starts_with('#') || target.starts_with("http") {
            continue;
        }
        let path = target.split('#').next().unwrap();
        assert!(
            !path.starts_with('/') && !path.contains(".."),
            "README points outside the repository: {target}"
        );
        assert!(
            root.join(path).exists(),
            "README points at a missing {path}"
        );
        checked += 1;
    }
    assert!(checked > 0);
    for outside in ["/work/", concat!("..", "/shared"), "/home/"] {
        assert!(!text.contains(outside), "README mentions {outside}");
    }
}
