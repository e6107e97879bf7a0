//! OS sandbox for `run_command` children on Linux, built on
//! [landlock](https://docs.kernel.org/userspace-api/landlock.html) (through the
//! [`landlock`](https://docs.rs/landlock/0.4) crate).
//!
//! A [`CommandSandbox`] is the policy of one agent: the paths its commands may **write**
//! (the workspace — a worker's worktree —, each command's private temp dir, paths the user
//! lists, a few device files), the paths they may **not read** (default `~/.ssh`, `~/.aws`,
//! `~/.gnupg`, `~/.config/ahelper`) and whether they may use the network
//! ([`CommandSandbox::network`]: off means TCP denied by landlock and a new network namespace,
//! [`Namespaces`]). The protected entries at the workspace's top level (`.git`, `.ahelper`,
//! start-up files) are read-only for commands: bound read-only in a mount namespace of the
//! command's own ([`Namespaces`], [`protected_entries`]).
//!
//! How a command is confined:
//! 1. In the parent, before spawning, [`CommandSandbox::prepare`] builds the landlock rulesets:
//!    the read rules in a layer of their own, built once per policy and reused while the
//!    directories they were built from are unchanged ([`read_layer`]), and the command's own
//!    write and network rules; it opens an `O_PATH` fd for every rule and adds the rules, so
//!    every allocation and every path lookup happens here ([`PreparedSandbox`]).
//! 2. Between `fork` and `exec`, in the child, [`PreparedSandbox::restrict_self`] only calls
//!    `unshare(2)` (network off), `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self(2)`
//!    — async-signal-safe system calls. [`PreparedSandbox::install`] wires that into a
//!    [`tokio::process::Command`] with `pre_exec`.
//!
//! Landlock is allow-list based and cannot take a subdirectory out of a directory it allows.
//! So "read everything except the denied paths" is built as the smallest set of subtrees
//! that covers the file system minus the denied paths: starting at `/`, a directory that has
//! no denied path below it is allowed whole; a directory that has one is allowed for listing
//! only (`READ_DIR`, which landlock applies to the whole subtree: names inside a denied
//! directory stay listable, their contents do not) and each of its entries is handled the same
//! way. Entries are enumerated when the read layer is built and again whenever such a
//! directory changes, so a file created later in one is covered by the next command. Symlinks among those entries are followed when
//! they are opened; a symlink that leads to a denied path (or above one) is left out.
//!
//! Where landlock is missing (kernel older than 5.13, not enabled at boot, seccomp filters),
//! [`landlock_status`] says so; [`CommandSandbox::note`] gives the one-time warning the caller
//! shows, and commands run with the permission rule checks only.

use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreated, RulesetStatus,
};
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub mod binds;
mod capabilities;
mod limits;
mod pid_init;
mod read_layer;
use limits::PreparedLimits;
pub use limits::{
    CommandLimits, DEFAULT_MAX_MEMORY_MB, DEFAULT_MAX_PROCESSES, LimitHit, MIN_MAX_PROCESSES,
    limit_hit,
};
use pid_init::PidInit;
#[cfg(test)]
use read_layer::read_plan;
use read_layer::{ReadKey, ReadLayerCache, add_path_rule};

/// The landlock ABI whose access rights we ask for. Newer kernels are asked for exactly these
/// rights (landlock's compatibility contract: rights of a newer ABI are never handled unless
/// requested); older kernels get the subset they know (best effort). ABI 7 = Linux 6.15.
const TARGET_ABI: ABI = ABI::V7;

/// Whether commands run inside the OS sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Confine every `run_command` child with landlock where the kernel supports it.
    #[default]
    Enforce,
    /// Run commands unconfined (permission rule checks still apply).
    Off,
}

impl FromStr for SandboxMode {
    type Err = String;

    /// Parses `enforce` or `off` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "enforce" | "on" => Ok(SandboxMode::Enforce),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode `{other}`; expected `enforce` or `off`"
            )),
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SandboxMode::Enforce => "enforce",
            SandboxMode::Off => "off",
        })
    }
}

