//! Programs and options that run code the analysis cannot see: a command (or script) given in
//! an option, read from a file of the workspace, or typed into an editor or debugger. With deny
//! rules for commands such a command is refused (the hidden code could be a denied program);
//! otherwise it is a hazard like any other (asks outside bypass mode).
//!
//! Sources: GNU tar (`--to-command`, `--use-compress-program`, `--checkpoint-action=exec`,
//! `--info-script`), vim(1) (`-c`, `+`, `-S`, `:!`), ed(1) (`!`), gdb(1) (`-ex`, `-x`, `shell`),
//! script(1) (`-c`), watch(1), bash(1) (`hash -p`, `mapfile -C`, `shopt expand_aliases`,
//! `alias`, `enable -f`), make(1), just, `npm run`/`exec` (and pnpm, yarn, bun).

use super::{SimpleCommand, Word, option_name};

/// Programs that always run code they read elsewhere (a command-line script, an interactive
/// command language, a file of the workspace): (program, why).
#[rustfmt::skip]
const ALWAYS: &[(&str, &str)] = &[
    ("vim", "vim runs Ex commands (`-c`, `+`, `:!`) and scripts"),
    ("vi", "vi runs Ex commands (`-c`, `+`, `:!`)"),
    ("nvim", "nvim runs Ex commands (`-c`, `+`, `:!`) and scripts"),
    ("view", "view runs Ex commands (`-c`, `+`, `:!`)"),
    ("ex", "ex runs Ex commands, `!` included"),
    ("ed", "ed runs shell commands with `!`"),
    ("red", "red reads commands from its input"),
    ("gdb", "gdb runs commands (`-ex shell …`, `-x FILE`)"),
    ("lldb", "lldb runs commands (`-o`, `platform shell`)"),
    ("script", "`script -c` runs a command line"),
    ("watch", "watch runs a command line repeatedly"),
    ("expect", "expect runs a Tcl program"),
    ("make", "make runs the recipes of a Makefile in the workspace"),
    ("gmake", "make runs the recipes of a Makefile in the workspace"),
    ("just", "just runs the recipes of a justfile in the workspace"),
    ("ninja", "ninja runs the commands of build.ninja"),
    ("rake", "rake runs a Rakefile"),
    ("npx", "npx runs a package's program"),
];
/// Package managers that run a workspace script for these subcommands.
const SCRIPT_RUNNERS: &[&str] = &["npm", "pnpm", "yarn", "bun"];
/// Subcommands of [`SCRIPT_RUNNERS`] that run a `package.json` script or a package's program
/// named in the arguments. The lifecycle shorthands (`npm start`, `npm test`, `npm install`)
/// also run workspace code but keep their decisions, like `cargo test` and `cargo build` (build
/// scripts): see the README's limits.
const SCRIPT_SUBCOMMANDS: &[&str] = &["run", "run-script", "exec", "x", "dlx"];
/// Options of tar that run a program.
#[rustfmt::skip]
const TAR_PROGRAM_OPTIONS: &[&str] = &[
    "--to-command", "--use-compress-program", "-I", "--info-script", "--new-volume-script",
    "-F", "--rsh-command", "--rmt-command",
];

/// Why `cmd` (named `name`, a system program) runs code the analysis cannot see, if it does.
pub(super) fn hidden_code(cmd: &SimpleCommand, name: &str) -> Option<String> {
    if let Some((_, why)) = ALWAYS.iter().find(|(p, _)| *p == name) {
        return Some((*why).to_string());
    }
    let args = &cmd.argv[1..];
    match name {
        _ if SCRIPT_RUNNERS.contains(&name) => {
            let sub = args.iter().find(|w| !w.text.starts_with('-'))?;
            SCRIPT_SUBCOMMANDS
                .contains(&sub.text.as_str())
                .then(|| format!("`{name} {}` runs scripts of the workspace", sub.text))
        }
        "tar" => tar(args),
        "hash" => has_option(args, "-p").then(|| "`hash -p` makes a name run any file".into()),
        "mapfile" | "readarray" => {
            has_option(args, "-C").then(|| format!("`{name} -C` runs a callback command"))
        }
        "shopt" => any_text(args, "expand_aliases")
            .then(|| "`shopt -s expand_aliases` lets aliases hide commands".into()),
        "alias" => args
            .iter()
            .any(|w| w.text.contains('='))
            .then(|| "`alias` makes a name run other commands".into()),
        "enable" => {
            has_option(args, "-f").then(|| "`enable -f` loads a builtin from a file".into())
        }
        _ => None,
    }
}

/// tar's program options, long (`--to-command=…`), separate or bundled (`-I prog`).
fn tar(args: &[Word]) -> Option<String> {
    args.iter().find_map(|w| {
        let t = w.text.as_str();
        let name = option_name(t);
        let runs = TAR_PROGRAM_OPTIONS.contains(&name)
            || t.starts_with("--checkpoint-action")
            || (t.starts_with('-') && !t.starts_with("--") && (t.contains('I') || t.contains('F')));
        runs.then(|| format!("`tar {t}` runs a program"))
    })
}

/// True when a short option letter `opt` (`-p`) appears alone or bundled (`-xp`).
fn has_option(args: &[Word], opt: &str) -> bool {
    let letter = &opt[1..];
    args.iter().any(|w| {
        let t = w.text.as_str();
        w.dynamic || (t.starts_with('-') && !t.starts_with("--") && t[1..].contains(letter))
    })
}

/// True when some argument's text is `text`.
fn any_text(args: &[Word], text: &str) -> bool {
    args.iter().any(|w| w.text == text || w.dynamic)
}
