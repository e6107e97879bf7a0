//! The files a command creates, changes, moves or deletes as its main effect (see
//! [`Facts::modified`]). Option tables: GNU coreutils manual, rsync(1), git-config(1).

use super::{Facts, SimpleCommand, Word, operands, with_text};

/// Options of `cp`, `mv` and `ln` that take a separate value.
const COPY_VALUE_OPTIONS: &[&str] = &["-S", "--suffix", "-t", "--target-directory"];
/// Options of `install` that take a separate value.
#[rustfmt::skip]
const INSTALL_VALUE_OPTIONS: &[&str] = &[
    "-m", "--mode", "-o", "--owner", "-g", "--group", "-S", "--suffix", "-t",
    "--target-directory",
];
/// Options of `rsync` that take a separate value.
#[rustfmt::skip]
const RSYNC_VALUE_OPTIONS: &[&str] = &[
    "-e", "--rsh", "--rsync-path", "--exclude", "--include", "--exclude-from", "--include-from",
    "--files-from", "--filter", "-f", "--backup-dir", "--suffix", "--chmod", "--log-file",
    "--password-file", "-T", "--temp-dir", "--partial-dir", "--compare-dest", "--copy-dest",
    "--link-dest", "--max-size", "--min-size", "--timeout", "--port", "--bwlimit", "--chown",
    "--usermap", "--groupmap", "--out-format", "--log-file-format", "-M", "--remote-option",
];
/// Options of `touch` that take a separate value.
const TOUCH_VALUE_OPTIONS: &[&str] = &["-r", "--reference", "-d", "--date", "-t"];
/// Options of `truncate` that take a separate value.
const TRUNCATE_VALUE_OPTIONS: &[&str] = &["-s", "--size", "-r", "--reference", "-o"];

/// Adds the files `cmd` (the program `name`) modifies to [`Facts::modified`]: destinations of
/// `cp`/`mv`/`install`/`ln`/`rsync`, sources of `mv`, operands of `touch`/`truncate`/`chmod`/
/// `chown`/`chgrp`, `dd of=`, and the file `git config` writes.
pub(super) fn modified_files(facts: &mut Facts, cmd: &SimpleCommand, name: &str) {
    let argv = &cmd.argv;
    match name {
        "cp" | "mv" | "ln" => copy_destinations(facts, argv, name, COPY_VALUE_OPTIONS),
        "install" => copy_destinations(facts, argv, name, INSTALL_VALUE_OPTIONS),
        "rsync" => rsync(facts, argv),
        "touch" => all_operands(facts, argv, TOUCH_VALUE_OPTIONS, 0),
        "truncate" => all_operands(facts, argv, TRUNCATE_VALUE_OPTIONS, 0),
        "chmod" | "chown" | "chgrp" => {
            // The mode or owner comes first, unless `--reference` names it or a symbolic mode
            // looks like an option (`chmod -x FILE`).
            let mode_as_option = name == "chmod" && argv.iter().skip(1).any(is_symbolic_mode);
            let reference = argv.iter().any(|w| w.text.starts_with("--reference"));
            all_operands(facts, argv, &[], usize::from(!mode_as_option && !reference));
        }
        "dd" => {
            for w in argv.iter().skip(1) {
                if let Some(path) = w.text.strip_prefix("of=") {
                    facts.modified.push(with_text(w, path));
                }
            }
        }
        "git" if argv.get(1).is_some_and(|w| w.text == "config") => {
            if let Some(file) = git_config_write(&argv[2..]) {
                facts.modified.push(file);
            }
        }
        _ => {}
    }
}

/// `cp`, `mv`, `ln`, `install`: the target directory or the last operand; `mv` also removes
/// its sources and `install -d` creates every operand.
fn copy_destinations(facts: &mut Facts, argv: &[Word], name: &str, with_value: &[&str]) {
    let ops = operands(argv, with_value);
    let explicit = target_directories(facts, argv);
    let directory_mode = name == "install"
        && argv.iter().skip(1).any(|w| {
            let t = w.text.as_str();
            t == "--directory" || (t.starts_with('-') && !t.starts_with("--") && t.contains('d'))
        });
    if name == "mv" || directory_mode {
        facts.modified.extend(ops.iter().map(|(_, w)| (*w).clone()));
    } else if !explicit {
        last_operand(facts, &ops);
    }
}