/// Landlock support of the running kernel, from
/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`
/// (<https://man7.org/linux/man-pages/man2/landlock_create_ruleset.2.html>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockStatus {
    /// Landlock works; `abi` is the kernel's ABI version (1 = Linux 5.13, 4 = 6.7 adds TCP
    /// rules, 7 = 6.15).
    Available {
        /// Kernel ABI version (≥ 1).
        abi: i32,
    },
    /// The kernel has landlock but it is not enabled (`EOPNOTSUPP`: add `landlock` to the
    /// `lsm=` boot parameter).
    NotEnabled,
    /// The kernel has no landlock (`ENOSYS`: older than 5.13 or built without it), or a
    /// seccomp filter hides it.
    NotImplemented,
}

impl LandlockStatus {
    /// The ABI version when available.
    pub fn abi(&self) -> Option<i32> {
        match self {
            LandlockStatus::Available { abi } => Some(*abi),
            _ => None,
        }
    }

    /// True when TCP bind/connect can be restricted (ABI ≥ 4).
    pub fn supports_network(&self) -> bool {
        self.abi().is_some_and(|a| a >= 4)
    }
}

impl fmt::Display for LandlockStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LandlockStatus::Available { abi } => write!(f, "landlock ABI {abi}"),
            LandlockStatus::NotEnabled => {
                f.write_str("landlock is built into this kernel but not enabled")
            }
            LandlockStatus::NotImplemented => {
                f.write_str("this kernel has no landlock (Linux 5.13 or newer is needed)")
            }
        }
    }
}

/// Asks the kernel which landlock ABI it supports. One cheap system call; callers keep the
/// answer (e.g. in a [`CommandSandbox`]) rather than asking again for every command.
pub fn landlock_status() -> LandlockStatus {
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the call only returns
    // the ABI version (or -1 with errno); it reads and writes no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if v >= 1 {
        return LandlockStatus::Available {
            abi: i32::try_from(v).unwrap_or(i32::MAX),
        };
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EOPNOTSUPP) => LandlockStatus::NotEnabled,
        _ => LandlockStatus::NotImplemented,
    }
}

/// The `[sandbox]` settings after configuration is resolved (see `config.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// `sandbox.mode` / `--sandbox`; default [`SandboxMode::Enforce`].
    pub mode: SandboxMode,
    /// `sandbox.writable`: absolute paths commands may write besides the workspace and the temp
    /// dir.
    pub writable: Vec<PathBuf>,
    /// `sandbox.deny_read`: absolute paths commands may not read; the defaults
    /// ([`default_deny_read`]) plus the user's.
    pub deny_read: Vec<PathBuf>,
    /// `sandbox.network`; default `true`. `false` denies TCP bind and connect (ABI ≥ 4).
    pub network: bool,
    /// The directories of `--add-dir` (canonical): writable like the workspace, with their
    /// protected top-level entries (`.git`, `.ahelper`…) bound read-only as the workspace's.
    pub added_dirs: Vec<PathBuf>,
    /// The user's directories that no tool writes, wherever they lie (absolute): ahelper's
    /// config and state directories and the places that run code on their own (`~/.local/bin`,
    /// `~/.config/systemd`, `~/.config/autostart`, `~/.config/git`); see
    /// [`crate::config::EnvSnapshot::protected_user_dirs`]. Those inside a writable path are
    /// bound read-only for commands ([`binds::user_dirs_within`]) and refused to file tools.
    pub protected_dirs: Vec<PathBuf>,
    /// `sandbox.max_processes` and `sandbox.max_memory_mb` ([`CommandLimits`]).
    pub limits: CommandLimits,
}

impl SandboxSettings {
    /// Enforced, no extra writable paths, the default denied paths under `home`, network on.
    pub fn with_defaults(home: Option<&Path>) -> Self {
        SandboxSettings {
            mode: SandboxMode::Enforce,
            writable: Vec::new(),
            deny_read: default_deny_read(home),
            network: true,
            added_dirs: Vec::new(),
            protected_dirs: Vec::new(),
            limits: CommandLimits::default(),
        }
    }
}

/// Paths no command may read by default: `~/.ssh`, `~/.aws`, `~/.gnupg` and
/// `~/.config/ahelper` (empty when `home` is unknown).
pub fn default_deny_read(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    [".ssh", ".aws", ".gnupg", ".config/ahelper"]
        .iter()
        .map(|p| home.join(p))
        .collect()
}

/// Device files every command may write (output sinks, terminals, random sources).
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/random",
    "/dev/urandom",
    "/dev/pts",
    "/dev/shm",
];

/// Errors while building the landlock ruleset of a command. The command is not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxOsError {
    /// The kernel refused to create the ruleset or a rule.
    #[error(
        "cannot build the landlock sandbox for this command: {0}; run with `--sandbox off` \
         (or `sandbox.mode = \"off\"`) if the kernel's landlock is broken"
    )]
    Ruleset(String),
    /// A path a `read_file` deny rule covers cannot be hidden from the command.
    #[error(
        "cannot hide {path} (a read_file deny rule covers it) from this command: {reason}; the \
         command did not run"
    )]
    Hide {
        /// The path, or the placeholder that could not be made.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

/// The read-only binds that hide `hidden`: an empty file (mode 0400) over each file, an empty
/// directory (mode 0500) over each directory — files first, then directories deepest first, so
/// that a path inside a hidden directory is bound before the directory disappears. The two
/// placeholders are made in the command's private `temp_dir`.
fn hiding_mounts(
    hidden: &crate::permissions::HiddenPaths,
    temp_dir: Option<&Path>,
) -> Result<Vec<ReadOnlyMount>, SandboxOsError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if hidden.is_empty() {
        return Ok(Vec::new());
    }
    let hide_error = |path: &Path, reason: String| SandboxOsError::Hide {
        path: path.to_path_buf(),
        reason,
    };
    let temp = temp_dir
        .ok_or_else(|| hide_error(Path::new("."), "the command has no private temp dir".into()))?;
    let file = temp.join(".ahelper-hidden-file");
    let dir = temp.join(".ahelper-hidden-dir");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(&file)
        .map_err(|e| hide_error(&file, e.to_string()))?;
    std::fs::DirBuilder::new()
        .mode(0o500)
        .create(&dir)
        .map_err(|e| hide_error(&dir, e.to_string()))?;
    let mut dirs: Vec<&PathBuf> = hidden.dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    let files = hidden.files.iter().map(|f| (f, &file));
    files
        .chain(dirs.into_iter().map(|d| (d, &dir)))
        .map(|(path, source)| {
            ReadOnlyMount::hiding(path, source)
                .ok_or_else(|| hide_error(path, "it cannot be described (vanished?)".into()))
        })
        .collect()
}

