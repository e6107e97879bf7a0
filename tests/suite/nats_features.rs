//! Distributed swarms (issue 13), what a remote worker shares with a local one: permission
//! questions answered on the coordinator, the `machine` column and `machine lost`, and secured
//! NATS connections (user and password, TLS with a private CA). Real `nats-server -js` on
//! 127.0.0.1, `ahelper worker` processes and the coordinator through the built binary, against
//! the fake LLM server.

use super::support::nats::{
    COORDINATOR_KEY, NatsServer, WorkerProcess, repo_with_remote, temp_repos,
};
use super::support::scripts::{done, plan_files, runs_then_done, was_here, worker};
use super::support::tmux::Tmux;
use super::support::wait::wait_for;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Script};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One subtask `s1` on `a.txt` whose worker writes `s1 was here` into it, then waits `slow_ms`
/// in its second turn and says it is done.
fn writes_slowly(slow_ms: u64) -> Script {
    plan_files(&["a.txt"]).with_conversation(worker(
        "s1",
        [was_here("s1", "a.txt"), done("s1").with_delay_ms(slow_ms)],
    ))
}

/// `ahelper worker --concurrency 2 args…` with `env`, named `name`, talking to `model`.
fn worker_of_two(
    model: &FakeLlm,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> WorkerProcess {
    let args = [&["--concurrency", "2"][..], args].concat();
    WorkerProcess::start_with(&model.base_url(), name, &args, env)
}

/// `ahelper worker --nats <url>` without the credentials or CA the server wants: it exits 1 at
/// once; what it printed on stderr.
fn refused_worker(url: &str) -> String {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let model = start(Script::new());
    let (code, _, stderr) = outcome_of(
        ahelper(&repo, &model, Wire::Anthropic)
            .args(["worker", "--nats", url, "--name", "w"])
            .args(["--trust-coordinator", COORDINATOR_KEY])
            .args(["--allow-repo", &temp_repos()])
            .timeout(Duration::from_secs(60)),
    );
    assert_eq!(code, 1, "{stderr}");
    stderr
}

/// A remote worker's question in a run whose coordinator has no terminal is denied at once,
/// exactly as a local worker's: the refusal is reported with the rule that would allow it; the
/// run's table and `swarm status` name the machine that ran the worker.
#[test]
fn a_remote_question_is_denied_at_once_without_a_terminal_and_the_table_names_the_machine() {
    let nats = NatsServer::start();
    let repo = repo_with_remote(&[("a.txt", "a\n")]);
    let server =
        start(plan_files(&["a.txt"]).with_conversation(runs_then_done("s1", "cargo test --quiet")));
    let worker = worker_of_two(
        &server,
        "m1",
        &["--nats", &nats.url(), "--permission-mode", "accept-edits"],
        &[],
    );
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "test it", "--yes", "--no-verify"])
        .args(["--nats", &nats.url()])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let context = || {
        format!(
            "{stdout}\n{}\nworker:\n{}",
            String::from_utf8_lossy(&out.stderr),
            worker.log()
        )
    };
    assert!(
        stdout.contains(
            "[w1] refused run_command cargo test --quiet: Permission denied: this run_command call \
             needs the user's approval"
        ),
        "{}",
        context()
    );
    assert!(
        stdout.contains("(the rule `run_command(cargo test:*)` would allow it)"),
        "{}",
        context()
    );
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["machine"], "m1", "{run:#}");
    let status = stdout_of(ahelper(&repo, &server, Wire::Anthropic).args(["swarm", "status"]));
    let header = status
        .lines()
        .find(|l| l.starts_with("worker "))
        .unwrap_or_default();
    assert!(header.starts_with("worker  machine  subtask"), "{status}");
    let row = status.lines().find(|l| l.starts_with("w1 ")).unwrap();
    assert!(row.contains(" m1 "), "{status}");
}

