//! Hardening of every ahelper process that holds a provider key, so that the commands the model
//! runs (and anything else of the same user) cannot read the key out of it.
//!
//! The pattern, for the `ahelper` binary today and for any other process that will hold a key
//! (a remote worker process, say): before any thread starts,
//! 1. [`harden_process`] — first thing in `main`:
//!    - `prctl(PR_SET_DUMPABLE, 0)`: the process is not dumpable, so other processes of the same
//!      user can neither `ptrace` it nor open its `/proc/<pid>/environ`, `mem` or `maps` (the
//!      kernel requires `CAP_SYS_PTRACE` for that; the files even become owned by root);
//!    - `RLIMIT_CORE` 0: no core file is written if it crashes;
//!    - every `LD_*` variable is removed, so nothing ahelper starts inherits a preload or
//!      library path injected into its environment;
//!    - the capabilities in [`DROPPED_CAPABILITIES`] are dropped from the effective, permitted,
//!      inheritable and ambient sets and — when the process may (`CAP_SETPCAP`, i.e. root) —
//!      from the bounding set, so that no child regains them by running a set-uid-root or
//!      file-capability program. Every child inherits this: tool commands, git and its hooks.
//! 2. Read the keys into memory (configuration, [`crate::config::Config::load`]).
//! 3. [`scrub_environment`] with the names of the key variables: their values are overwritten
//!    with zero bytes in the process's initial environment block (the memory that
//!    `/proc/<pid>/environ` shows: it is never updated by `unsetenv`) and the variables are
//!    removed from the C library's environment, so no child inherits them.
//!
//! Keys then live only in the process's heap, which non-dumpability protects. A key is never
//! passed to a child through its arguments or environment; a process that needs one receives
//! it the way ahelper does (its own environment, scrubbed at once) or over its control channel
//! into memory.

use caps::{CapSet, Capability};

/// Capabilities no process started by ahelper keeps, and why:
/// - `CAP_SYS_PTRACE`: `ptrace`, `process_vm_readv` and `/proc/<pid>/{environ,mem}` of a
///   non-dumpable process — the direct way around [`harden_process`];
/// - `CAP_SYS_ADMIN`: perf and BPF tracing of any process on kernels without the two
///   capabilities below, and many other overrides;
/// - `CAP_BPF`, `CAP_PERFMON`: BPF programs and perf events that read other processes' memory
///   (`bpf_probe_read_user`, user stack samples);
/// - `CAP_SYS_RAWIO`: `/dev/mem` and `/proc/kcore` (physical memory);
/// - `CAP_SYS_MODULE`: loading a kernel module, which can do anything;
/// - `CAP_DAC_READ_SEARCH`: `open_by_handle_at`, which opens files without a path and so
///   around path-based confinement.
///
/// Capabilities ordinary root work needs (`CAP_DAC_OVERRIDE`, `CAP_CHOWN`, `CAP_FOWNER`,
/// `CAP_SETUID`, `CAP_NET_*`…) are kept.
pub const DROPPED_CAPABILITIES: [Capability; 7] = [
    Capability::CAP_SYS_PTRACE,
    Capability::CAP_SYS_ADMIN,
    Capability::CAP_BPF,
    Capability::CAP_PERFMON,
    Capability::CAP_SYS_RAWIO,
    Capability::CAP_SYS_MODULE,
    Capability::CAP_DAC_READ_SEARCH,
];

/// Hardening that could not be done. The binary refuses to start on these: running with a
/// key in a readable process would break the promise of the README's security section.
#[derive(Debug, thiserror::Error)]
pub enum HardeningError {
    /// `prctl(PR_SET_DUMPABLE, 0)` failed.
    #[error(
        "cannot make the process non-dumpable (prctl PR_SET_DUMPABLE): {0}; a seccomp filter \
         may forbid prctl — allow it for ahelper"
    )]
    Dumpable(std::io::Error),
    /// `setrlimit(RLIMIT_CORE, 0)` failed.
    #[error("cannot set the core file size limit to 0 (setrlimit RLIMIT_CORE): {0}")]
    CoreLimit(std::io::Error),
    /// A capability could not be dropped.
    #[error("cannot drop {capability} from the {set} set: {message}")]
    Capability {
        /// E.g. `CAP_SYS_PTRACE`.
        capability: String,
        /// `bounding`, `effective`…
        set: &'static str,
        /// The system call's error.
        message: String,
    },
    /// Called while other threads run: changing the environment is then unsafe and a
    /// capability change would only apply to the calling thread.
    #[error(
        "process hardening must run before any other thread starts, but {threads} threads are \
         running (an ahelper bug: report it)"
    )]
    Threaded {
        /// Threads seen in `/proc/self/stat`.
        threads: usize,
    },
}

/// What [`harden_process`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardeningReport {
    /// `LD_*` variables removed from the environment.
    pub removed_env: Vec<String>,
    /// Capabilities of [`DROPPED_CAPABILITIES`] that the process held and dropped.
    pub dropped_capabilities: Vec<String>,
    /// The bounding set.
    pub bounding: BoundingSet,
}