/// The sandbox policy of one agent's commands. Build it once per session or worker
/// ([`CommandSandbox::new`], [`CommandSandbox::for_workspace`]) and put it in
/// `ToolContext::command_sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSandbox {
    /// Enforce or off.
    pub mode: SandboxMode,
    /// Paths commands may write (everything beneath them): the workspace, the temp dir, the
    /// user's `sandbox.writable`. Paths that do not exist when a command starts are skipped.
    pub writable: Vec<PathBuf>,
    /// Paths commands may not read (files or whole directories).
    pub read_denied: Vec<PathBuf>,
    /// Paths commands may read although they lie inside a denied one (a swarm worker reads the
    /// repository's git directory inside the denied user checkout). Empty unless set.
    pub readable: Vec<PathBuf>,
    /// When false, TCP bind and connect are denied (needs ABI ≥ 4).
    pub network: bool,
    /// Landlock support, probed once when the sandbox was built.
    pub status: LandlockStatus,
    /// Whether commands can get namespaces of their own ([`namespaces_available`], probed once
    /// when the sandbox was built): the read-only protected paths and `network = false`'s
    /// network namespace need them.
    pub namespaces: bool,
    /// The workspace this policy was built for (first entry of `writable`).
    workspace_root: PathBuf,
    /// `writable` minus the workspace and the added directories: what
    /// [`CommandSandbox::for_workspace`] keeps.
    extra_writable: Vec<PathBuf>,
    /// The directories of `--add-dir` (canonical), kept by [`CommandSandbox::for_workspace`]:
    /// writable, with their protected entries read-only like the workspace's.
    added_dirs: Vec<PathBuf>,
    /// [`SandboxSettings::protected_dirs`], kept by [`CommandSandbox::for_workspace`].
    protected_dirs: Vec<PathBuf>,
    /// How many processes a command may run and how much memory each may allocate
    /// ([`limits`]); applied with the rest of the sandbox, so only when it is enforced.
    pub limits: CommandLimits,
    /// The read rules, built once and reused while the file system they were built from is
    /// unchanged ([`read_layer`]).
    read_layer: ReadLayerCache,
}

impl CommandSandbox {
    /// The policy for commands run in `workspace_root`: writable = workspace +
    /// `settings.writable` (+ each command's private temp dir, given to [`Self::prepare_with`]); probes [`landlock_status`] and, when the
    /// sandbox is wanted but unavailable, logs one `tracing::warn` (show [`Self::note`] too).
    /// Paths are made absolute and canonical where they exist.
    ///
    /// The git directory of the workspace is never writable by commands: `.git` is bound
    /// read-only, and when the workspace is a linked worktree the directories its `.git` file
    /// points to lie outside every writable path.
    pub fn new(settings: &SandboxSettings, workspace_root: &Path) -> Self {
        let status = landlock_status();
        let extra_writable = settings.writable.iter().map(|p| canonical(p)).collect();
        let mut sandbox = Self::build(
            settings.mode,
            workspace_root,
            extra_writable,
            settings.deny_read.iter().map(|p| canonical(p)).collect(),
            settings.network,
            status,
        );
        sandbox.add_dirs(&settings.added_dirs);
        sandbox.protected_dirs = settings.protected_dirs.clone();
        sandbox.limits = settings.limits;
        sandbox.namespaces = settings.mode == SandboxMode::Enforce
            && owned_by_me(&sandbox.workspace_root)
            && namespaces_available();
        if let Some(note) = sandbox.note() {
            tracing::warn!("{note}");
        }
        sandbox
    }

    /// The same policy for another workspace (a worker's worktree): its writable paths are
    /// `workspace_root` + the user's paths, not the original workspace. Does not
    /// probe or warn again.
    pub fn for_workspace(&self, workspace_root: &Path) -> Self {
        let mut sandbox = Self::build(
            self.mode,
            workspace_root,
            self.extra_writable.clone(),
            self.read_denied.clone(),
            self.network,
            self.status,
        );
        sandbox.namespaces = self.namespaces;
        sandbox.limits = self.limits;
        sandbox.add_dirs(&self.added_dirs);
        sandbox.protected_dirs = self.protected_dirs.clone();
        sandbox
    }

    /// The user's protected directories ([`SandboxSettings::protected_dirs`]): file tools
    /// refuse to write inside them, commands see those inside a writable path read-only.
    pub fn protected_dirs(&self) -> &[PathBuf] {
        &self.protected_dirs
    }

    /// Makes `dirs` (the directories of `--add-dir`) writable roots, their protected entries
    /// read-only.
    fn add_dirs(&mut self, dirs: &[PathBuf]) {
        for dir in dirs.iter().map(|d| canonical(d)) {
            if !self.writable.contains(&dir) {
                self.writable.push(dir.clone());
            }
            if !self.added_dirs.contains(&dir) {
                self.added_dirs.push(dir);
            }
        }
    }

    /// The directories of `--add-dir` that are still writable (a swarm worker drops one that
    /// holds the user's checkout).
    pub fn added_dirs(&self) -> Vec<PathBuf> {
        self.added_dirs
            .iter()
            .filter(|d| self.writable.contains(d))
            .cloned()
            .collect()
    }

    fn build(
        mode: SandboxMode,
        workspace_root: &Path,
        extra_writable: Vec<PathBuf>,
        read_denied: Vec<PathBuf>,
        network: bool,
        status: LandlockStatus,
    ) -> Self {
        let workspace_root = canonical(workspace_root);
        let mut writable = vec![workspace_root.clone()];
        for p in &extra_writable {
            if !writable.contains(p) {
                writable.push(p.clone());
            }
        }
        CommandSandbox {
            mode,
            writable,
            read_denied,
            readable: Vec::new(),
            network,
            status,
            namespaces: false,
            workspace_root,
            extra_writable,
            added_dirs: Vec::new(),
            protected_dirs: Vec::new(),
            limits: CommandLimits::default(),
            read_layer: ReadLayerCache::default(),
        }
    }

