//! Distributed swarms (issue 13), what a remote worker shares with a local one: permission
//! questions answered on the coordinator, the `machine` column and `machine lost`, and secured
//! NATS connections (user and password, TLS with a private CA). Real `nats-server -js` on
//! 127.0.0.1, `ahelper worker` processes and the coordinator through the built binary, against
//! the fake LLM server.

use super::support::nats::{NatsServer, WorkerProcess, bare_remote, wait_for};
use super::support::tmux::Tmux;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const COORDINATOR: &str = "You are the coordinator of a swarm";

/// A coordinator that plans one subtask per file of `files` (`s1`, `s2`, …).
fn plan(files: &[&str]) -> Script {
    let subtasks: Vec<Value> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let id = format!("s{}", i + 1);
            json!({"id": id, "title": format!("Work on {id}"), "instructions": format!("Do {id}."), "scope": [f]})
        })
        .collect();
    let plan = json!({"summary": "split by file", "subtasks": subtasks}).to_string();
    Script::new().with_conversation(
        Conversation::new()
            .matching(COORDINATOR)
            .turn(Turn::text(plan)),
    )
}

/// The worker of subtask `id`: runs `command`, then says it is done.
fn runs(id: &str, command: &str) -> Conversation {
    Conversation::new()
        .named(id)
        .matching(format!("Your subtask `{id}`"))
        .turn(Turn::tool_call("run_command", json!({"command": command})))
        .turn(Turn::text(format!("{id} done")))
}

/// The worker of subtask `id`: writes `file`, waits `slow_ms` in its second turn, says done.
fn writes_slowly(id: &str, file: &str, slow_ms: u64) -> Conversation {
    Conversation::new()
        .named(id)
        .matching(format!("Your subtask `{id}`"))
        .turn(Turn::tool_call(
            "write_file",
            json!({"path": file, "content": format!("{id} was here\n")}),
        ))
        .turn(Turn::text(format!("{id} done")).with_delay_ms(slow_ms))
}

/// A repository with `files` and a bare clone as its remote `origin`.
fn repo_with_remote(files: &[(&str, &str)]) -> TestRepo {
    let repo = repo_with(files);
    bare_remote(&repo.path(), repo.root());
    repo
}

/// `ahelper worker --name NAME --concurrency 2 extra…` with its own HOME and work dir.
struct Worker {
    child: Child,
    dir: tempfile::TempDir,
}

impl Worker {
    fn start(model_url: &str, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Worker {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let log = std::fs::File::create(dir.path().join("worker.log")).unwrap();
        let child = Command::new(assert_cmd::cargo::cargo_bin("ahelper"))
            .args(["worker", "--name", name, "--concurrency", "2", "--work-dir"])
            .arg(dir.path().join("work"))
            .args(extra)
            .current_dir(&home)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"))
            .envs(super::support::git::GIT_ENV)
            .envs(env.iter().copied())
            .env("AHELPER_LOG", "debug")
            .env("ANTHROPIC_API_KEY", "sk-test-secret-key-123")
            .env("ANTHROPIC_BASE_URL", model_url)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("ahelper worker starts");
        Worker { child, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("worker.log")).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A remote worker's question in a run whose coordinator has no terminal is denied at once,
/// exactly as a local worker's: the refusal is reported with the rule that would allow it; the
/// run's table and `swarm status` name the machine that ran the worker.
#[test]
fn a_remote_question_is_denied_at_once_without_a_terminal_and_the_table_names_the_machine() {
    let nats = NatsServer::start();
    let repo = repo_with_remote(&[("a.txt", "a\n")]);
    let server = start(plan(&["a.txt"]).with_conversation(runs("s1", "cargo test --quiet")));
    let worker = Worker::start(
        &server.base_url(),
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
    let script = plan(&["a.txt", "b.txt"])
        .with_conversation(runs("s1", "sed -i s/a/A/ a.txt"))
        .with_conversation(runs("s2", "sed -i s/b/B/ b.txt"));
    let server = start(script);
    let worker = Worker::start(
        &server.base_url(),
        "m1",
        &["--nats", &nats.url(), "--permission-mode", "accept-edits"],
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
    let server = start(plan(&["a.txt"]).with_conversation(writes_slowly("s1", "a.txt", 120_000)));
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

/// A `nats-server -js` started from a configuration file (`listen` and `jetstream` are added).
struct ConfiguredNats {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl ConfiguredNats {
    fn start(config: &str, dir: tempfile::TempDir) -> ConfiguredNats {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let store = dir.path().join("js");
        let text = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n{config}\n",
            store.display()
        );
        let file = dir.path().join("server.conf");
        std::fs::write(&file, text).unwrap();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nats-server runs");
        let mut server = ConfiguredNats { child, port, dir };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = server.child.try_wait().unwrap().is_some();
            if exited || std::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(server.dir.path().join("server.log"));
                panic!("nats-server did not listen:\n{}", log.unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for ConfiguredNats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One subtask (`s1` writes `a.txt`) run over `coordinator_args`' server by a worker started
/// with `worker_args`/`worker_env`; asserts it merged.
fn one_subtask_over(coordinator_args: &[&str], worker_args: &[&str], worker_env: &[(&str, &str)]) {
    let repo = repo_with_remote(&[("a.txt", "a\n")]);
    let server = start(plan(&["a.txt"]).with_conversation(writes_slowly("s1", "a.txt", 0)));
    let mut args = vec!["--permission-mode", "bypass"];
    args.extend_from_slice(worker_args);
    let worker = Worker::start(&server.base_url(), "secure-1", &args, worker_env);
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
    let server = ConfiguredNats::start(
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let model = start(Script::new());
    let wrong = format!("nats://ahelper:wrong-pw@{address}");
    let out = ahelper(&repo, &model, Wire::Anthropic)
        .args(["worker", "--nats", &wrong, "--name", "w"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
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
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
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
    let server = ConfiguredNats::start(
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let model = start(Script::new());
    let out = ahelper(&repo, &model, Wire::Anthropic)
        .args(["worker", "--nats", &url, "--name", "w"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot connect to NATS at {url}")),
        "{stderr}\n{}",
        std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default()
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
    let server = ConfiguredNats::start(&config, dir);
    let url = format!("nats://{}", server.address());
    let creds = creds.to_str().unwrap();
    one_subtask_over(
        &["--nats", &url, "--nats-creds", creds],
        &["--nats", &url],
        &[("AHELPER_NATS_CREDS", creds)],
    );
    let repo = repo_with(&[("a.txt", "a\n")]);
    let model = start(Script::new());
    let out = ahelper(&repo, &model, Wire::Anthropic)
        .args(["worker", "--nats", &url, "--name", "w"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot connect to NATS at {url}")),
        "{stderr}"
    );
}
