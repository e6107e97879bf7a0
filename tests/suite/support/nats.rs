//! A real `nats-server -js` on 127.0.0.1 for the distributed-swarm tests (Debian's
//! `nats-server` package; `.ci/run` installs it), and `ahelper worker` processes. Both are
//! stopped by PID when their guard drops.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A JetStream server on a free port of 127.0.0.1, storing in its own temp dir.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    store: tempfile::TempDir,
}

impl NatsServer {
    /// Starts one and waits until it accepts connections.
    pub fn start() -> NatsServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = NatsServer {
            child: None,
            port,
            store: tempfile::tempdir().unwrap(),
        };
        server.spawn();
        server
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.store.path().join("server.log"))
            .unwrap();
        let child = Command::new("nats-server")
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.store.path().join("js"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nats-server runs (apt-get install nats-server; .ci/run installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server with SIGTERM (a clean shutdown that keeps its store), waits for it to
    /// exit, and starts it again on the same port with the same store.
    pub fn restart(&mut self) {
        let mut child = self.child.take().expect("the server runs");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        child.wait().unwrap();
        self.spawn();
    }

    /// What the server logged (all its runs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.store.path().join("server.log")).unwrap_or_default()
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
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let log = std::fs::File::create(dir.path().join("worker.log")).unwrap();
        let child = Command::new(assert_cmd::cargo::cargo_bin("ahelper"))
            .args([
                "worker",
                "--nats",
                nats_url,
                "--name",
                name,
                "--permission-mode",
                "bypass",
            ])
            .args(["--concurrency", &concurrency.to_string(), "--work-dir"])
            .arg(dir.path().join("work"))
            .current_dir(&home)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"))
            .envs(super::git::GIT_ENV)
            .env("AHELPER_LOG", "debug")
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

/// Waits up to `timeout` for `condition`.
pub fn wait_for(what: &str, timeout: Duration, condition: impl FnMut() -> bool) {
    wait_for_or_show(what, timeout, condition, String::new);
}

/// Waits up to `timeout` for `condition`; on timeout the panic shows `context()` (logs).
pub fn wait_for_or_show(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let options = ahelper_agents::swarm::remote::NatsOptions {
            url: url.to_string(),
            name: "test client".into(),
            ..Default::default()
        };
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
