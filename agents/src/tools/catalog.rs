//! What the model is shown of each built-in tool, in one place: its arguments (their JSON
//! Schema is the tool's input schema) and its [`BuiltinSpec`] — name, description, kind, the
//! argument permission rules match against and an example call. The tools' work is in
//! [`super::files`], [`super::search`] and [`super::shell`]; [`super::BuiltinTool`] joins the
//! two.

use super::{ToolError, ToolKind};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The description of a built-in tool, as data: everything about it except what a call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinSpec {
    /// Name the model uses.
    pub name: &'static str,
    /// When to use it and what it returns.
    pub description: &'static str,
    /// Read, edit or execute.
    pub kind: ToolKind,
    /// The argument permission rules match against, as given (`path` for file tools,
    /// `command` for `run_command`); `None` when the tool has no such subject.
    pub subject: Option<&'static str>,
    /// A JSON object of the expected shape, shown with an error when a call's arguments cannot
    /// be parsed.
    pub example: &'static str,
}

/// The arguments of a built-in tool, which know the tool's [`BuiltinSpec`].
pub trait ToolArgs: DeserializeOwned + JsonSchema + Send + 'static {
    /// The tool these are the arguments of.
    const SPEC: BuiltinSpec;

    /// Parses the arguments of a call.
    ///
    /// # Errors
    /// A [`ToolError`] naming the tool and showing the spec's example.
    fn parse(input: Value) -> Result<Self, ToolError> {
        parse_args(Self::SPEC.name, input, Self::SPEC.example)
    }
}

/// Parses tool arguments, turning a serde error into a [`ToolError`] that names the tool and
/// shows the expected shape.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    input: Value,
    shape: &str,
) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|e| {
        ToolError::new(format!(
            "invalid arguments for {tool}: {e}. Expected a JSON object like {shape}"
        ))
    })
}

/// JSON Schema of an argument struct, without the `$schema` meta key.
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("$schema");
    }
    v
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// File to read: relative to the current directory, or absolute inside the workspace.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many lines to return (default 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `read_file`: numbered lines of a text file (`cat -n` style).
impl ToolArgs for ReadFileArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "read_file",
        description: "Read a text file in the workspace. Use it before editing a file and whenever you need \
            its exact content. Returns the lines numbered like `cat -n` (`     1\\tfirst line`), \
            2000 lines from `offset` (1-based) by default; says how to continue when more lines \
            remain; cuts lines longer than 2000 characters. Binary files are refused.",
        kind: ToolKind::Read,
        subject: Some("path"),
        example: r#"{"path": "src/main.rs", "offset": 1, "limit": 2000}"#,
    };
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// File to create or overwrite: relative to the current directory, or absolute inside the
    /// workspace. Missing parent directories are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

/// `write_file`: creates or overwrites a file with the given content.
impl ToolArgs for WriteFileArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "write_file",
        description: "Create a new file, or replace a file's whole content, in the workspace. Creates missing \
            parent directories. Prefer edit_file to change part of an existing file. Returns how \
            many bytes were written and whether the file was created or overwritten.",
        kind: ToolKind::Edit,
        subject: Some("path"),
        example: r#"{"path": "src/new.rs", "content": "fn main() {}\n"}"#,
    };
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// File to edit: relative to the current directory, or absolute inside the workspace.
    pub path: String,
    /// Exact text to replace, including whitespace and indentation (copy it from read_file
    /// output without the line-number prefix).
    pub old_string: String,
    /// Text to put in its place (must differ from old_string).
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default false).
    #[serde(default)]
    pub replace_all: bool,
}

/// `edit_file`: exact string replacement in an existing file.
impl ToolArgs for EditFileArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "edit_file",
        description: "Change part of an existing text file by exact string replacement: old_string must \
            appear exactly once (or set replace_all to replace every occurrence). Read the file \
            first and copy old_string exactly, with its indentation. Everything else in the file \
            is kept byte for byte (line endings included). Returns a unified diff of the change.",
        kind: ToolKind::Edit,
        subject: Some("path"),
        example: r#"{"path": "src/lib.rs", "old_string": "exact old text", "new_string": "new text", "replace_all": false}"#,
    };
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `list_dir`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// Directory to list (default: the current directory).
    #[serde(default)]
    pub path: Option<String>,
}

