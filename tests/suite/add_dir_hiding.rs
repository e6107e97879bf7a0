//! What a `read_file` deny rule covers in a directory added with `--add-dir` is hidden from
//! commands by the OS sandbox, as it is in the workspace: allowed code (an interpreter the user
//! allowed) reads an empty file there, and the rest of the added directory as before.

use super::support::files::assert_file;
use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::Turn;

#[test]
fn allowed_code_cannot_read_what_read_deny_rules_cover_in_an_added_dir() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[("a.txt", "a\n")]);
    let extra = repo.root().join("extra");
    std::fs::create_dir_all(extra.join("deep")).unwrap();
    std::fs::write(extra.join(".env"), "SECRET=hunter2-extra\n").unwrap();
    std::fs::write(extra.join("deep/.env"), "SECRET=hunter2-deep\n").unwrap();
    std::fs::write(extra.join("notes.txt"), "plain-notes-ok\n").unwrap();
    let extra = std::fs::canonicalize(extra).unwrap();
    let read = format!(
        "python3 -c 'print(repr(open(\"{0}/.env\").read()), open(\"{0}/deep/.env\").read(), \
         open(\"{0}/notes.txt\").read())'",
        extra.display()
    );
    let dir = extra.display().to_string();
    let server = start(agent([runs(&read), Turn::text("done")]));
    let stderr = stderr_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["-p", "go", "--permission-mode", "bypass", "--add-dir", &dir])
            .args(["--disallowedTools", "read_file(**/.env)"])
            .args(["--allowedTools", "run_command(python3:*)"]),
    );
    let requests = server.model_requests();
    assert_never_sent(&requests, "hunter2", &stderr);
    let result = requests[1].body.to_string();
    assert!(result.contains("plain-notes-ok"), "{result}\n{stderr}");
    assert_file(&extra.join(".env"), "SECRET=hunter2-extra\n");
}
