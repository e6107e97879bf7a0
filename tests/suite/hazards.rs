//! 15.10: hazardous content a worker's branch adds is flagged per worker in the summary, and
//! `--apply` refuses to merge it into the user's branch without `--allow-hazards` (or a yes
//! on a terminal).

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Script, Turn};

/// What the worker's command plants: a symlink out of the repository, a `..` symlink out of
/// it, a CI workflow, a filter driver, a submodule, a name with an escape character and an
/// 11 MB file.
const PLANT: &str = r#"ln -s /etc/passwd passwd-link
ln -s ../../outside up-link
ln -s a.txt fine-link
mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml
printf '*.c filter=evil\n*.py diff=python\n' > .gitattributes
printf '[submodule "x"]\n\tpath = x\n\turl = ../x\n' > .gitmodules
touch "$(printf 'bad\033[2Jname')"
head -c 11000000 /dev/zero > big.bin
echo A > a.txt"#;

fn planting_worker() -> Script {
    one_worker([runs(PLANT), Turn::text("s1 done")])
}

fn swarm_apply(repo: &TestRepo, extra: &[&str]) -> (i32, String, String) {
    let server = start(planting_worker());
    let out = ahelper(repo, &server, Wire::Anthropic)
        .args(["swarm", "x", "--yes", "--apply"])
        .args(["--permission-mode", "bypass"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hazards_are_listed_per_worker_and_apply_needs_allow_hazards() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let (code, stdout, stderr) = swarm_apply(&repo, &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("not applied: workers added hazardous content"),
        "{stderr}"
    );
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"]),
        head,
        "the user's branch did not move"
    );
    assert_eq!(repo.file("a.txt"), "a\n");
    let hazards: Vec<&str> = stdout.lines().filter(|l| l.contains("hazard: ")).collect();
    for expected in [
        "passwd-link: symlink pointing outside the repository (/etc/passwd)",
        "up-link: symlink pointing outside the repository",
        ".github/workflows/ci.yml: auto-run file",
        ".gitattributes: switches on a git filter/diff/merge driver (*.c filter=evil)",
        ".gitmodules: adds or changes git submodules",
        "big.bin: large file (11.0 MB)",
        "bad\\u{1b}[2Jname: file name with control or bidi characters",
    ] {
        assert!(
            hazards.iter().any(|h| h.contains(expected)),
            "{expected} missing in:\n{stdout}"
        );
    }
    // (the summary names it among the edits outside the worker's scope, not as a hazard)
    assert!(!hazards.iter().any(|h| h.contains("fine-link")), "{stdout}");
    assert!(!stdout.contains("diff=python"), "{stdout}");
    assert!(
        !stdout.contains('\x1b'),
        "the escape is shown escaped: {stdout}"
    );

    let repo = repo_with(&[("a.txt", "a\n")]);
    let (code, stdout, stderr) = swarm_apply(&repo, &["--allow-hazards"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Applied"), "{stdout}");
    assert_eq!(repo.file("a.txt"), "A\n");
}

/// In `accept-edits` the file tools ask before writing an auto-run file (and, with nobody to
/// ask in `-p`, refuse), while ordinary files are written.
#[test]
fn accept_edits_asks_before_writing_auto_run_files() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let script = agent([
        writes(".github/workflows/ci.yml", "on: push\n"),
        writes("sub/.envrc", "echo hi\n"),
        writes("notes.txt", "notes\n"),
        Turn::text("done"),
    ]);
    let server = start(script);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--permission-mode", "accept-edits"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !repo.path().join(".github/workflows/ci.yml").exists(),
        "{stderr}"
    );
    assert!(!repo.path().join("sub/.envrc").exists(), "{stderr}");
    assert_eq!(repo.file("notes.txt"), "notes\n", "{stderr}");
    assert!(stderr.contains("auto-run file"), "{stderr}");
}
