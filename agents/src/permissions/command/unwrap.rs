//! Looking through wrappers and command runners: what [`super::wrappers::unwrap_step`] decides
//! is applied to the simple command here (`sudo rm` → `rm`, `bash -c '…'` analysed, `find
//! -exec CMD ;` split, `git`'s global options set aside).

use super::walker::{RawCommand, Walker};
use super::wrappers::{Step, Strip, unwrap_step};
use super::{CommandKind, SimpleCommand, Word, basename};

/// At most this many wrappers are stripped from one command (`sudo nice timeout 5 …`).
const MAX_UNWRAP_STEPS: usize = 32;

/// Whether to look at the command again after a step.
enum Next {
    /// The first word changed: look again.
    Again,
    /// Done with this command.
    Stop,
}

/// The actions of `find` that run a command.
const FIND_EXEC_ACTIONS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];

impl Walker<'_> {
    /// Strips inert wrappers and looks through command runners, in place.
    pub(super) fn unwrap(&mut self, cmd: &mut SimpleCommand) {
        for _ in 0..MAX_UNWRAP_STEPS {
            let Some(name) = cmd.argv.first().and_then(Word::as_literal) else {
                break;
            };
            let base = basename(name).to_string();
            let step = unwrap_step(&base, &cmd.argv[1..]);
            if let Next::Stop = self.apply_step(cmd, &base, step) {
                break;
            }
        }
    }

    /// Applies one [`Step`] to `cmd`, whose first word's basename is `base`.
    fn apply_step(&mut self, cmd: &mut SimpleCommand, base: &str, step: Step) -> Next {
        match step {
            Step::Done => {}
            Step::Unresolved => cmd.runner_unresolved = true,
            Step::Strip(strip) => return strip_wrapper(cmd, base, strip),
            Step::Shell { script_index } => self.shell_string(cmd, base, script_index),
            Step::Keyword => return self.misread_keyword(cmd, base),
            Step::Eval => self.eval(cmd),
            Step::Trap => self.trap(cmd),
            Step::Find => self.split_find(cmd),
            Step::Git => {
                split_git_globals(cmd);
                if let Some(reason) = git_runs_configured_code(cmd) {
                    self.code_runner(reason);
                }
            }
            Step::CodeRunner(reason) => self.code_runner(reason),
            Step::Opaque(reason) => self.opaque(&cmd.text, reason),
        }
        Next::Stop
    }

    /// `sh -c STRING`: the string is analysed one level deeper; the shell itself is dropped.
    fn shell_string(&mut self, cmd: &mut SimpleCommand, base: &str, script_index: usize) {
        let script = cmd.argv[1 + script_index].clone();
        cmd.wrappers.push(base.to_string());
        match script.as_literal() {
            Some(s) => {
                if base == "zsh" {
                    self.opaque(
                        &cmd.text.clone(),
                        "zsh syntax differs from bash; its -c string cannot be fully analysed",
                    );
                }
                self.nested(s, &format!("{base} -c"));
            }
            None => self.opaque(
                &cmd.text.clone(),
                format!("`{base} -c` runs a string computed at run time"),
            ),
        }
        cmd.kind = CommandKind::Assignment;
        cmd.argv.clear();
    }

    /// A shell keyword where a command name should be: the parse is wrong; drop the keyword
    /// and look at the rest.
    fn misread_keyword(&mut self, cmd: &mut SimpleCommand, base: &str) -> Next {
        self.misparsed(format!(
            "the shell keyword `{base}` appears where the parser expected a command: the \
             structure around it was misread"
        ));
        cmd.wrappers.push(base.to_string());
        cmd.runner_unresolved = true;
        cmd.argv.remove(0);
        if cmd.argv.is_empty() {
            cmd.kind = CommandKind::Assignment;
            return Next::Stop;
        }
        Next::Again
    }

    /// `eval WORDS`: literal words are analysed as a command string; `eval` is opaque anyway.
    fn eval(&mut self, cmd: &SimpleCommand) {
        let words = &cmd.argv[1..];
        if words.iter().all(|w| w.as_literal().is_some()) {
            self.nested(&join_texts(words), "eval");
        }
        self.opaque(&cmd.text, "`eval` runs text as a command");
    }

    /// `trap HANDLER SIGNALS`: a literal handler is analysed as a command string.
    fn trap(&mut self, cmd: &SimpleCommand) {
        let Some(handler) = cmd.argv.get(1) else {
            return;
        };
        match handler.as_literal() {
            Some(h) if !h.starts_with('-') => self.nested(h, "trap"),
            Some(_) => {}
            None => self.opaque(&cmd.text, "`trap` installs a handler computed at run time"),
        }
    }

    /// Splits `find … -exec CMD … ;` into the find itself and the commands it runs.
    fn split_find(&mut self, cmd: &mut SimpleCommand) {
        let argv = std::mem::take(&mut cmd.argv);
        let mut kept = vec![argv[0].clone()];
        let mut actions: Vec<(&str, Vec<Word>)> = Vec::new();
        let mut i = 1;
        while i < argv.len() {
            // An action word stays on find itself so that rules and displays see it.
            kept.push(argv[i].clone());
            let action = argv[i]
                .as_literal()
                .filter(|t| FIND_EXEC_ACTIONS.contains(t));
            let Some(action) = action else {
                i += 1;
                continue;
            };
            let (words, terminated, next) = exec_words(&argv, i + 1);
            if !terminated || words.is_empty() {
                self.opaque(
                    &cmd.text.clone(),
                    format!("`find {action}` without a command and `;` or `+`"),
                );
            }
            actions.push((action, words));
            i = next;
        }
        for (action, words) in actions.into_iter().filter(|(_, w)| !w.is_empty()) {
            let saved = self.via.replace(format!("find {action}"));
            self.push_raw(RawCommand::program(words));
            self.via = saved;
        }
        cmd.argv = kept;
    }
}