/// What happened to the capability bounding set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundingSet {
    /// [`DROPPED_CAPABILITIES`] were removed from it: no child can regain them.
    Dropped,
    /// Unchanged: the process lacks `CAP_SETPCAP` (it is not root). A child that runs a
    /// set-uid-root program could gain them, unless `no_new_privs` is set (the landlock
    /// sandbox sets it).
    Unchanged,
}

/// What [`scrub_environment`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubReport {
    /// Variables whose values were overwritten in the initial environment block.
    pub zeroed: Vec<String>,
    /// Bytes overwritten with zeros.
    pub bytes: usize,
    /// False when `/proc/self/stat` could not be read (no `/proc`): the block was not found
    /// (nor can another process read it through `/proc`); the variables were still removed.
    pub block_found: bool,
}

/// Hardens the calling process (see the module docs): non-dumpable, no core files, no `LD_*`
/// variables, [`DROPPED_CAPABILITIES`] dropped.
///
/// # Safety
/// No other thread may exist (it changes the environment, and capabilities are per thread):
/// call it first thing in `main`. It checks `/proc/self/stat` and refuses otherwise.
///
/// # Errors
/// [`HardeningError`]; the caller should refuse to run.
pub unsafe fn harden_process() -> Result<HardeningReport, HardeningError> {
    ensure_single_threaded()?;
    // SAFETY: PR_SET_DUMPABLE with an integer argument reads and writes no memory.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(HardeningError::Dumpable(std::io::Error::last_os_error()));
    }
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `no_core` is a valid rlimit that outlives the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) } != 0 {
        return Err(HardeningError::CoreLimit(std::io::Error::last_os_error()));
    }
    let removed_env: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.as_encoded_bytes().starts_with(b"LD_"))
        .map(|name| {
            // SAFETY: single-threaded (checked above), so nothing reads the environment
            // concurrently.
            unsafe { std::env::remove_var(&name) };
            name.to_string_lossy().into_owned()
        })
        .collect();
    let (dropped_capabilities, bounding) = drop_capabilities()?;
    Ok(HardeningReport {
        removed_env,
        dropped_capabilities,
        bounding,
    })
}

/// Drops [`DROPPED_CAPABILITIES`] the kernel knows from every set of the calling thread.
fn drop_capabilities() -> Result<(Vec<String>, BoundingSet), HardeningError> {
    let fail = |capability: Capability, set: &'static str, e: caps::errors::CapsError| {
        HardeningError::Capability {
            capability: capability.to_string(),
            set,
            message: e.to_string(),
        }
    };
    let supported = caps::runtime::thread_all_supported();
    let may_bound = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)
        .map_err(|e| fail(Capability::CAP_SETPCAP, "effective", e))?;
    let mut dropped = Vec::new();
    for cap in DROPPED_CAPABILITIES
        .into_iter()
        .filter(|c| supported.contains(c))
    {
        if may_bound {
            caps::drop(None, CapSet::Bounding, cap).map_err(|e| fail(cap, "bounding", e))?;
        }
        // Effective before permitted: the kernel requires effective ⊆ permitted.
        let mut held = false;
        for (set, name) in [
            (CapSet::Effective, "effective"),
            (CapSet::Inheritable, "inheritable"),
            (CapSet::Permitted, "permitted"),
        ] {
            if caps::has_cap(None, set, cap).map_err(|e| fail(cap, name, e))? {
                caps::drop(None, set, cap).map_err(|e| fail(cap, name, e))?;
                held = true;
            }
        }
        if held {
            dropped.push(cap.to_string());
        }
    }
    // Ambient capabilities (Linux 4.3+) survive exec for non-root programs: clear them all.
    if caps::runtime::ambient_set_supported().is_ok() {
        caps::clear(None, CapSet::Ambient)
            .map_err(|e| fail(Capability::CAP_SYS_PTRACE, "ambient", e))?;
    }
    let bounding = if may_bound {
        BoundingSet::Dropped
    } else {
        BoundingSet::Unchanged
    };
    Ok((dropped, bounding))
}

/// Removes the variables `names` from the process's environment: overwrites their values with
/// zero bytes in the initial environment block (what `/proc/<pid>/environ` shows) and removes
/// them from the C library's environment (what children inherit). Names not set are skipped.
///
/// # Safety
/// No other thread may exist (it writes the environment memory that `getenv` reads). It checks
/// `/proc/self/stat` and refuses otherwise.
///
/// # Errors
/// [`HardeningError::Threaded`].
pub unsafe fn scrub_environment(names: &[String]) -> Result<ScrubReport, HardeningError> {
    let stat = ensure_single_threaded()?;
    let mut report = ScrubReport {
        zeroed: Vec::new(),
        bytes: 0,
        block_found: false,
    };
    if let Some(StatFields {
        env_start, env_end, ..
    }) = stat.filter(|s| s.env_end > s.env_start && s.env_end - s.env_start < MAX_ENV_BLOCK)
    {
        // SAFETY: the kernel reports [env_start, env_end) as the initial environment strings,
        // which lie in this process's stack mapping, writable and never freed. Only the C
        // library's `environ` array points into it (raw pointers, no Rust reference), and no
        // other thread runs (checked), so this exclusive slice aliases nothing in use.
        let block =
            unsafe { std::slice::from_raw_parts_mut(env_start as *mut u8, env_end - env_start) };
        let (zeroed, bytes) = zero_values(block, names);
        report.zeroed = zeroed;
        report.bytes = bytes;
        report.block_found = true;
    }
    for name in names {
        if std::env::var_os(name).is_some() {
            // SAFETY: single-threaded (checked above).
            unsafe { std::env::remove_var(name) };
        }
    }
    Ok(report)
}