/// `list_dir`: the entries of one directory.
impl ToolArgs for ListDirArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "list_dir",
        description: "List the entries of one directory in the workspace (not recursive). Use it to look \
            around; use glob to find files by name pattern across directories. Returns entry names \
            sorted, directories with a trailing `/`, symbolic links as `name -> target`; entries \
            ignored by .gitignore and the .git directory are left out; at most 1000 entries.",
        kind: ToolKind::Read,
        subject: Some("path"),
        example: r#"{"path": "src"}"#,
    };

    /// No arguments (`null`) list the current directory.
    fn parse(input: Value) -> Result<Self, ToolError> {
        if input.is_null() {
            Ok(Self::default())
        } else {
            parse_args(Self::SPEC.name, input, Self::SPEC.example)
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern, e.g. `**/*.rs`, `src/**/mod.rs`, `*.{toml,md}`. `*` does not cross `/`;
    /// `**` does. A pattern without `/` matches file names at any depth.
    pub pattern: String,
    /// Directory to search (default: the current directory).
    #[serde(default)]
    pub path: Option<String>,
}

/// `glob`: files whose path matches a glob pattern, newest first.
impl ToolArgs for GlobArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "glob",
        description: "Find files by name pattern (e.g. `**/*.rs`, `src/**/test_*.py`, `*.md`) under a \
            directory of the workspace; files ignored by .gitignore are skipped. A pattern with \
            `/` is matched against the path relative to the searched directory, one without `/` \
            against file names at any depth. Returns matching file paths relative to the \
            workspace, most recently modified first, at most 500 (says how many were omitted).",
        kind: ToolKind::Read,
        subject: Some("path"),
        example: r#"{"pattern": "**/*.rs", "path": "src"}"#,
    };
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust `regex` syntax, as ripgrep). Always a pattern, never an
    /// option, even when it starts with `-`.
    pub pattern: String,
    /// File or directory to search (default: the current directory).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose path matches this glob, e.g. `*.rs` or `src/**/*.ts`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match without regard to case (default false).
    #[serde(default)]
    pub case_insensitive: bool,
    /// Most matching lines to return (default 200, at most 2000).
    #[serde(default)]
    pub max_results: Option<usize>,
}

/// `grep`: lines matching a regular expression, as `path:line:content`.
impl ToolArgs for GrepArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "grep",
        description: "Search file contents in the workspace for a regular expression (ripgrep syntax), \
            skipping files ignored by .gitignore and binary files. Use it to find definitions, \
            usages and strings; narrow it with `path` and `glob` (e.g. `*.rs`). Returns one line \
            per match as `path:line:content` (paths relative to the workspace), at most \
            max_results (default 200), and says how many more matches were omitted.",
        kind: ToolKind::Read,
        subject: Some("path"),
        example: r#"{"pattern": "fn main", "path": "src", "glob": "*.rs", "case_insensitive": false, "max_results": 200}"#,
    };
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandArgs {
    /// Shell command line, run with `bash -c` in the current directory.
    pub command: String,
    /// Timeout in milliseconds (default 120000, at most 600000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// A few words saying what the command does (shown to the user).
    #[serde(default)]
    pub description: Option<String>,
}

/// `run_command`: runs a shell command and returns its output and exit code.
impl ToolArgs for RunCommandArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: "run_command",
        description: "Run a shell command (bash -c) in the current directory of the workspace: build, test, \
            git, or anything else without a dedicated tool. Prefer read_file, grep and glob for \
            reading and searching. stdin is empty, so interactive commands fail; the command is \
            killed with its whole process group after timeout_ms (default 120000, max 600000). \
            Returns stdout and stderr interleaved (long output keeps its beginning and end) and \
            the exit code.",
        kind: ToolKind::Execute,
        subject: Some("command"),
        example: r#"{"command": "cargo test", "timeout_ms": 120000, "description": "run the tests"}"#,
    };
}
