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
/// also run workspace code: they are [`WORKSPACE_CODE`], which an allow rule can accept.
const SCRIPT_SUBCOMMANDS: &[&str] = &["run", "run-script", "exec", "x", "dlx"];
/// Programs whose behaviour is defined by files of the workspace (a Makefile, `package.json`
/// scripts, `build.rs`, `conftest.py`, a test file, `go.mod`'s toolchain) or by code given
/// inline (`python3 -c`, `node -e`, an awk program): running them runs code the model may have
/// written. Whatever their arguments, they are never read-only; an allow rule naming the
/// program (`run_command(cargo test:*)`) accepts them, and without one they are refused when
/// command deny rules exist (see `decide/simple/hidden.rs`). (program, what defines it).
#[rustfmt::skip]
const WORKSPACE_CODE: &[(&str, &str)] = &[
    ("cmake", "CMakeLists.txt"), ("ctest", "CMake test definitions"),
    ("meson", "meson.build"), ("scons", "an SConstruct file"), ("bazel", "BUILD files"),
    ("bazelisk", "BUILD files"), ("gradle", "a Gradle build script"),
    ("mvn", "a Maven project's plugins"), ("ant", "build.xml"), ("sbt", "build.sbt"),
    ("cargo", "build scripts, procedural macros, tests and `.cargo/config.toml` aliases"),
    ("rustc", "procedural macros and `build.rs` code"),
    ("go", "tests, `go:generate` lines and the toolchain named in go.mod"),
    ("npm", "`package.json` scripts and `.npmrc`"), ("pnpm", "`package.json` scripts"),
    ("yarn", "`package.json` scripts and `.yarnrc`"), ("bun", "`package.json` scripts and code"),
    ("deno", "code and tasks of the workspace"),
    ("node", "JavaScript (a file or `-e` code)"), ("nodejs", "JavaScript (a file or `-e` code)"),
    ("tsx", "TypeScript code"), ("ts-node", "TypeScript code"),
    ("jest", "test files and their configuration"), ("vitest", "test files and vite's config"),
    ("mocha", "test files"), ("python", "Python code (a file, `-c` or `-m`)"),
    ("python3", "Python code (a file, `-c` or `-m`)"), ("python2", "Python code"),
    ("pytest", "test files and conftest.py"), ("py.test", "test files and conftest.py"),
    ("tox", "tox.ini and the package's build"), ("nox", "noxfile.py"),
    ("pip", "a package's build (setup.py)"), ("pip3", "a package's build (setup.py)"),
    ("uv", "project scripts and builds"), ("poetry", "project scripts and builds"),
    ("pdm", "project scripts"), ("pipenv", "project scripts"), ("hatch", "project scripts"),
    ("ruby", "Ruby code"), ("bundle", "the Gemfile and its commands"), ("rspec", "spec files"),
    ("perl", "Perl code (a file or `-e`)"), ("php", "PHP code"), ("phpunit", "test files"),
    ("composer", "composer.json scripts"), ("lua", "Lua code"), ("Rscript", "R code"),
    ("mix", "mix.exs"),
    ("elixir", "Elixir code"), ("dotnet", "project files and their build targets"),
    ("swift", "Package.swift and code"), ("java", "a program's classes"),
    ("tclsh", "Tcl code"), ("julia", "Julia code"),
];
/// Programs for which `-v` alone prints the version.
const VERSION_V: &[&str] = &[
    "node", "nodejs", "npm", "pnpm", "yarn", "bun", "deno", "tsx",
];
/// Shells: given a script file (not `-c`, which is analysed as a command line) they run it.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "fish"];
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

/// Why `cmd` (named `name`, a system program) runs code defined by files of the workspace or
/// given inline ([`WORKSPACE_CODE`], a shell given a script file, a git alias), if it does.
/// `--version` alone (and `-V`, `version`, and `-v` where it means the version) is exempt.
pub(super) fn workspace_code(cmd: &SimpleCommand, name: &str) -> Option<String> {
    let args = &cmd.argv[1..];
    if let [only] = args
        && (matches!(only.text.as_str(), "--version" | "-V" | "version")
            || (only.text == "-v" && VERSION_V.contains(&name)))
    {
        return None;
    }
    if let Some((_, what)) = WORKSPACE_CODE.iter().find(|(p, _)| *p == name) {
        return Some(format!(
            "`{name}` runs {what}, code the model may have written"
        ));
    }
    if SHELLS.contains(&name) {
        return shell_script(args, name);
    }
    if AWKS.contains(&name) {
        return awk_program(args, name);
    }
    None
}

/// awk implementations.
const AWKS: &[&str] = &["awk", "gawk", "mawk", "nawk", "busybox-awk"];
/// Words of an awk program that run commands, read files or write them.
const AWK_EFFECTS: &[&str] = &["system", "getline", "|", ">", "@load", "@include"];

/// An awk program read from a file (`-f`), computed at run time, or using `system()`,
/// `getline`, pipes, output redirection or extensions: awk then runs or reads what the
/// analysis cannot see. A plain program (`'{ print $1 }'`) only transforms its input files.
fn awk_program(args: &[Word], name: &str) -> Option<String> {
    let from_file = args.iter().any(|w| {
        let t = w.text.as_str();
        (t.starts_with('-') && !t.starts_with("--") && t.contains('f'))
            || t.starts_with("--file")
            || t.starts_with("--source")
            || t.starts_with("--load")
            || t.starts_with("--include")
    });
    // The program is the first operand after options and their values (`-v x=1`, `-F :`):
    // every word is checked rather than guessing which one it is.
    let mut words = args.iter().filter(|w| !w.text.starts_with('-')).peekable();
    let opaque = from_file
        || words.peek().is_none()
        || words.any(|w| w.dynamic || AWK_EFFECTS.iter().any(|e| w.text.contains(e)));
    opaque.then(|| {
        format!("`{name}` runs an awk program that reads files, writes them or runs commands")
    })
}

/// A shell given a script file (its first operand, when no `-c`/`-s` makes the operands
/// arguments).
fn shell_script(args: &[Word], name: &str) -> Option<String> {
    let inline = args
        .iter()
        .take_while(|w| w.text.starts_with('-') || w.text.starts_with('+'))
        .any(|w| !w.text.starts_with("--") && (w.text.contains('c') || w.text.contains('s')));
    if inline {
        return None;
    }
    let script = args
        .iter()
        .find(|w| !(w.text.starts_with('-') || w.text.starts_with('+')))?;
    Some(format!(
        "`{name} {}` runs a script file whose contents are not analysed",
        script.text
    ))
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