    /// True when commands are actually confined: mode enforce and landlock available.
    pub fn is_enforced(&self) -> bool {
        self.mode == SandboxMode::Enforce && self.status.abi().is_some()
    }

    /// One line for a status line: `sandbox: landlock ABI 7 (writes: workspace, temp; network
    /// off)`, `sandbox: off`, or `sandbox: unavailable (…)`.
    pub fn summary(&self) -> String {
        if self.mode == SandboxMode::Off {
            return "sandbox: off".to_string();
        }
        match self.status {
            LandlockStatus::Available { .. } => {
                let net = if self.network {
                    "network on"
                } else if self.status.supports_network() {
                    "network off"
                } else {
                    "network on (ABI < 4 cannot block it)"
                };
                format!(
                    "sandbox: {} (writes: workspace, temp{}; {net})",
                    self.status,
                    if self.writable.len() > 1 {
                        " and listed paths"
                    } else {
                        ""
                    }
                )
            }
            other => format!("sandbox: unavailable ({other}); rule checks only"),
        }
    }

    /// A warning for the user when the policy cannot be enforced as configured: landlock is
    /// unavailable, or `network = false` on a kernel older than ABI 4, or a denied path lies
    /// inside a writable one (landlock cannot take it out). `None` when all is enforced or the
    /// mode is off.
    pub fn note(&self) -> Option<String> {
        if self.mode == SandboxMode::Off {
            return None;
        }
        let mut notes = Vec::new();
        match self.status {
            LandlockStatus::Available { .. } => {
                if !self.namespaces {
                    notes.push(
                        "commands may write `.git` and `.ahelper`: they get no user namespace for \
                         read-only binds (unprivileged user namespaces are disabled, or the \
                         workspace belongs to another user, whose files a namespace would make \
                         unwritable)"
                            .to_string(),
                    );
                }
                if let Some(missing) = limits::missing_process_limit(self.namespaces) {
                    notes.push(missing.to_string());
                }
                if !self.network && !self.status.supports_network() {
                    notes.push(format!(
                        "sandbox.network = false is not enforced: {} cannot restrict TCP \
                         (ABI 4, Linux 6.7, is needed)",
                        self.status
                    ));
                }
                for denied in &self.read_denied {
                    if let Some(w) = self.writable.iter().find(|w| denied.starts_with(w)) {
                        notes.push(format!(
                            "{} stays readable by commands: it is inside the writable path {} \
                             and landlock cannot exclude a subdirectory",
                            denied.display(),
                            w.display()
                        ));
                    }
                }
            }
            other => notes.push(format!(
                "the command sandbox is not active: {other}; commands are checked by the \
                 permission rules only"
            )),
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// Builds the landlock ruleset for one command, in the parent process. Returns a
    /// [`PreparedSandbox`] that does nothing when [`Self::is_enforced`] is false.
    ///
    /// # Errors
    /// [`SandboxOsError::Ruleset`] when the kernel refuses the ruleset or a rule.
    pub fn prepare(&self) -> Result<PreparedSandbox, SandboxOsError> {
        self.prepare_with(None)
    }

    /// [`Self::prepare`] for one command whose private temp dir `temp_dir` is writable too.
    /// With `network = false` the prepared sandbox also moves the command into a new network
    /// namespace ([`Namespaces`]), which stops UDP, raw and abstract UNIX sockets as well.
    ///
    /// # Errors
    /// [`SandboxOsError::Ruleset`] when the kernel refuses the ruleset or a rule.
    pub fn prepare_with(&self, temp_dir: Option<&Path>) -> Result<PreparedSandbox, SandboxOsError> {
        self.prepare_hiding(temp_dir, &crate::permissions::HiddenPaths::default())
    }

    /// [`Self::prepare_with`] that also hides `hidden` (what the `read_file` deny rules cover,
    /// [`crate::permissions::hidden_paths`]) from the command: an empty read-only file or
    /// directory is bound over each, in the command's mount namespace (placeholders made in
    /// `temp_dir`). Needs namespaces ([`Self::namespaces`]); without them nothing is hidden.
    ///
    /// # Errors
    /// [`SandboxOsError::Ruleset`] when the kernel refuses the ruleset or a rule;
    /// [`SandboxOsError::Hide`] when the placeholders cannot be made or a path cannot be
    /// described (the command must not run).
    pub fn prepare_hiding(
        &self,
        temp_dir: Option<&Path>,
        hidden: &crate::permissions::HiddenPaths,
    ) -> Result<PreparedSandbox, SandboxOsError> {
        if !self.is_enforced() {
            return Ok(PreparedSandbox {
                ruleset: None,
                read_layer: None,
                namespaces: None,
                report: None,
                limits: None,
            });
        }
        let err = |e: landlock::RulesetError| SandboxOsError::Ruleset(e.to_string());
        let abi = TARGET_ABI;
        let read = AccessFs::from_read(abi);
        let write = AccessFs::from_write(abi);
        let read_layer = self.read_layer.ruleset(&self.read_key(temp_dir), abi)?;
        let mut ruleset = Ruleset::default().handle_access(write).map_err(err)?;
        if !self.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(err)?;
        }
        let mut created = ruleset.create().map_err(err)?;
        // Terminal and device ioctls (e.g. `isatty`, window size) on device files.
        created = add_path_rule(created, Path::new("/dev"), AccessFs::IoctlDev.into(), abi)
            .map_err(err)?;
        for dev in WRITABLE_DEVICES {
            created = add_path_rule(created, Path::new(dev), write, abi).map_err(err)?;
        }
        for path in self.writable.iter().map(PathBuf::as_path).chain(temp_dir) {
            created = add_path_rule(created, path, write, abi).map_err(err)?;
        }
        let read_only = if self.namespaces {
            let mut mounts = self.read_only_mounts();
            mounts.extend(hiding_mounts(hidden, temp_dir)?);
            mounts
        } else {
            Vec::new()
        };
        let limits = PreparedLimits::new(self.limits);
        let (pid_init, report) = if self.namespaces {
            let (report, init) = pid_init_for(&read_layer, read.bits())
                .map_err(|e| SandboxOsError::Ruleset(e.to_string()))?;
            (Some(init.with_pid_max(limits.pid_max())), Some(report))
        } else {
            (None, None)
        };
        let namespaces = Namespaces::new(!self.network, read_only, self.namespaces, pid_init);
        Ok(PreparedSandbox {
            ruleset: Some(created),
            read_layer: Some(read_layer),
            namespaces: (!namespaces.is_empty()).then_some(namespaces),
            report,
            limits: Some(limits),
        })
    }

    /// What commands see read-only: the protected top-level entries of the workspace and the
    /// added directories ([`protected_entries`]), the `.git` of every repository nested in them
    /// ([`binds::nested_git_entries`]), and the user's protected directories inside any
    /// writable path ([`binds::user_dirs_within`]). The directories between a writable path
    /// and a bound user directory (`~/.config` for `~/.config/ahelper`) are pinned first: bound
    /// onto themselves, still writable, so that they cannot be renamed away (`EBUSY`) and
    /// replaced by a new one with other contents.
    fn read_only_mounts(&self) -> Vec<ReadOnlyMount> {
        let mut roots = vec![self.workspace_root.clone()];
        roots.extend(self.added_dirs());
        let mut paths: Vec<PathBuf> = roots
            .iter()
            .flat_map(|root| {
                let mut entries = protected_entries(root);
                entries.extend(binds::nested_git_entries(root));
                entries
            })
            .collect();
        let user_dirs = binds::user_dirs_within(&self.writable, &self.protected_dirs);
        let pins = binds::ancestors_within(&self.writable, &user_dirs);
        paths.extend(user_dirs);
        let pinned = pins.iter().filter_map(|p| ReadOnlyMount::pinned(p));
        pinned
            .chain(paths.iter().filter_map(|p| ReadOnlyMount::new(p)))
            .collect()
    }

    /// What the read layer is built from: the denied and readable paths, and read granted on
    /// the writable paths and on the directory that holds the commands' temp dirs (`temp_dir`'s
    /// parent, the same for every command: [`crate::command_temp`]).
    fn read_key(&self, temp_dir: Option<&Path>) -> ReadKey {
        let temp_base = temp_dir.map(|t| t.parent().unwrap_or(t).to_path_buf());
        ReadKey {
            denied: self.read_denied.clone(),
            readable: self.readable.clone(),
            granted: self.writable.iter().cloned().chain(temp_base).collect(),
        }
    }

    /// The workspace this policy was built for (canonical).
    pub fn workspace_root(&self) -> &Path {
        &self.workspace_root
    }
}

/// A ruleset built in the parent, ready to be applied in a child between `fork` and `exec`.
#[derive(Debug)]
pub struct PreparedSandbox {
    /// The write rights and the network (this command's own ruleset).
    ruleset: Option<RulesetCreated>,
    /// The read rights: a duplicate of the policy's shared read layer ([`read_layer`]).
    read_layer: Option<RulesetCreated>,
    namespaces: Option<Namespaces>,
    /// Read end of the PID namespace's report pipe ([`Self::take_report`]).
    report: Option<OwnedFd>,
    /// The process and memory limits, applied after the namespaces ([`limits`]).
    limits: Option<PreparedLimits>,
}

/// The report pipe (read end non-blocking, both ends close-on-exec) and the [`PidInit`] of one
/// command, which grants `read` on its new `/proc` in a second descriptor of `ruleset`.
fn pid_init_for(ruleset: &RulesetCreated, read: u64) -> std::io::Result<(OwnedFd, PidInit)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two new descriptors, which we own from here on.
    let (read_end, write_end) = unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK) };
    let proc_rule = ruleset
        .try_clone()
        .ok()
        .and_then(Option::<OwnedFd>::from)
        .map(|fd| (fd, read));
    Ok((read_end, PidInit::new(write_end, proc_rule)))
}

