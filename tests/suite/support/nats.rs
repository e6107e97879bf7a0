//! A real `nats-server -js` on 127.0.0.1 for the distributed-swarm tests (Debian's
//! `nats-server` package; `.ci/run` installs it), and `ahelper worker` processes. Both are
//! stopped by PID when their guard drops.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The signing key every coordinator of the tests uses (`AHELPER_NATS_SIGNING_KEY`, test data:
/// a seed made for the tests only).
pub const COORDINATOR_KEY_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/nats-coordinator.nk"
);
/// Its public key, which the tests' worker machines trust.
pub const COORDINATOR_KEY: &str = "UAWXANW4VWPAOTF5YIAW3BQITPKSHWTSYSYHFMLAVDP6FVNVHP4AYZA5";

/// The repositories the tests' worker machines allow by default: everything under the temp
/// dir, where the tests' bare remotes are.
pub fn temp_repos() -> String {
    format!(
        "{}/",
        std::env::temp_dir()
            .display()
            .to_string()
            .trim_end_matches('/')
    )
}

/// A JetStream server on a free port of 127.0.0.1, storing (and logging) in its own temp dir.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// The configuration file it runs with (`-c`), if it was started with one.
    config: Option<PathBuf>,
}

impl NatsServer {
    /// Starts one and waits until it accepts connections.
    pub fn start() -> NatsServer {
        NatsServer::launch(tempfile::tempdir().unwrap(), free_port(), None)
    }