/// Strips a wrapper (see [`Strip`]).
fn strip_wrapper(cmd: &mut SimpleCommand, base: &str, strip: Strip) -> Next {
    cmd.wrappers.push(base.to_string());
    cmd.assignments.extend(strip.assignments);
    cmd.elevated |= strip.elevated;
    if strip.dynamic_tail {
        cmd.dynamic_tail = true;
        cmd.via = Some(base.to_string());
    }
    // An option missing its value (`nice -n`, `sudo -u`) reads past the end.
    let start = (1 + strip.skip).min(cmd.argv.len());
    let rest: Vec<Word> = cmd.argv.drain(start..).collect();
    if !rest.is_empty() {
        cmd.argv = rest;
        return Next::Again;
    }
    if base == "xargs" {
        // `xargs` alone runs `echo`.
        cmd.argv = vec![Word::literal("echo")];
        return Next::Again;
    }
    // `nohup` or `sudo` with nothing to run: keep the wrapper as the command.
    cmd.argv.truncate(1);
    cmd.wrappers.pop();
    Next::Stop
}

/// The command of a `find -exec` action starting at `argv[start]`: its words (`{}` marked as
/// computed), whether a `;` (or `{} +`) ends it, and the index after the terminator.
fn exec_words(argv: &[Word], start: usize) -> (Vec<Word>, bool, usize) {
    let mut words: Vec<Word> = Vec::new();
    for (j, w) in argv.iter().enumerate().skip(start) {
        let t = w.as_literal();
        if t == Some(";") || (t == Some("+") && words.last().is_some_and(|l| l.text == "{}")) {
            return (words, true, j + 1);
        }
        let mut word = w.clone();
        word.dynamic |= word.text.contains("{}");
        words.push(word);
    }
    (words, false, argv.len() + 1)
}

/// The texts of `words` joined by spaces.
pub(super) fn join_texts(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Configuration keys git may be given with `-c` that change nothing about which programs run
/// (git-config(1)): colours, identity, output formatting, advice. Every other key (`alias.*`,
/// `core.pager`, `core.editor`, `core.sshCommand`, `core.hooksPath`, `core.fsmonitor`,
/// `diff.external`, `*.textconv`, `filter.*`, `credential.helper`, `include.path`, …) may run
/// a program.
fn inert_git_config_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let section = key.split('.').next().unwrap_or("");
    matches!(section, "color" | "user" | "advice" | "i18n" | "column")
        || matches!(
            key.as_str(),
            "core.quotepath"
                | "core.autocrlf"
                | "core.safecrlf"
                | "core.abbrev"
                | "core.ignorecase"
                | "core.filemode"
                | "init.defaultbranch"
                | "log.decorate"
                | "log.date"
                | "log.abbrevcommit"
                | "diff.noprefix"
                | "diff.renames"
                | "diff.algorithm"
                | "diff.colormoved"
                | "merge.conflictstyle"
                | "pull.rebase"
                | "pull.ff"
                | "protocol.version"
                | "safe.directory"
                | "status.short"
                | "status.branch"
                | "commit.gpgsign"
                | "tag.gpgsign"
                | "gc.auto"
                | "maintenance.auto"
        )
}