/// In the live view, two remote workers' questions are shown as local ones are — labelled with
/// the worker and its subtask — and `a` answers the first; the rule is stored on the
/// coordinator, so the second question is settled without being shown, and both commands run
/// on the worker machine.
#[test]
fn remote_questions_are_answered_in_the_live_view_and_always_is_stored_on_the_coordinator() {
    let nats = NatsServer::start();
    let repo = repo_with_remote(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(scripts::two_sed_workers());
    let worker = worker_of_two(
        &server,
        "m1",
        &[
            "--nats",
            &nats.url(),
            "--permission-mode",
            "accept-edits",
            "--allow-ask",
        ],
        &[],
    );
    let args = [
        "swarm",
        "upper",
        "--yes",
        "--no-verify",
        "--nats",
        &nats.url(),
    ];
    let tmux = Tmux::start_sized(&repo, &server, &args, 140);
    let screen = tmux.wait_for("d = never");
    assert!(screen.contains("`run_command(sed -i:*)`"), "{screen}");
    assert!(
        screen.contains("[w1 · Work on s1]") || screen.contains("[w2 · Work on s2]"),
        "{screen}"
    );
    tmux.type_text("a");
    let screen = tmux.wait_for("Integration branch:");
    assert!(
        screen.contains("2 merged"),
        "{screen}\nworker:\n{}",
        worker.log()
    );
    assert_eq!(screen.matches("d = never").count(), 0, "{screen}");
    let run = last_run(&repo);
    let integration = run["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    assert_eq!(repo.git(&["show", &format!("{integration}:b.txt")]), "B\n");
    for w in run["workers"].as_array().unwrap() {
        assert_eq!(w["machine"], "m1", "{w:#}");
    }
}

/// A worker machine SIGKILLed while it runs a subtask: once its heartbeat expires, `swarm
/// status` shows the machine lost.
#[test]
fn swarm_status_shows_a_machine_lost_when_its_heartbeat_expires() {
    let nats = NatsServer::start();
    let repo = repo_with_remote(&[("a.txt", "a\n")]);
    let server = start(writes_slowly(120_000));
    let mut m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 1);
    let mut coordinator = ahelper_process(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "slow",
            "--yes",
            "--no-verify",
            "--permission-mode",
            "bypass",
        ])
        .args(["--nats", &nats.url()])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(repo.root().join("coordinator.out")).unwrap())
        .stderr(std::fs::File::create(repo.root().join("coordinator.err")).unwrap())
        .spawn()
        .unwrap();
    wait_for("the slow second turn", Duration::from_secs(240), || {
        server.model_requests().len() >= 3
    });
    wait_for("m1 in the table", Duration::from_secs(60), || {
        swarm_status(&repo, &server).contains(" m1 ")
    });
    m1.signal("KILL");
    assert_eq!(m1.wait_exit(Duration::from_secs(30)), None);
    let mut status = String::new();
    wait_for("m1 lost", Duration::from_secs(90), || {
        status = swarm_status(&repo, &server);
        status.contains("m1: machine lost")
    });
    let row = status.lines().find(|l| l.starts_with("w1 ")).unwrap();
    assert!(row.contains("m1: machine lost"), "{status}");
    assert_eq!(last_run(&repo)["workers"][0]["machine_lost"], true);
    let _ = coordinator.kill();
    let _ = coordinator.wait();
}

fn swarm_status(repo: &TestRepo, server: &FakeLlm) -> String {
    let out = ahelper(repo, server, Wire::Anthropic)
        .args(["swarm", "status"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One subtask (`s1` writes `a.txt`) run over `coordinator_args`' server by a worker started
/// with `worker_args`/`worker_env`; asserts it merged.
fn one_subtask_over(coordinator_args: &[&str], worker_args: &[&str], worker_env: &[(&str, &str)]) {
    let repo = repo_with_remote(&[("a.txt", "a\n")]);
    let server = start(writes_slowly(0));
    let args = [&["--permission-mode", "bypass"][..], worker_args].concat();
    let worker = worker_of_two(&server, "secure-1", &args, worker_env);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "write a",
            "--yes",
            "--no-verify",
            "--permission-mode",
            "bypass",
        ])
        .args(coordinator_args)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}\nworker:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        worker.log()
    );
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    assert_eq!(run["workers"][0]["machine"], "secure-1", "{run:#}");
}

/// A server that wants a user and password: the coordinator passes them in the URL, the
/// worker with `--nats-user` and `AHELPER_NATS_PASSWORD`; a wrong password is a prompt, clear
/// error naming the server (without the password), not a hang.
#[test]
fn user_and_password_in_the_url_or_flags_and_a_wrong_password_is_a_clear_error() {
    let server = NatsServer::with_config(
        "authorization { user: ahelper, password: \"s3cret-pw\" }",
        tempfile::tempdir().unwrap(),
    );
    let address = server.address();
    let with_password = format!("nats://ahelper:s3cret-pw@{address}");
    let plain = format!("nats://{address}");
    one_subtask_over(
        &["--nats", &with_password],
        &["--nats", &plain, "--nats-user", "ahelper"],
        &[("AHELPER_NATS_PASSWORD", "s3cret-pw")],
    );
    let stderr = refused_worker(&format!("nats://ahelper:wrong-pw@{address}"));
    assert!(
        stderr.contains(&format!(
            "cannot connect to NATS at nats://ahelper:***@{address}"
        )),
        "{stderr}"
    );
    assert!(stderr.to_lowercase().contains("authorization"), "{stderr}");
    assert!(
        !stderr.contains("wrong-pw"),
        "the password is not printed: {stderr}"
    );
}