/// `rsync SRC… DEST`; `--remove-source-files` also changes the sources.
fn rsync(facts: &mut Facts, argv: &[Word]) {
    let ops = operands(argv, RSYNC_VALUE_OPTIONS);
    last_operand(facts, &ops);
    if argv.iter().any(|w| w.text == "--remove-source-files") {
        facts.modified.extend(ops.iter().map(|(_, w)| (*w).clone()));
    }
}

/// The destination of `SRC… DEST`: the last of two or more operands.
fn last_operand(facts: &mut Facts, ops: &[(usize, &Word)]) {
    if ops.len() >= 2
        && let Some((_, last)) = ops.last()
    {
        facts.modified.push((*last).clone());
    }
}

/// Every operand after the first `skip` ones.
fn all_operands(facts: &mut Facts, argv: &[Word], with_value: &[&str], skip: usize) {
    let ops = operands(argv, with_value);
    facts
        .modified
        .extend(ops.into_iter().skip(skip).map(|(_, w)| w.clone()));
}

/// A symbolic `chmod` mode that looks like an option (`-x`, `-rw`).
fn is_symbolic_mode(w: &Word) -> bool {
    let t = w.text.as_str();
    t.len() > 1 && t.starts_with('-') && t[1..].chars().all(|c| "rwxXst".contains(c))
}

/// `-t DIR`, `-tDIR`, `--target-directory[=]DIR`: the destination of cp/mv/install/ln. Adds
/// each to [`Facts::modified`]; true when there is one.
fn target_directories(facts: &mut Facts, argv: &[Word]) -> bool {
    let mut found = false;
    for (i, w) in argv.iter().enumerate().skip(1) {
        let t = w.text.as_str();
        let dir = if t == "-t" || t == "--target-directory" {
            argv.get(i + 1).cloned()
        } else if let Some(dir) = t.strip_prefix("--target-directory=") {
            Some(with_text(w, dir))
        } else if t.len() > 2 && t.starts_with("-t") {
            Some(with_text(w, &t[2..]))
        } else {
            None
        };
        if let Some(dir) = dir {
            facts.modified.push(dir);
            found = true;
        }
    }
    found
}

/// The configuration file `git config ARGS` writes, or `None` when it only reads
/// (git-config(1): `--get*`, `--list`, `get`, `list`, or a single key).
fn git_config_write(args: &[Word]) -> Option<Word> {
    let mut file = Word::literal(".git/config");
    let mut operands = 0;
    let mut writes = false;
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        let t = w.text.as_str();
        match t {
            "--global" => {
                file = Word {
                    tilde: true,
                    ..Word::literal("~/.gitconfig")
                }
            }
            "--system" => file = Word::literal("/etc/gitconfig"),
            "--worktree" => file = Word::literal(".git/config.worktree"),
            "--local" => file = Word::literal(".git/config"),
            "-f" | "--file" => {
                if let Some(f) = args.get(i + 1) {
                    file = f.clone();
                }
                i += 1;
            }
            "--blob" | "--type" | "--default" | "--comment" | "--value" => i += 1,
            "get" | "list" if operands == 0 => return None,
            "set" | "unset" | "rename-section" | "remove-section" | "edit" if operands == 0 => {
                writes = true;
                operands += 1;
            }
            _ if t.starts_with("--file=") => file = with_text(w, &t["--file=".len()..]),
            _ if t.starts_with("--get") || t == "--list" || t == "-l" => return None,
            _ if t.starts_with("--unset")
                || matches!(
                    t,
                    "--add"
                        | "--replace-all"
                        | "--rename-section"
                        | "--remove-section"
                        | "--edit"
                        | "-e"
                ) =>
            {
                writes = true;
            }
            _ if t.starts_with('-') => {}
            _ => operands += 1,
        }
        i += 1;
    }
    (writes || operands >= 2).then_some(file)
}
