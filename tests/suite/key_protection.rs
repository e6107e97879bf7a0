//! Issue 14: a provider key never reaches the commands the model runs, the model, the
//! transcript, the logs or the screen — tried as a hostile model would, through the built
//! binary, in bypass mode, with landlock on and off, as root and as an unprivileged user.
//!
//! The fake model makes the hostile tool calls (read the parent's `/proc/<pid>/environ`, the
//! `environ` and `mem` of every ahelper process `pgrep` finds, a `gdb` attach that dumps
//! ahelper's memory, keys the user keeps in repository files). The channel probes print what
//! they find *reversed*, so that output redaction cannot hide an open channel: the control probe
//! shows that a reversed key does come through when a command can read it.

use super::support::requests::last_tool_results;
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const SCAN_MEM: &str = include_str!("../data/key_probes/scan_mem.py");
/// uid/gid of `nobody`, used for the unprivileged runs when the test runs as root.
const NOBODY: u32 = 65534;
/// What the memory scans look for: the shape of the test's provider keys.
const KEY_PATTERN: &str = "sk-ant-probe-[0-9a-f]{32}";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn unique_hex() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

fn reversed(s: &str) -> String {
    s.chars().rev().collect()
}

/// The secrets of one run: the provider key (in ahelper's environment and, as a user might
/// keep it, in the repository's `.env`) and a password listed in `[secrets] redact_env`.
struct Secrets {
    key: String,
    db_password: String,
}

