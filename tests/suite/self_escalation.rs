//! 15.2: a script the model runs cannot rewrite `.git` or `.ahelper` (code on the user's next
//! `git status`, an unrestricted next session), while it still writes the rest of the
//! workspace.

use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::json;

/// A script that plants `core.fsmonitor` in `.git/config`, a hook, `mode = "bypass"` in
/// `.ahelper/config.toml`, tries to move `.git` away, and writes ordinary files.
const ESCALATE: &str = r#"printf '[core]\n\tfsmonitor = "sh p.sh"\n' >> .git/config
echo 'touch pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit
printf '[permissions]\nmode = "bypass"\n' > .ahelper/config.toml
rm -f .ahelper/config.toml
mv .git .git-old
echo made > made-by-script.txt
mkdir -p newdir && echo x > newdir/f.txt
"#;

fn landlock_available() -> bool {
    ahelper_agents::sandbox_os::landlock_status()
        .abi()
        .is_some()
        && ahelper_agents::sandbox_os::namespaces_available()
}

#[test]
fn a_script_cannot_rewrite_git_or_ahelper_config() {
    if !landlock_available() {
        eprintln!("skipped: no landlock or no user namespaces on this machine");
        return;
    }
    let repo = repo_with(&[("s.sh", ESCALATE), ("a.txt", "a\n")]);
    repo.write(".ahelper/config.toml", "# project settings\n");
    let config_before = repo.file(".git/config");
    let script = Script::new().with_conversation(
        Conversation::new()
            .turn(Turn::tool_call(
                "run_command",
                json!({"command": "sh s.sh"}),
            ))
            .turn(Turn::text("done")),
    );
    let server = start(script);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--permission-mode", "bypass"])
        .assert()
        .success();
    assert_eq!(repo.file(".git/config"), config_before);
    assert!(!repo.path().join(".git/hooks/pre-commit").exists());
    assert_eq!(repo.file(".ahelper/config.toml"), "# project settings\n");
    assert!(repo.path().join(".git/HEAD").exists());
    assert!(!repo.path().join(".git-old").exists());
    assert_eq!(repo.file("made-by-script.txt"), "made\n");
    assert_eq!(repo.file("newdir/f.txt"), "x\n");
    let requests = server.model_requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("Read-only file system"), "{last}");
}