/// Why a `git` command (after [`split_git_globals`]) runs code from configuration it is given on
/// the command line, if it does: `-c KEY=VALUE` with a key outside [`inert_git_config_key`],
/// `--config-env`, `--exec-path=DIR`.
fn git_runs_configured_code(cmd: &SimpleCommand) -> Option<String> {
    let globals = &cmd.global_options;
    let mut i = 0;
    while i < globals.len() {
        let w = &globals[i];
        let t = w.text.as_str();
        let value = |i: usize| globals.get(i + 1);
        match t {
            "-c" => {
                let Some(v) = value(i) else {
                    return Some("`git -c` without a value".to_string());
                };
                let key = v.text.split_once('=').map_or(v.text.as_str(), |(k, _)| k);
                if v.dynamic || v.glob || !inert_git_config_key(key) {
                    return Some(format!(
                        "`git -c {key}=…` sets configuration that can make git run a program"
                    ));
                }
                i += 2;
                continue;
            }
            "--config-env" => {
                return Some(
                    "`git --config-env` sets configuration (from the environment) that can make \
                     git run a program"
                        .to_string(),
                );
            }
            _ if t.starts_with("--config-env=") => {
                return Some(
                    "`git --config-env` sets configuration (from the environment) that can make \
                     git run a program"
                        .to_string(),
                );
            }
            _ if t.starts_with("--exec-path=") => {
                return Some("`git --exec-path=DIR` runs git helpers from DIR".to_string());
            }
            _ if t.starts_with("-c") && t.len() > 2 => {
                let rest = &t[2..];
                let key = rest.split_once('=').map_or(rest, |(k, _)| k);
                if !inert_git_config_key(key) {
                    return Some(format!(
                        "`git -c {key}=…` sets configuration that can make git run a program"
                    ));
                }
            }
            _ => {}
        }
        if w.dynamic {
            return Some(format!(
                "the git global option `{t}` is computed at run time"
            ));
        }
        i += 1;
    }
    None
}

/// Moves `git`'s global options (`-C dir`, `-c k=v`, `--git-dir=…`, `-p`, …) out of `argv` into
/// `global_options`, so that `argv` is `git SUBCOMMAND ARGS…` as git will run it.
fn split_git_globals(cmd: &mut SimpleCommand) {
    let mut i = 1;
    let argv = &cmd.argv;
    let mut globals = Vec::new();
    while i < argv.len() {
        let w = &argv[i];
        let Some(t) = w.as_literal() else { break };
        if !t.starts_with('-') {
            break;
        }
        globals.push(w.clone());
        let takes_value = matches!(
            t,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--super-prefix"
                | "--config-env"
                | "--exec-path-unused"
                | "--list-cmds"
                | "--attr-source"
        );
        if takes_value && i + 1 < argv.len() {
            globals.push(argv[i + 1].clone());
            i += 2;
        } else {
            i += 1;
        }
    }
    if globals.is_empty() {
        return;
    }
    let mut rest = vec![cmd.argv[0].clone()];
    rest.extend(cmd.argv[i..].iter().cloned());
    cmd.argv = rest;
    cmd.global_options = globals;
}

#[cfg(test)]
mod tests {
    use super::super::analyze_command;

    /// A wrapper option whose value is missing ends the command; it used to panic.
    #[test]
    fn wrapper_option_without_its_value_keeps_the_wrapper() {
        for (command, program) in [("nice -n", "nice"), ("sudo -u", "sudo"), ("env -u", "env")] {
            let analysis = analyze_command(command);
            assert_eq!(analysis.commands.len(), 1, "{command}");
            assert_eq!(analysis.commands[0].argv[0].text, program, "{command}");
            assert!(analysis.commands[0].wrappers.is_empty(), "{command}");
        }
    }
}