/// A private CA and a server certificate for 127.0.0.1, made with the openssl CLI in `dir`;
/// (CA file, certificate, key).
pub(super) fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = |args: &[&str]| {
        succeeds(Command::new("openssl").args(args).current_dir(dir));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=ahelper test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// A TLS server whose certificate a private CA signed: both sides connect with `tls://` and
/// `--nats-ca`; without the CA the connection is refused with a clear error, not a hang.
#[test]
fn tls_with_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let server = NatsServer::with_config(
        &format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\" }}",
            cert.display(),
            key.display()
        ),
        dir,
    );
    let url = format!("tls://{}", server.address());
    let ca = ca.to_str().unwrap();
    one_subtask_over(
        &["--nats", &url, "--nats-ca", ca],
        &["--nats", &url, "--nats-ca", ca],
        &[],
    );
    let stderr = refused_worker(&url);
    assert!(
        stderr.contains(&format!("cannot connect to NATS at {url}")),
        "{stderr}\n{}",
        server.log()
    );
}

/// A signed NATS JWT (`ed25519-nkey`) of `claims` for subject `subject`, issued by `issuer`.
fn jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: Value) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let iat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({
        "jti": format!("T{iat}{}", &subject[1..12]),
        "iat": iat,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let header = b64.encode(json!({"typ": "JWT", "alg": "ed25519-nkey"}).to_string());
    let body = b64.encode(claims.to_string());
    let signed = format!("{header}.{body}");
    let signature = b64.encode(issuer.sign(signed.as_bytes()).unwrap());
    format!("{signed}.{signature}")
}

/// An operator-mode server configuration (operator, a system account and one JetStream-enabled
/// account preloaded in a memory resolver) and a `.creds` file of a user of that account, written in `dir`.
fn operator_mode(dir: &Path) -> (String, PathBuf) {
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let operator_jwt = jwt(
        &operator,
        &operator.public_key(),
        "test-operator",
        json!({"type": "operator", "version": 2}),
    );
    let limits = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1,
        "streams": -1, "consumer": -1});
    let account_jwt = jwt(
        &operator,
        &account.public_key(),
        "test-account",
        json!({"limits": limits, "default_permissions": {"pub": {}, "sub": {}},
               "type": "account", "version": 2}),
    );
    let user_jwt = jwt(
        &account,
        &user.public_key(),
        "test-user",
        json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
               "type": "user", "version": 2}),
    );
    let creds = dir.join("user.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().unwrap()
        ),
    )
    .unwrap();
    // JetStream needs the server's system account.
    let system = nkeys::KeyPair::new_account();
    let system_jwt = jwt(
        &operator,
        &system.public_key(),
        "SYS",
        json!({"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
               "wildcards": true, "conn": -1, "leaf": -1}, "type": "account", "version": 2}),
    );
    let config = format!(
        "operator: \"{operator_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
         resolver_preload: {{ {acc}: \"{account_jwt}\", {sys}: \"{system_jwt}\" }}\n",
        acc = account.public_key(),
        sys = system.public_key(),
    );
    (config, creds)
}

/// A server in operator mode (JWT authentication): both sides connect with a `.creds` file
/// (`--nats-creds`, `AHELPER_NATS_CREDS`); without it the connection is refused with a clear
/// error.
#[test]
fn a_creds_file_authenticates_with_a_jwt_server() {
    let dir = tempfile::tempdir().unwrap();
    let (config, creds) = operator_mode(dir.path());
    let server = NatsServer::with_config(&config, dir);
    let url = format!("nats://{}", server.address());
    let creds = creds.to_str().unwrap();
    one_subtask_over(
        &["--nats", &url, "--nats-creds", creds],
        &["--nats", &url],
        &[("AHELPER_NATS_CREDS", creds)],
    );
    let stderr = refused_worker(&url);
    assert!(
        stderr.contains(&format!("cannot connect to NATS at {url}")),
        "{stderr}"
    );
}