    /// Starts one from a configuration file, written in `dir`, that holds `config` (users, TLS,
    /// operator mode…) after the `listen` address and `jetstream` store it adds; waits until it
    /// accepts connections.
    pub fn with_config(config: &str, dir: tempfile::TempDir) -> NatsServer {
        let port = free_port();
        let text = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n{config}\n",
            dir.path().join("js").display()
        );
        let file = dir.path().join("server.conf");
        std::fs::write(&file, text).unwrap();
        NatsServer::launch(dir, port, Some(file))
    }

    fn launch(dir: tempfile::TempDir, port: u16, config: Option<PathBuf>) -> NatsServer {
        let mut server = NatsServer {
            child: None,
            port,
            dir,
            config,
        };
        server.spawn();
        server
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://{}", self.address())
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("server.log"))
            .unwrap();
        let mut command = Command::new("nats-server");
        match &self.config {
            Some(file) => command.arg("-c").arg(file),
            None => command
                .args([
                    "-js",
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-sd",
                ])
                .arg(self.dir.path().join("js")),
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nats-server runs (apt-get install nats-server; .ci/run installs it)");
        let child = self.child.insert(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            let exited = child.try_wait().unwrap().is_some();
            if exited || Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("server.log"));
                panic!("nats-server did not listen:\n{}", log.unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server with SIGTERM (a clean shutdown that keeps its store), waits for it to
    /// exit, and starts it again on the same port with the same store.
    pub fn restart(&mut self) {
        self.restart_after(Duration::ZERO);
    }

    /// [`Self::restart`] with `gap` between the old server's exit and the new one's start (an
    /// outage clients see as refused connections).
    pub fn restart_after(&mut self, gap: Duration) {
        let mut child = self.child.take().expect("the server runs");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        child.wait().unwrap();
        std::thread::sleep(gap);
        self.spawn();
    }

    /// What the server logged (all its runs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// An `ahelper worker` process with its own HOME and work dir; SIGKILLed on drop if still
/// running.
pub struct WorkerProcess {
    child: Child,
    /// Its home (config, state) and work dir live here.
    pub dir: tempfile::TempDir,
}

impl WorkerProcess {
    /// Starts `ahelper worker --nats <url> --name <name>` talking to `model_url` (Anthropic
    /// wire format), permission mode bypass.
    pub fn start(nats_url: &str, name: &str, model_url: &str, concurrency: usize) -> WorkerProcess {
        let concurrency = concurrency.to_string();
        let args = [
            "--nats",
            nats_url,
            "--permission-mode",
            "bypass",
            "--concurrency",
            &concurrency,
        ];
        WorkerProcess::start_with(model_url, name, &args, &[])
    }

    /// Starts `ahelper worker --name <name> --work-dir <its own> args…` talking to `model_url`
    /// (Anthropic wire format), with `env` added to its clean environment; it trusts
    /// [`COORDINATOR_KEY`] and allows [`temp_repos`] unless `args` say whom and what.
    pub fn start_with(
        model_url: &str,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> WorkerProcess {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let log = std::fs::File::create(dir.path().join("worker.log")).unwrap();
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("ahelper"));
        command
            .args(["worker", "--name", name, "--work-dir"])
            .arg(dir.path().join("work"))
            .args(args)
            .current_dir(&home);
        if !args.contains(&"--trust-coordinator") {
            command.args(["--trust-coordinator", COORDINATOR_KEY]);
        }
        if !args.contains(&"--allow-repo") {
            command.args(["--allow-repo", &temp_repos()]);
        }
        let child = super::clean_env(&mut command, &home)
            .envs(env.iter().copied())
            .env("ANTHROPIC_API_KEY", "sk-test-secret-key-123")
            .env("ANTHROPIC_BASE_URL", model_url)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("ahelper worker starts");
        WorkerProcess { child, dir }
    }

    /// What it printed, then its log file (`AHELPER_LOG=debug`).
    pub fn log(&self) -> String {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let printed = read(self.dir.path().join("worker.log"));
        let logged = read(self.dir.path().join("home/state/ahelper/logs/ahelper.log"));
        format!("{printed}\n--- log file:\n{logged}")
    }

    /// The last `lines` lines of [`Self::log`]: for failure messages that must still show what
    /// follows them when a test runner's output is cut to its tail.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `timeout` for it to exit; its exit code (`None`: killed by a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "worker did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A repository with `files` committed ([`super::repo_with`]) and a bare clone beside it as its
/// remote `origin` ([`bare_remote`]).
pub fn repo_with_remote(files: &[(&str, &str)]) -> super::TestRepo {
    let repo = super::repo_with(files);
    bare_remote(&repo.path(), repo.root());
    repo
}

/// A bare clone of `repo` at `<dir>/remote.git`, added to `repo` as its remote `origin`.
pub fn bare_remote(repo: &Path, dir: &Path) -> PathBuf {
    let remote = dir.join("remote.git");
    super::git::git(
        dir,
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    super::git::git(repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    remote
}

/// The test's own NATS client (the same `async-nats` connection ahelper uses): it publishes
/// what a forged or duplicated message would look like and reads the JetStream state.
pub struct NatsClient {
    rt: tokio::runtime::Runtime,
    nats: ahelper_agents::swarm::remote::Nats,
    captured: std::sync::Arc<std::sync::Mutex<Vec<Captured>>>,
}

/// A message seen on a captured subject: (subject, payload).
type Captured = (String, Vec<u8>);

impl NatsClient {
    /// Connects to `url`.
    pub fn connect(url: &str) -> NatsClient {
        NatsClient::connect_with(ahelper_agents::swarm::remote::NatsOptions {
            url: url.to_string(),
            name: "test client".into(),
            ..Default::default()
        })
    }

    /// Connects with `options` (credentials, a CA).
    pub fn connect_with(options: ahelper_agents::swarm::remote::NatsOptions) -> NatsClient {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let nats = rt
            .block_on(ahelper_agents::swarm::remote::connect(&options))
            .expect("the test connects to nats-server");
        NatsClient {
            rt,
            nats,
            captured: Default::default(),
        }
    }

    /// Keeps a copy of every message published on `subject` (a core subscription, beside the
    /// JetStream streams) from now on; read them with [`NatsClient::captured`].
    pub fn capture(&self, subject: &str) {
        let client = self.nats.client.clone();
        let subject = subject.to_string();
        let captured = self.captured.clone();
        let mut sub = self
            .rt
            .block_on(client.subscribe(subject))
            .expect("subscribing");
        self.rt.block_on(client.flush()).unwrap();
        self.rt.spawn(async move {
            use futures::StreamExt;
            while let Some(message) = sub.next().await {
                let entry = (message.subject.to_string(), message.payload.to_vec());
                captured.lock().unwrap().push(entry);
            }
        });
    }

    /// Answers every permission question published on `ahelper.ask.>` from now on, as an
    /// attacker who sees the questions would: each payload `forge(reply subject, question)`
    /// makes is published to the question's reply subject. Returns the number of questions
    /// answered so far.
    pub fn forge_answers(
        &self,
        forge: impl Fn(&str, &[u8]) -> Vec<Vec<u8>> + Send + 'static,
    ) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
        let client = self.nats.client.clone();
        let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = answered.clone();
        let mut sub = self
            .rt
            .block_on(client.subscribe("ahelper.ask.>"))
            .expect("subscribing");
        self.rt.block_on(client.flush()).unwrap();
        self.rt.spawn(async move {
            use futures::StreamExt;
            while let Some(question) = sub.next().await {
                let Some(reply) = question.reply.clone() else {
                    continue;
                };
                for payload in forge(&reply, &question.payload) {
                    let _ = client.publish(reply.clone(), payload.into()).await;
                }
                let _ = client.flush().await;
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        answered
    }

    /// Publishes `payload` on `subject` into JetStream with the message id `id`; whether the
    /// stream stored it (`false`: dropped as a duplicate of a message with that id).
    pub fn publish_with_id(&self, subject: &str, id: &str, payload: &[u8]) -> bool {
        self.try_publish_with_id(subject, id, payload)
            .expect("JetStream stored or dropped the message")
    }

    /// [`NatsClient::publish_with_id`]; the error when JetStream does not acknowledge it (a
    /// subject the user may not publish to is never stored).
    pub fn try_publish_with_id(
        &self,
        subject: &str,
        id: &str,
        payload: &[u8],
    ) -> Result<bool, String> {
        self.rt.block_on(async {
            let message = async_nats::jetstream::message::PublishMessage::build()
                .payload(payload.to_vec().into())
                .message_id(id);
            let ack = self
                .nats
                .js
                .send_publish(subject.to_string(), message)
                .await
                .map_err(|e| e.to_string())?;
            let ack = tokio::time::timeout(Duration::from_secs(5), ack)
                .await
                .map_err(|_| "no acknowledgement within 5 s".to_string())?
                .map_err(|e| e.to_string())?;
            Ok(!ack.duplicate)
        })
    }

    /// The captured messages whose subject is `subject`.
    pub fn captured(&self, subject: &str) -> Vec<Vec<u8>> {
        let captured = self.captured.lock().unwrap();
        captured
            .iter()
            .filter(|(s, _)| s == subject)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Publishes `payload` on `subject` into JetStream (a fresh message id, so it is never
    /// taken for a duplicate by the stream).
    pub fn publish(&self, subject: &str, payload: &[u8]) {
        let id = format!("test-{}", uuid::Uuid::now_v7());
        self.rt
            .block_on(
                self.nats
                    .publish(subject.to_string(), &id, payload.to_vec()),
            )
            .expect("publishing into JetStream");
    }

    /// The payload of the last message on `subject` in `stream`, if it holds one.
    pub fn last_message(&self, stream: &str, subject: &str) -> Option<Vec<u8>> {
        self.rt.block_on(async {
            let stream = self.nats.js.get_stream(stream).await.ok()?;
            let message = stream.get_last_raw_message_by_subject(subject).await.ok()?;
            Some(message.payload.to_vec())
        })
    }

    /// The names of the consumers of `stream`.
    pub fn consumers(&self, stream: &str) -> Vec<String> {
        self.rt.block_on(async {
            use futures::StreamExt;
            let Ok(stream) = self.nats.js.get_stream(stream).await else {
                return Vec::new();
            };
            let names: Vec<_> = stream.consumer_names().collect().await;
            names.into_iter().filter_map(Result::ok).collect()
        })
    }
}