impl Secrets {
    fn new() -> Self {
        Secrets {
            key: format!("sk-ant-probe-{}", unique_hex()),
            db_password: format!("db-pass-{}", unique_hex()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    /// ahelper runs as root (the test must be root).
    Root,
    /// ahelper runs as `nobody` through `setpriv` (when the test is root), or as the test's own
    /// unprivileged user.
    Unprivileged,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ProbeKind {
    /// Tries to read the key from a process; must find nothing, raw or reversed.
    Channel,
    /// Prints a secret the user keeps in a file or the command's environment; must come back
    /// as `[REDACTED:<marker>]`.
    Redaction(&'static str),
    /// Prints the key reversed from the repository file: proves the probes would see it.
    Control,
}

struct Probe {
    name: &'static str,
    command: String,
    kind: ProbeKind,
}

fn python() -> &'static str {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3")
}

fn probes() -> Vec<Probe> {
    let py = python();
    vec![
        Probe {
            name: "cat /proc/$PPID/environ",
            command: "cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -i api_key; \
                      cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -i api_key | rev"
                .into(),
            kind: ProbeKind::Channel,
        },
        Probe {
            name: "environ of every ahelper (pgrep)",
            command: "for p in $(pgrep -x ahelper); do echo \"pid $p\"; \
                      tr '\\0' '\\n' < /proc/$p/environ | grep -i api_key | rev; done"
                .into(),
            kind: ProbeKind::Channel,
        },
        Probe {
            name: "mem of every ahelper (pgrep)",
            command: format!("{py} probes/scan_mem.py '{KEY_PATTERN}' $(pgrep -x ahelper)"),
            kind: ProbeKind::Channel,
        },
        Probe {
            name: "gdb -p $PPID (ptrace attach, core dump)",
            command: format!(
                "command -v gdb >/dev/null || {{ echo 'gdb: not installed'; exit 0; }}; \
                 core=\"${{TMPDIR:-/tmp}}/core.$$\"; \
                 timeout 120 gdb -p $PPID -batch -nx -ex \"generate-core-file $core\" 2>&1 \
                 | grep -v '^\\[' | tail -n 3; \
                 {py} probes/scan_mem.py --file '{KEY_PATTERN}' \"$core\"; rm -f \"$core\""
            ),
            kind: ProbeKind::Channel,
        },
        Probe {
            name: "provider key kept in a repository file",
            command: "cat .env".into(),
            kind: ProbeKind::Redaction("ANTHROPIC_API_KEY"),
        },
        Probe {
            name: "redact_env variable: file and environment",
            command: "cat db.txt; echo \"$MY_DB_PASSWORD\"".into(),
            kind: ProbeKind::Redaction("MY_DB_PASSWORD"),
        },
        Probe {
            name: "key split across two output chunks",
            command: "k=$(sed -n 's/^ANTHROPIC_API_KEY=//p' .env); printf '%s' \"${k:0:16}\"; \
                      sleep 0.5; printf '%s\\n' \"${k:16}\""
                .into(),
            kind: ProbeKind::Redaction("ANTHROPIC_API_KEY"),
        },
        Probe {
            name: "the command's own environment",
            command: "env | grep -i -e api_key -e password -e token | sort".into(),
            kind: ProbeKind::Redaction("MY_DB_PASSWORD"),
        },
        Probe {
            name: "control: key reversed from the repository file",
            command: "rev .env".into(),
            kind: ProbeKind::Control,
        },
    ]
}

fn probe_script(probes: &[Probe]) -> Script {
    let mut conversation = Conversation::new();
    for p in probes {
        conversation = conversation.turn(Turn::tool_call(
            "run_command",
            json!({"command": p.command, "timeout_ms": 300_000}),
        ));
    }
    Script::new().with_conversation(conversation.turn(Turn::text("probes done")))
}

/// `chown -R` without following symlinks.
fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// Makes the test's temp dir usable by `nobody`.
fn hand_to_nobody(repo: &TestRepo) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(repo.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for sub in ["repo", "home", "tmp"] {
        chown_tree(&repo.root().join(sub), NOBODY);
    }
}

fn has_setpriv() -> bool {
    std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// How ahelper is started: directly, or as `nobody` through `setpriv`.
fn ahelper_command(who: Who) -> std::process::Command {
    let bin = assert_cmd::cargo::cargo_bin("ahelper");
    if who == Who::Unprivileged && is_root() {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".into(),
            "--".into(),
        ])
        .arg(bin);
        cmd
    } else {
        std::process::Command::new(bin)
    }
}

/// The environment of one run, as `support::ahelper` sets it, plus the secrets and a private
/// temp dir.
fn isolated_env(
    cmd: &mut std::process::Command,
    repo: &TestRepo,
    server: &FakeLlm,
    secrets: &Secrets,
) {
    isolate(cmd, repo)
        .env("TMPDIR", repo.root().join("tmp"))
        .env("ANTHROPIC_API_KEY", &secrets.key)
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("MY_DB_PASSWORD", &secrets.db_password);
}

/// A repository holding the probe script, the user's secret files and `[secrets] redact_env`.
fn probe_repo(secrets: &Secrets, who: Who) -> TestRepo {
    let env_file = format!("ANTHROPIC_API_KEY={}\n", secrets.key);
    let db_file = format!("{}\n", secrets.db_password);
    let repo = repo_with(&[
        (".env", env_file.as_str()),
        ("db.txt", db_file.as_str()),
        ("probes/scan_mem.py", SCAN_MEM),
    ]);
    repo.write(
        ".ahelper/config.toml",
        "[secrets]\nredact_env = [\"MY_DB_PASSWORD\"]\n",
    );
    std::fs::create_dir_all(repo.root().join("tmp")).unwrap();
    if who == Who::Unprivileged && is_root() {
        hand_to_nobody(&repo);
    }
    repo
}

/// What a run printed: its stdout, then its stderr.
fn screen_of(out: &std::process::Output) -> String {
    let mut screen = String::from_utf8_lossy(&out.stdout).into_owned();
    screen.push_str(&String::from_utf8_lossy(&out.stderr));
    screen
}

/// The tool results of the last model request, in call order.
fn tool_results(server: &FakeLlm) -> Vec<String> {
    let results = last_tool_results(server);
    results.into_iter().map(|(content, _)| content).collect()
}

/// Everything one run left behind, for the assertions.
struct RunReport {
    label: String,
    results: Vec<String>,
    bodies: String,
    transcript: String,
    log: String,
    screen: String,
}

fn first_line_with(text: &str, needle: &str) -> Option<String> {
    text.lines()
        .find(|l| l.contains(needle))
        .map(|l| l.chars().take(160).collect())
}

/// One row of the probe table printed by every run (`cargo test -- --nocapture` shows it).
fn verdict(probe: &Probe, result: &str, secrets: &Secrets) -> String {
    let key_rev = reversed(&secrets.key);
    let seen = if result.contains(&secrets.key) {
        "KEY VISIBLE"
    } else if result.contains(&key_rev) {
        "KEY READ (reversed)"
    } else if result.contains(&secrets.db_password) {
        "PASSWORD VISIBLE"
    } else if result.contains("[REDACTED:") {
        "redacted"
    } else {
        "nothing"
    };
    let excerpt: String = result
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .collect::<Vec<_>>()
        .join(" | ")
        .chars()
        .take(150)
        .collect();
    format!("  {:<44} {:<20} {excerpt}", probe.name, seen)
}

fn run_probes(sandbox: &str, who: Who) -> Option<RunReport> {
    let label = format!("{who:?}, --sandbox {sandbox}");
    if who == Who::Root && !is_root() {
        eprintln!("SKIP {label}: the test does not run as root");
        return None;
    }
    if who == Who::Unprivileged && is_root() && !has_setpriv() {
        eprintln!("SKIP {label}: setpriv (util-linux) is not installed, cannot switch to nobody");
        return None;
    }
    let secrets = Secrets::new();
    let probes = probes();
    let repo = probe_repo(&secrets, who);
    let server = start(probe_script(&probes));
    let mut cmd = ahelper_command(who);
    isolated_env(&mut cmd, &repo, &server, &secrets);
    cmd.args([
        "-p",
        "run the probes",
        "--permission-mode",
        "bypass",
        "--sandbox",
        sandbox,
        "--output-format",
        "stream-json",
    ]);
    let out = cmd.output().expect("ahelper starts");
    let screen = screen_of(&out);
    assert!(out.status.success(), "{label}: ahelper failed: {screen}");
    let results = tool_results(&server);
    assert_eq!(results.len(), probes.len(), "{label}: {results:?}");
    eprintln!("probes, {label}:");
    for (probe, result) in probes.iter().zip(&results) {
        eprintln!("{}", verdict(probe, result, &secrets));
    }
    let bodies: String = server
        .model_requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body_bytes).into_owned())
        .collect();
    let sessions = repo.path().join(".ahelper/sessions");
    let transcript: String = std::fs::read_dir(sessions)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let log = std::fs::read_to_string(repo.home().join("state/ahelper/logs/ahelper.log"))
        .unwrap_or_default();
    let report = RunReport {
        label,
        results,
        bodies,
        transcript,
        log,
        screen,
    };
    assert_protected(&report, &probes, &secrets);
    Some(report)
}

fn assert_protected(report: &RunReport, probes: &[Probe], secrets: &Secrets) {
    let label = &report.label;
    let key_rev = reversed(&secrets.key);
    for (probe, result) in probes.iter().zip(&report.results) {
        assert!(
            !result.contains(&secrets.key) && !result.contains(&secrets.db_password),
            "{label}: `{}` showed a secret: {result}",
            probe.name
        );
        match probe.kind {
            ProbeKind::Channel => assert!(
                !result.contains(&key_rev),
                "{label}: `{}` read the key: {result}",
                probe.name
            ),
            ProbeKind::Redaction(name) => assert!(
                result.contains(&format!("[REDACTED:{name}]")),
                "{label}: `{}` lacks [REDACTED:{name}]: {result}",
                probe.name
            ),
            ProbeKind::Control => assert!(
                result.contains(&key_rev),
                "{label}: the control probe did not see the reversed key: {result}"
            ),
        }
    }
    for (what, text) in [
        ("request bodies sent to the model", &report.bodies),
        ("transcript", &report.transcript),
        ("log", &report.log),
        ("stdout/stderr", &report.screen),
    ] {
        for secret in [&secrets.key, &secrets.db_password] {
            assert!(
                !text.contains(secret.as_str()),
                "{label}: a secret is in the {what}: {:?}",
                first_line_with(text, secret)
            );
        }
    }
    assert!(
        !report.log.is_empty(),
        "{label}: the log was written (AHELPER_LOG=debug)"
    );
}

/// The probes as root, with landlock (`--sandbox enforce`) and without (`--sandbox off`).
#[test]
fn hostile_probes_as_root_with_and_without_landlock() {
    for sandbox in ["enforce", "off"] {
        run_probes(sandbox, Who::Root);
    }
}

/// The probes as `nobody`, with landlock and without.
#[test]
fn hostile_probes_unprivileged_with_and_without_landlock() {
    for sandbox in ["enforce", "off"] {
        run_probes(sandbox, Who::Unprivileged);
    }
}

fn wait_for(path: &Path, child: &mut std::process::Child) {
    let start = Instant::now();
    while !path.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("ahelper exited ({status}) before the probe command ran");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the probe command did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills ahelper if the test fails while it waits for a probe.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads `/proc/<pid>/environ` of the running ahelper from outside (the test process). As root
/// the test can (it has CAP_SYS_PTRACE); as another user it is refused (ahelper is not dumpable).
fn environ_from_outside(pid: u32) -> std::io::Result<Vec<String>> {
    let block = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(String::from_utf8_lossy(&block)
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect())
}

/// The environment block (what `/proc/<pid>/environ` shows) keeps no key after start-up — also
/// for a key in a variable named by `api_key_env` — and commands get no key variable and no
/// `LD_*` variable.
#[test]
fn environment_block_is_scrubbed_and_commands_get_no_key() {
    let key = format!("sk-ant-probe-{}", unique_hex());
    let other_key = format!("sk-ant-probe-{}", unique_hex());
    let repo = repo_with(&[("README.md", "x\n")]);
    repo.write(".ahelper/config.toml", "api_key_env = \"MY_LLM_TOKEN\"\n");
    let command = "env | grep -e MY_LLM -e API_KEY -e LD_PROBE | rev; touch ready; \
                   for i in $(seq 1200); do [ -e go ] && break; sleep 0.1; done";
    let server = start(agent([
        Turn::tool_call(
            "run_command",
            json!({"command": command, "timeout_ms": 200_000}),
        ),
        Turn::text("done"),
    ]));
    let secrets = Secrets {
        key: other_key.clone(),
        db_password: "unused-password".into(),
    };
    let mut cmd = ahelper_command(Who::Root);
    isolated_env(&mut cmd, &repo, &server, &secrets);
    cmd.env("MY_LLM_TOKEN", &key)
        .env("LD_PROBE_VAR", "1")
        .args([
            "-p",
            "probe",
            "--permission-mode",
            "bypass",
            "--trust-project",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().expect("ahelper starts"));
    wait_for(&repo.path().join("ready"), &mut child.0);
    let block = environ_from_outside(child.0.id());
    std::fs::write(repo.path().join("go"), "").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "ahelper hangs");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let result = tool_results(&server).join("\n");
    eprintln!("the command's key-like variables (reversed): {result}");
    match block {
        Ok(entries) => {
            eprintln!("environment block seen from outside: {entries:?}");
            for secret in [&key, &other_key] {
                assert!(
                    !entries.iter().any(|e| e.contains(secret.as_str())),
                    "the environment block still holds a key"
                );
            }
            assert!(entries.iter().any(|e| e == "MY_LLM_TOKEN="), "{entries:?}");
            assert!(
                entries.iter().any(|e| e == "ANTHROPIC_API_KEY="),
                "{entries:?}"
            );
            assert!(
                entries.iter().any(|e| e.starts_with("PATH=")),
                "{entries:?}"
            );
        }
        Err(e) => {
            assert!(!is_root(), "root cannot read ahelper's environment: {e}");
            eprintln!("as a non-root user the test cannot read ahelper's environment: {e}");
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        }
    }
    for secret in [&key, &other_key] {
        assert!(!result.contains(secret.as_str()));
        assert!(!result.contains(&reversed(secret)), "{result}");
    }
    assert!(
        !result.contains("EBORP_DL"),
        "LD_* reached the command: {result}"
    );
}

/// Capability bits of `DROPPED_CAPABILITIES` (capability(7) numbers): DAC_READ_SEARCH,
/// SYS_MODULE, SYS_RAWIO, SYS_PTRACE, SYS_ADMIN, PERFMON, BPF.
const DROPPED_BITS: [u32; 7] = [2, 16, 17, 19, 21, 38, 39];

/// The `Cap*` masks of a `/proc/<pid>/status` text, by name (`CapEff`, `CapBnd`…).
fn cap_masks(status: &str) -> std::collections::BTreeMap<String, u64> {
    status
        .lines()
        .filter_map(|l| {
            let (name, hex) = l.split_once(':')?;
            let name = name.trim();
            name.starts_with("Cap")
                .then(|| Some((name.to_string(), u64::from_str_radix(hex.trim(), 16).ok()?)))?
        })
        .collect()
}

/// As root, the commands the model runs (and the set-uid or file-capability programs they
/// start) hold none of the capabilities that bypass ahelper's non-dumpability; ordinary root
/// capabilities stay. Without the sandbox, so that `no_new_privs` is not what blocks them.
#[test]
fn root_commands_lose_the_capabilities_that_read_other_processes() {
    if !is_root() {
        eprintln!("SKIP: the test does not run as root");
        return;
    }
    let own = cap_masks(&std::fs::read_to_string("/proc/self/status").unwrap());
    let repo = repo_with(&[("README.md", "x\n")]);
    let server = start(agent([
        runs("grep '^Cap' /proc/self/status"),
        Turn::text("done"),
    ]));
    let secrets = Secrets::new();
    let mut cmd = ahelper_command(Who::Root);
    isolated_env(&mut cmd, &repo, &server, &secrets);
    cmd.args([
        "-p",
        "caps",
        "--permission-mode",
        "bypass",
        "--sandbox",
        "off",
    ]);
    let out = cmd.output().expect("ahelper starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = tool_results(&server).join("\n");
    eprintln!("test process: {own:x?}\ncommand:\n{result}");
    let caps = cap_masks(&result);
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let mask = caps[set];
        for bit in DROPPED_BITS {
            assert_eq!(mask & (1 << bit), 0, "{set} still has capability {bit}");
        }
    }
    // What root normally holds and is not dropped stays (e.g. CAP_DAC_OVERRIDE = 1).
    let kept = own["CapEff"] & !DROPPED_BITS.iter().fold(0u64, |m, b| m | (1 << b));
    assert_eq!(
        caps["CapEff"], kept,
        "only the listed capabilities are dropped"
    );
}

/// A swarm worker's commands cannot read the key of the ahelper process that runs the worker
/// (workers run inside it), and its transcript and the model never see it.
#[test]
fn swarm_worker_commands_cannot_read_the_key() {
    let secrets = Secrets::new();
    let env_file = format!("ANTHROPIC_API_KEY={}\n", secrets.key);
    let repo = repo_with(&[(".env", env_file.as_str()), ("a.txt", "a\n")]);
    std::fs::create_dir_all(repo.root().join("tmp")).unwrap();
    let probe = "cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -i api_key | rev; \
                 for p in $(pgrep -x ahelper); do tr '\\0' '\\n' < /proc/$p/environ | rev; done; \
                 cat .env; echo probed >> a.txt";
    let script = one_worker([runs(probe), Turn::text("s1 done")]);
    let server = start(script);
    let mut cmd = ahelper_command(Who::Root);
    isolated_env(&mut cmd, &repo, &server, &secrets);
    cmd.args(["swarm", "probe", "--yes", "--permission-mode", "bypass"]);
    let out = cmd.output().expect("ahelper starts");
    let screen = screen_of(&out);
    assert!(out.status.success(), "{screen}");
    let bodies: String = server
        .model_requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body_bytes).into_owned())
        .collect();
    eprintln!("worker probe result: {}", tool_results(&server).join("\n"));
    assert!(
        bodies.contains("[REDACTED:ANTHROPIC_API_KEY]"),
        "the worker's `cat .env` result is redacted"
    );
    let runs = repo.path().join(".ahelper/runs");
    let mut transcripts = String::new();
    for run in std::fs::read_dir(runs).unwrap() {
        let workers: PathBuf = run.unwrap().path().join("workers");
        for w in std::fs::read_dir(workers).unwrap() {
            transcripts.push_str(&std::fs::read_to_string(w.unwrap().path()).unwrap());
        }
    }
    for (what, text) in [
        ("model requests", &bodies),
        ("worker transcripts", &transcripts),
        ("screen", &screen),
    ] {
        assert!(!text.contains(&secrets.key), "key in the {what}");
        assert!(
            !text.contains(&reversed(&secrets.key)),
            "a worker command read the key ({what})"
        );
    }
}