/// The namespaces a command enters before landlock (in the child, between `fork` and `exec`):
///
/// - with `network = false`, a network namespace of its own (only a loopback interface, down):
///   no TCP, UDP, raw or abstract UNIX socket reaches anything outside it;
/// - when the workspace has protected entries at its top level (`.git`, `.ahelper`, a
///   start-up file — [`crate::sandbox::protected`]), a mount namespace in which each of them is
///   bind-mounted onto itself read-only ([`ReadOnlyMount`]). Landlock then forbids the command
///   any mount or unmount (a landlocked thread cannot change the mount topology), so it cannot
///   undo the binds.
///
/// First `unshare` with just those namespaces (needs `CAP_SYS_ADMIN`, which ahelper's hardening
/// drops even for root); else together with `CLONE_NEWUSER`, in a user namespace that maps the
/// user's own uid and gid to themselves (files keep their owner). Where user namespaces are
/// disabled (`kernel.unprivileged_userns_clone = 0`, AppArmor restrictions) the command runs in
/// ahelper's namespaces: landlock still denies TCP, UDP is not stopped and the protected entries
/// stay writable ([`CommandSandbox::note`] says so; [`namespaces_available`] probes it).
#[derive(Debug)]
pub struct Namespaces {
    /// A new network namespace.
    network: bool,
    /// Paths to bind read-only in a new mount namespace.
    read_only: Vec<ReadOnlyMount>,
    /// `"<uid> <uid> 1"` for `/proc/self/uid_map`.
    uid_map: Vec<u8>,
    /// `"<gid> <gid> 1"` for `/proc/self/gid_map`.
    gid_map: Vec<u8>,
    /// A user namespace even when no other namespace is needed: it marks the command's
    /// processes in a way they cannot shed (`env -i`), for the process sweep. With it come a
    /// mount namespace and a PID namespace ([`PidInit`]).
    own_user: bool,
    /// The PID namespace's init, when the command gets one (always with `own_user`).
    pid_init: Option<PidInit>,
}

