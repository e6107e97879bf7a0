//! Help texts and the README say what the program does (issue 10 item 8).

use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The stdout of `ahelper args…` (a help text), which succeeds.
fn help_of(args: &[&str]) -> String {
    let help = assert_cmd::Command::cargo_bin("ahelper")
        .unwrap()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(help).unwrap()
}

/// `ahelper --help`.
fn help() -> String {
    help_of(&["--help"])
}

/// `-v` is described for each mode it affects (and for those it does not change).
#[test]
fn verbose_help_covers_every_mode() {
    let help = help();
    let verbose = &help[help.find("--verbose").unwrap()..];
    let verbose = &verbose[..verbose.find("\n\n").unwrap_or(verbose.len())];
    for mode in ["`-p`", "REPL", "`swarm`", "ahelper.log"] {
        assert!(verbose.contains(mode), "-v help lacks {mode}: {verbose}");
    }
    let swarm_help = help_of(&["swarm", "--help"]);
    assert!(swarm_help.contains("--verbose"), "{swarm_help}");
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

/// Flags (`--name`, `-x`) in a piece of a README table cell.
fn flags_in(cell: &str) -> Vec<String> {
    cell.split(|c: char| c.is_whitespace() || "`/(),|".contains(c))
        .filter(|t| {
            let name = t.trim_start_matches('-');
            t.starts_with('-') && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        })
        .map(|t| t.trim_end_matches(['.', ':', ';']).to_string())
        .collect()
}

/// The "Coming from Claude Code / Codex" section maps flags to ones ahelper has: every flag in
/// its first table's ahelper column (and the Claude Code flag of a row that says "the same")
/// is in `ahelper --help`.
#[test]
fn readme_claude_code_mapping_names_only_real_flags() {
    let text = readme();
    let start = text
        .find("## Coming from Claude Code / Codex")
        .expect("the README has the section");
    let section = &text[start..];
    let table: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .collect();
    assert!(table.len() >= 10, "{table:?}");
    let help = help();
    let mut checked = 0;
    for row in table {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
        let (theirs, ours) = (cells[0], cells[1]);
        let mut flags = flags_in(ours);
        if ours.starts_with("the same") {
            flags.extend(flags_in(theirs));
        }
        for flag in flags {
            let listed = help.contains(&format!("{flag} "))
                || help.contains(&format!("{flag},"))
                || help.contains(&format!("{flag}]"))
                || help.contains(&format!("{flag}\n"));
            assert!(
                listed,
                "README maps to {flag}, which `ahelper --help` lacks ({row})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 12, "{checked} flags checked");
    for command in ["/compact", "/cost", "/mcp", "/swarm", "/runs"] {
        assert!(section.contains(command), "{command}");
    }
}