/// Largest environment block believed (a sanity bound on the kernel's numbers; Linux caps
/// argv + envp at a quarter of the stack limit).
const MAX_ENV_BLOCK: usize = 1 << 28;

/// Zeroes the values of the `NAME=value` entries of a NUL-separated environment block whose
/// names are in `names`. Returns the names zeroed (in block order) and the bytes overwritten.
fn zero_values(block: &mut [u8], names: &[String]) -> (Vec<String>, usize) {
    let mut zeroed = Vec::new();
    let mut bytes = 0;
    let mut start = 0;
    while start < block.len() {
        let end = block[start..]
            .iter()
            .position(|&b| b == 0)
            .map_or(block.len(), |i| start + i);
        let entry = &block[start..end];
        if let Some(eq) = entry.iter().position(|&b| b == b'=') {
            let name = String::from_utf8_lossy(&entry[..eq]).into_owned();
            if names.contains(&name) && eq + 1 < entry.len() {
                bytes += end - (start + eq + 1);
                block[start + eq + 1..end].fill(0);
                zeroed.push(name);
            }
        }
        start = end + 1;
    }
    (zeroed, bytes)
}

/// The fields of `/proc/self/stat` this module needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatFields {
    threads: usize,
    env_start: usize,
    env_end: usize,
}

/// Parses `/proc/<pid>/stat` (proc(5)): field 20 `num_threads`, fields 50 and 51 `env_start`
/// and `env_end` (Linux 3.5+). The second field, `(comm)`, may contain spaces and parentheses,
/// so fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<StatFields> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    Some(StatFields {
        threads: field(20)?,
        env_start: field(50)?,
        env_end: field(51)?,
    })
}

/// Refuses when more than one thread runs. Returns the parsed stat (`None` without `/proc`,
/// where the check cannot be made: the caller's contract stands alone).
fn ensure_single_threaded() -> Result<Option<StatFields>, HardeningError> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|t| parse_stat(&t));
    match stat {
        Some(s) if s.threads > 1 => Err(HardeningError::Threaded { threads: s.threads }),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_found_after_the_command_name() {
        // A real line (Linux 6.x) whose comm contains ") (" and spaces.
        let line = "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 5 3 0 0 20 0 7 0 \
                    12345 100000 500 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 \
                    1 0 0 0 0 0 140000 140100 150000 140737488350000 140737488350100 \
                    140737488350100 140737488351000 0";
        assert_eq!(
            parse_stat(line),
            Some(StatFields {
                threads: 7,
                env_start: 140737488350100,
                env_end: 140737488351000,
            })
        );
        assert_eq!(parse_stat("1 (x) S 0"), None);
    }

    #[test]
    fn this_process_stat_parses() {
        let stat = parse_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        assert!(stat.threads >= 1);
        assert!(stat.env_end > stat.env_start);
    }

    #[test]
    fn only_the_named_values_are_zeroed() {
        let mut block =
            b"PATH=/bin\0ANTHROPIC_API_KEY=sk-123\0X=\0MY_TOKEN=abc=def\0ANTHROPIC_API_KEYS=k\0"
                .to_vec();
        let names = ["ANTHROPIC_API_KEY".to_string(), "MY_TOKEN".to_string()];
        let (zeroed, bytes) = zero_values(&mut block, &names);
        assert_eq!(zeroed, names);
        assert_eq!(bytes, "sk-123".len() + "abc=def".len());
        assert_eq!(
            block,
            b"PATH=/bin\0ANTHROPIC_API_KEY=\0\0\0\0\0\0\0X=\0MY_TOKEN=\0\0\0\0\0\0\0\0ANTHROPIC_API_KEYS=k\0"
        );
    }

    #[test]
    fn a_block_without_final_nul_is_handled() {
        let mut block = b"A=1\0K=secret".to_vec();
        let (zeroed, _) = zero_values(&mut block, &["K".to_string()]);
        assert_eq!(zeroed, ["K"]);
        assert_eq!(block, b"A=1\0K=\0\0\0\0\0\0");
    }

    #[test]
    fn hardening_refuses_to_run_beside_other_threads() {
        // The test harness runs tests on their own threads, so this process is threaded.
        let _other = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(1)));
        // SAFETY: the call refuses before touching anything when threads run.
        let err = unsafe { scrub_environment(&["NOT_SET_ANYWHERE".into()]) };
        assert!(
            matches!(err, Err(HardeningError::Threaded { .. })),
            "{err:?}"
        );
    }
}