/// One path bind-mounted onto itself read-only, prepared in the parent: the NUL-terminated
/// path and the flags of the mount it lies on (a remount in a user namespace must keep
/// `nosuid`, `nodev`, `noexec` and the atime flags of the original mount, or the kernel
/// refuses it).
#[derive(Debug)]
pub struct ReadOnlyMount {
    path: std::ffi::CString,
    /// What is bound there: the path itself (`None`), or an empty placeholder that hides it.
    source: Option<std::ffi::CString>,
    kept_flags: libc::c_ulong,
    /// Remounted read-only (every mount but a pin: [`ReadOnlyMount::pinned`]).
    read_only: bool,
}

impl ReadOnlyMount {
    /// The mount for `path`, or `None` when it cannot be described (a NUL in the path, or
    /// `statvfs` failed: the path vanished).
    fn new(path: &Path) -> Option<Self> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        let kept_flags = Self::kept_flags(&path)?;
        Some(ReadOnlyMount {
            path,
            source: None,
            kept_flags,
            read_only: true,
        })
    }

    /// `path` bound onto itself and left writable: a mount point cannot be renamed or removed
    /// (`EBUSY`), so the directory stays where ahelper looks for what it holds.
    fn pinned(path: &Path) -> Option<Self> {
        Self::new(path).map(|m| ReadOnlyMount {
            read_only: false,
            ..m
        })
    }

    /// A read-only bind of the empty placeholder `source` over `path`, hiding what is there.
    fn hiding(path: &Path, source: &Path) -> Option<Self> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        let source = std::ffi::CString::new(source.as_os_str().as_bytes()).ok()?;
        let kept_flags = Self::kept_flags(&source)?;
        Some(ReadOnlyMount {
            path,
            source: Some(source),
            kept_flags,
            read_only: true,
        })
    }

    /// The flags of the mount `path` lies on that a remount in a user namespace must keep.
    fn kept_flags(path: &std::ffi::CStr) -> Option<libc::c_ulong> {
        // SAFETY: `path` is NUL-terminated and `stat` is a plain out-parameter.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
            return None;
        }
        let map = [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ];
        let kept_flags = map
            .iter()
            .filter(|(st, _)| stat.f_flag & st != 0)
            .fold(0, |flags, (_, ms)| flags | ms);
        Some(kept_flags)
    }

    /// Binds the path onto itself and remounts the bind read-only: two `mount(2)` calls.
    fn apply(&self) -> std::io::Result<()> {
        let none = std::ptr::null();
        // SAFETY: NUL-terminated paths owned by `self`; NULL filesystem type and data.
        unsafe {
            let p = self.path.as_ptr();
            let from = self.source.as_ref().map_or(p, |s| s.as_ptr());
            if libc::mount(from, p, none, libc::MS_BIND | libc::MS_REC, none.cast()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if !self.read_only {
                return Ok(());
            }
            let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | self.kept_flags;
            if libc::mount(none, p, none, flags, none.cast()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Namespaces {
    /// The plan for one command: a network namespace when `network`, a mount namespace when
    /// `read_only` is not empty, maps for this process's effective user.
    fn new(
        network: bool,
        read_only: Vec<ReadOnlyMount>,
        own_user: bool,
        pid_init: Option<PidInit>,
    ) -> Self {
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Namespaces {
            network,
            read_only,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            own_user,
            pid_init: pid_init.filter(|_| own_user),
        }
    }

    fn is_empty(&self) -> bool {
        !self.network && self.read_only.is_empty() && !self.own_user
    }

    /// Enters the new namespaces and makes the binds (in the child, before `exec`): system
    /// calls only, no allocation. An error when the namespaces were made but the maps or a
    /// bind failed: the command does not start rather than run with writable protected paths.
    fn enter(&self) -> std::io::Result<()> {
        if self.own_user {
            return self.enter_own();
        }
        let mut flags = 0;
        if self.network {
            flags |= libc::CLONE_NEWNET;
        }
        if !self.read_only.is_empty() {
            flags |= libc::CLONE_NEWNS;
        }
        if flags == 0 {
            // Only the marking user namespace: best effort, the command runs without it.
            // SAFETY: unshare(2) with a flag constant.
            if self.own_user && unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0 {
                self.write_maps()?;
            }
            return Ok(());
        }
        // SAFETY: unshare(2) with flag constants.
        if unsafe { libc::unshare(flags) } != 0 {
            // SAFETY: as above.
            if unsafe { libc::unshare(libc::CLONE_NEWUSER | flags) } != 0 {
                return Ok(());
            }
            self.write_maps()?;
        }
        if self.read_only.is_empty() {
            return Ok(());
        }
        // Keep the binds in this namespace: nothing propagates back to ahelper's.
        // SAFETY: NUL-terminated constant path, NULL type and data.
        let none = std::ptr::null();
        let private = libc::MS_REC | libc::MS_PRIVATE;
        if unsafe { libc::mount(none, c"/".as_ptr(), none, private, none.cast()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.read_only.iter().try_for_each(ReadOnlyMount::apply)
    }
}

impl Namespaces {
    /// [`Self::enter`] when the command gets namespaces of its own: a user, mount and PID
    /// namespace (and a network one when `network`), `/` private, the read-only binds, then
    /// [`PidInit::start`] — so this returns in the command's process, PID 2 of the namespace.
    /// Without a PID namespace (the kernel refused one) the command runs as before, found by
    /// the process sweep.
    fn enter_own(&self) -> std::io::Result<()> {
        let mut flags = libc::CLONE_NEWNS;
        if self.network {
            flags |= libc::CLONE_NEWNET;
        }
        let pid = if self.pid_init.is_some() {
            libc::CLONE_NEWPID
        } else {
            0
        };
        // SAFETY: unshare(2) with flag constants.
        let entered = [
            flags | pid,
            libc::CLONE_NEWUSER | flags | pid,
            libc::CLONE_NEWUSER | flags,
        ]
        .into_iter()
        .find(|f| unsafe { libc::unshare(*f) } == 0);
        let Some(entered) = entered else {
            return Ok(());
        };
        if entered & libc::CLONE_NEWUSER != 0 {
            self.write_maps()?;
        }
        // Keep the binds in this namespace: nothing propagates back to ahelper's.
        let none = std::ptr::null();
        let private = libc::MS_REC | libc::MS_PRIVATE;
        // SAFETY: NUL-terminated constant path, NULL type and data.
        if unsafe { libc::mount(none, c"/".as_ptr(), none, private, none.cast()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.read_only.iter().try_for_each(ReadOnlyMount::apply)?;
        match &self.pid_init {
            Some(init) if entered & libc::CLONE_NEWPID != 0 => init.start(),
            _ => Ok(()),
        }
    }

    /// Writes `setgroups`, `uid_map` and `gid_map` of the calling process. ahelper is not
    /// dumpable (`hardening`), which makes its `/proc/self` files root's: an unprivileged child
    /// could not open them. So the child is dumpable for these three writes only — landlocked
    /// commands cannot `ptrace` it anyway (it is outside their domain), and `exec` right after
    /// replaces its memory.
    fn write_maps(&self) -> std::io::Result<()> {
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
        let written = write_proc_file(c"/proc/self/setgroups", b"deny")
            .and_then(|()| write_proc_file(c"/proc/self/uid_map", &self.uid_map))
            .and_then(|()| write_proc_file(c"/proc/self/gid_map", &self.gid_map));
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        written
    }
}

/// Whether this process can give commands namespaces of their own: forks a child that tries
/// `unshare(CLONE_NEWUSER | CLONE_NEWNS)` and exits with the answer. About a millisecond; call
/// once per sandbox.
pub fn namespaces_available() -> bool {
    // SAFETY: the child makes only async-signal-safe system calls and `_exit`s.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let ok = libc::unshare(libc::CLONE_NEWNS) == 0
                || libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
        if pid < 0 {
            return false;
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0) == pid
            && libc::WIFEXITED(status)
            && libc::WEXITSTATUS(status) == 0
    }
}

/// True when the effective user owns `path`. In a user namespace that maps only this user,
/// files of other users cannot be written even by root (its capabilities do not cover
/// unmapped owners), so a workspace of another user gets no namespace.
fn owned_by_me(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(path).is_ok_and(|m| m.uid() == me)
}

/// The entries at the top level of `workspace_root` that are protected paths
/// ([`crate::sandbox::protected::protection`]): `.git` (a directory, or a worktree's `.git`
/// file), `.ahelper`, `.ssh`, shell start-up files. Each becomes a read-only bind for commands.
pub fn protected_entries(workspace_root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(workspace_root) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| crate::sandbox::protected::protection(Path::new(&e.file_name())).is_some())
        .filter(|e| !e.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The number of processes a command's PID namespace init killed after the command's shell
/// ended, from the report pipe ([`PreparedSandbox::take_report`]); `None` when nothing was
/// written (the namespace's processes were killed with it, or it had none).
pub fn read_leftover_report(report: &OwnedFd) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 4];
    // SAFETY: read(2) into a stack buffer of the given size from a descriptor we own.
    let n = unsafe { libc::read(report.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    (n == 4).then(|| u32::from_le_bytes(buf))
}

/// `open(path, O_WRONLY)`, one `write`, `close`: async-signal-safe.
fn write_proc_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: `path` is NUL-terminated; the descriptor is used and closed here only.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if written < 0 {
            return Err(error);
        }
    }
    Ok(())
}

impl PreparedSandbox {
    /// The read end of the command's report pipe when it gets a PID namespace of its own:
    /// after the command ends it holds the number of processes its namespace's init killed
    /// (a `u32`, little-endian; nothing when the command was killed) — read it with
    /// [`read_leftover_report`]. Take it before [`Self::install`].
    pub fn take_report(&mut self) -> Option<OwnedFd> {
        self.report.take()
    }

    /// True when applying it confines the process (false for a disabled sandbox).
    pub fn is_active(&self) -> bool {
        self.ruleset.is_some()
    }

    /// Restricts the **calling** process (thread): enters a new network namespace when the
    /// policy has `network = false` and binds the protected entries read-only ([`Namespaces`]), then applies the ruleset with
    /// `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self(2)`. Meant for the child after
    /// `fork`: it allocates nothing and makes only system calls. A second call does nothing.
    ///
    /// # Errors
    /// The errno of the failing system call; the child then exits before `exec`.
    pub fn restrict_self(&mut self) -> std::io::Result<()> {
        if let Some(namespace) = self.namespaces.take() {
            namespace.enter()?;
            // In namespaces of its own a command holds capabilities over them, enough to see
            // beneath the read-only binds (`open_tree`): it keeps none.
            capabilities::drop_all()?;
        }
        if let Some(limits) = self.limits.take() {
            limits.apply()?;
        }
        // The small ruleset first: each `landlock_restrict_self` copies the domain it stacks
        // on, so the large read layer is copied once, not twice.
        if let Some(ruleset) = self.ruleset.take() {
            enforce(ruleset)?;
        }
        match self.read_layer.take() {
            Some(read_layer) => enforce(read_layer),
            None => Ok(()),
        }
    }

    /// Makes `cmd` apply this ruleset in its child before `exec` (through `pre_exec`). An
    /// inactive sandbox leaves `cmd` unchanged (so std can still use `posix_spawn`).
    pub fn install(self, cmd: &mut tokio::process::Command) {
        if !self.is_active() {
            return;
        }
        let mut prepared = self;
        // SAFETY: the closure runs in the forked child; `restrict_self` only moves an `Option`
        // out of memory the child owns and makes two async-signal-safe system calls (prctl,
        // landlock_restrict_self), without allocating or taking locks.
        unsafe {
            cmd.pre_exec(move || prepared.restrict_self());
        }
    }
}

/// Applies `ruleset` to the calling thread (in the child, between `fork` and `exec`).
fn enforce(ruleset: RulesetCreated) -> std::io::Result<()> {
    match ruleset.restrict_self() {
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
        // The parent checked that landlock is available; an unenforced ruleset here means
        // the kernel changed its mind: refuse rather than run unconfined.
        Ok(_) => Err(std::io::Error::from_raw_os_error(libc::ENOSYS)),
        Err(_) => Err(std::io::Error::last_os_error()),
    }
}

/// `realpath` when the path exists, else the path as given.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_parses() {
        assert_eq!("enforce".parse::<SandboxMode>(), Ok(SandboxMode::Enforce));
        assert_eq!("OFF".parse::<SandboxMode>(), Ok(SandboxMode::Off));
        assert!("maybe".parse::<SandboxMode>().is_err());
    }

    #[test]
    fn read_plan_excludes_denied_and_lists_ancestors() {
        let home = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(home.path()).unwrap();
        for d in [".ssh", ".config/ahelper", ".config/other", "src"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join("notes.txt"), "x").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), home.join("sneaky")).unwrap();
        std::os::unix::fs::symlink(home.join("src"), home.join("fine")).unwrap();
        let plan = read_plan(&[home.join(".ssh"), home.join(".config/ahelper")]);
        assert!(plan.list_only.contains(&PathBuf::from("/")));
        assert!(plan.list_only.contains(&home));
        assert!(plan.list_only.contains(&home.join(".config")));
        assert!(plan.readable.contains(&home.join("src")));
        assert!(plan.readable.contains(&home.join("notes.txt")));
        assert!(plan.readable.contains(&home.join(".config/other")));
        assert!(plan.readable.contains(&home.join("fine")));
        for p in plan.readable.iter().chain(&plan.list_only) {
            assert!(!p.starts_with(home.join(".ssh")), "{}", p.display());
            assert!(!p.starts_with(home.join(".config/ahelper")));
        }
        assert!(!plan.readable.contains(&home.join("sneaky")));
        assert!(plan.readable.contains(&PathBuf::from("/usr")));
    }

    #[test]
    fn no_denied_paths_means_root_readable() {
        let plan = read_plan(&[]);
        assert_eq!(plan.readable, vec![PathBuf::from("/")]);
        assert!(plan.list_only.is_empty());
    }

    #[test]
    fn for_workspace_swaps_only_the_workspace() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let mut settings = SandboxSettings::with_defaults(Some(Path::new("/home/u")));
        settings
            .writable
            .push(PathBuf::from("/opt/cache-that-does-not-exist"));
        let s = CommandSandbox::new(&settings, a.path());
        let w = s.for_workspace(b.path());
        let b_real = std::fs::canonicalize(b.path()).unwrap();
        let a_real = std::fs::canonicalize(a.path()).unwrap();
        assert_eq!(w.writable[0], b_real);
        assert!(!w.writable.contains(&a_real) || a_real.starts_with(std::env::temp_dir()));
        assert!(
            w.writable
                .contains(&PathBuf::from("/opt/cache-that-does-not-exist"))
        );
        assert_eq!(w.read_denied, s.read_denied);
        assert_eq!(w.workspace_root(), b_real);
    }

    #[test]
    fn summary_and_note_describe_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = SandboxSettings::with_defaults(None);
        settings.mode = SandboxMode::Off;
        let off = CommandSandbox::new(&settings, dir.path());
        assert_eq!(off.summary(), "sandbox: off");
        assert!(off.note().is_none());
        assert!(!off.is_enforced());
        let unavailable = CommandSandbox {
            mode: SandboxMode::Enforce,
            status: LandlockStatus::NotImplemented,
            ..off.clone()
        };
        assert!(unavailable.summary().contains("unavailable"));
        assert!(unavailable.note().unwrap().contains("not active"));
        let old = CommandSandbox {
            mode: SandboxMode::Enforce,
            status: LandlockStatus::Available { abi: 3 },
            network: false,
            ..off
        };
        assert!(old.note().unwrap().contains("ABI 4"));
    }
}
