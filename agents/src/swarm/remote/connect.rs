//! Connecting to NATS and setting up the JetStream objects both sides use: the work-queue stream
//! of subtasks with its durable workers' consumer, the stream of worker events and the heartbeat
//! KV bucket. Creating an object that exists with the same configuration is a no-op, so the
//! coordinator and every worker set them up on start and the first one wins.

use super::auth::SUBTASK_LIFETIME;
use super::wire::{EVENTS_STREAM, HEARTBEAT_BUCKET, WORK_STREAM, WORKERS_CONSUMER};
use async_nats::jetstream::{self, consumer, kv, stream};
use std::path::PathBuf;
use std::time::Duration;

/// How long a worker may hold a subtask without a sign of life before JetStream redelivers it
/// (a running worker reports progress every [`PROGRESS_EVERY`]).
pub const ACK_WAIT: Duration = Duration::from_secs(30);
/// How often a running worker tells JetStream it is still at work on a subtask.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long a heartbeat stays in the KV bucket: a machine silent this long is lost.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(15);
/// How often a worker machine writes its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(3);
/// Deliveries of one subtask before JetStream gives up on it.
pub const MAX_DELIVER: i64 = 10;

/// Where and how to connect: `--nats URL` (`nats://`, or `tls://` for TLS) and credentials.
#[derive(Debug, Clone, Default)]
pub struct NatsOptions {
    /// Server URL(s), comma-separated.
    pub url: String,
    /// A `.creds` file (JWT and NKey seed).
    pub creds_file: Option<PathBuf>,
    /// User and password.
    pub user_password: Option<(String, String)>,
    /// A PEM file of CA certificates to trust for `tls://`.
    pub ca_file: Option<PathBuf>,
    /// The connection's name in the server's monitoring.
    pub name: String,
    /// The coordinator's signing key (an nkey seed file, made on first use); `None` on a
    /// worker machine.
    pub signing_key: Option<PathBuf>,
    /// The prefix of this connection's reply subjects ([`COORDINATOR_INBOX`],
    /// [`WORKER_INBOX`]; `None`: the client's `_INBOX`), so that a server's permissions can
    /// keep each role from reading the other's replies (`deploy/nats-server.conf`).
    pub inbox_prefix: Option<String>,
}

/// The reply subjects of a coordinator: JetStream's answers and the deliveries of worker
/// events come there.
pub const COORDINATOR_INBOX: &str = "_INBOX_AHELPER_COORDINATOR";
/// The reply subjects of a worker machine: JetStream's answers, the deliveries of subtasks
/// and the coordinator's answers to its questions.
pub const WORKER_INBOX: &str = "_INBOX_AHELPER_WORKER";

/// Connecting or setting up JetStream failed.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// The server could not be reached or refused the credentials (`url` without passwords).
    #[error(
        "cannot connect to NATS at {url}: {message}; check that nats-server runs there with JetStream (`nats-server -js`) and the credentials"
    )]
    Connect {
        /// The URL.
        url: String,
        /// Cause.
        message: String,
    },
    /// The credentials file could not be read.
    #[error("cannot read the NATS credentials file {path}: {source}")]
    Creds {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A JetStream request (stream, consumer, KV, publish) failed.
    #[error(
        "NATS JetStream {action} failed: {message}; check that the server runs with JetStream enabled (`-js`)"
    )]
    JetStream {
        /// What was attempted.
        action: &'static str,
        /// Cause.
        message: String,
    },
}

impl NatsError {
    /// A JetStream failure of `action`.
    pub fn js(action: &'static str, error: impl std::fmt::Display) -> Self {
        NatsError::JetStream {
            action,
            message: error.to_string(),
        }
    }
}

/// The JetStream handles of one connection.
#[derive(Clone)]
pub struct Nats {
    /// The core client (reconnects by itself).
    pub client: async_nats::Client,
    /// JetStream on it.
    pub js: jetstream::Context,
}

/// Connects (retrying forever on reconnect, and on the first connect for up to 30 s).
///
/// # Errors
/// [`NatsError::Connect`], [`NatsError::Creds`].
pub async fn connect(options: &NatsOptions) -> Result<Nats, NatsError> {
    let mut connect = async_nats::ConnectOptions::new()
        .name(&options.name)
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(10));
    if let Some(prefix) = &options.inbox_prefix {
        connect = connect.custom_inbox_prefix(prefix);
    }
    if let Some(path) = &options.creds_file {
        connect = connect
            .credentials_file(path)
            .await
            .map_err(|source| NatsError::Creds {
                path: path.clone(),
                source,
            })?;
    }
    match (&options.user_password, &url_credentials(&options.url)) {
        (Some((user, password)), _) | (None, Some(UrlAuth::UserPassword(user, password))) => {
            connect = connect.user_and_password(user.clone(), password.clone());
        }
        (None, Some(UrlAuth::Token(token))) => connect = connect.token(token.clone()),
        (None, None) => {}
    }
    // Both of rustls' crypto providers are linked in (reqwest's and async-nats'), so the
    // process-wide default must be chosen before a `tls://` connection; a second call is a no-op.
    let _ = async_nats::rustls::crypto::ring::default_provider().install_default();
    if let Some(ca) = &options.ca_file {
        connect = connect.add_root_certificates(ca.clone());
    }
    let client = connect
        .connect(options.url.as_str())
        .await
        .map_err(|e| NatsError::Connect {
            url: redacted(&options.url),
            message: e.to_string(),
        })?;
    let js = jetstream::new(client.clone());
    Ok(Nats { client, js })
}

/// Credentials written in a server URL (`nats://user:password@host`, `nats://token@host`).
enum UrlAuth {
    UserPassword(String, String),
    Token(String),
}

/// The credentials of the first of the comma-separated `url`s that has some; the client does
/// not read them from the URL itself.
fn url_credentials(url: &str) -> Option<UrlAuth> {
    url.split(',').find_map(|one| {
        let addr: async_nats::ServerAddr = one.trim().parse().ok()?;
        let user = addr.username()?.to_string();
        Some(match addr.password() {
            Some(password) => UrlAuth::UserPassword(user, password.to_string()),
            None => UrlAuth::Token(user),
        })
    })
}

/// `url` (comma-separated server URLs) with each password replaced by `***`
/// (`nats://user:***@host:4222`), for messages and logs.
pub fn redacted(url: &str) -> String {
    url.split(',')
        .map(|one| {
            let Some((scheme, rest)) = one.split_once("://") else {
                return one.to_string();
            };
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let Some(at) = rest[..authority_end].rfind('@') else {
                return one.to_string();
            };
            match rest[..at].split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
                None => one.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl Nats {
    /// The stream of subtasks (work queue, on disk). Its duplicate window is a subtask's
    /// lifetime ([`SUBTASK_LIFETIME`]): a subtask's message id is its signed nonce, so the same
    /// subtask published again while it is valid is dropped.
    ///
    /// # Errors
    /// [`NatsError::JetStream`].
    pub async fn work_stream(&self) -> Result<stream::Stream, NatsError> {
        let config = stream::Config {
            retention: stream::RetentionPolicy::WorkQueue,
            duplicate_window: SUBTASK_LIFETIME,
            ..on_disk(WORK_STREAM, "ahelper.work.>")
        };
        self.stream(config, "creating the work stream").await
    }

    /// The stream of worker events (on disk, kept a day).
    ///
    /// # Errors
    /// [`NatsError::JetStream`].
    pub async fn events_stream(&self) -> Result<stream::Stream, NatsError> {
        let config = stream::Config {
            max_age: Duration::from_secs(24 * 3600),
            ..on_disk(EVENTS_STREAM, "ahelper.events.>")
        };
        self.stream(config, "creating the events stream").await
    }

    /// Creates the stream `config` (or finds it, set up the same way); `action` names the step
    /// in an error.
    async fn stream(
        &self,
        config: stream::Config,
        action: &'static str,
    ) -> Result<stream::Stream, NatsError> {
        self.js
            .get_or_create_stream(config)
            .await
            .map_err(|e| NatsError::js(action, e))
    }

    /// The durable consumer every worker pulls subtasks from.
    ///
    /// # Errors
    /// [`NatsError::JetStream`].
    pub async fn workers_consumer(&self) -> Result<consumer::PullConsumer, NatsError> {
        self.work_stream()
            .await?
            .get_or_create_consumer(
                WORKERS_CONSUMER,
                consumer::pull::Config {
                    durable_name: Some(WORKERS_CONSUMER.into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    max_deliver: MAX_DELIVER,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| NatsError::js("creating the workers' consumer", e))
    }

    /// The heartbeat bucket (entries expire after [`HEARTBEAT_TTL`]).
    ///
    /// # Errors
    /// [`NatsError::JetStream`].
    pub async fn heartbeats(&self) -> Result<kv::Store, NatsError> {
        if let Ok(store) = self.js.get_key_value(HEARTBEAT_BUCKET).await {
            return Ok(store);
        }
        // The bucket's stream in the KV layout (`KV_<bucket>`, subjects `$KV.<bucket>.>`, one
        // value per key), created directly: the client's `create_key_value` sends settings
        // nats-server 2.9 answers in a form the client does not parse.
        let config = stream::Config {
            name: format!("KV_{HEARTBEAT_BUCKET}"),
            subjects: vec![format!("$KV.{HEARTBEAT_BUCKET}.>")],
            max_messages_per_subject: 1,
            max_age: HEARTBEAT_TTL,
            storage: stream::StorageType::Memory,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            ..Default::default()
        };
        self.stream(config, "creating the heartbeat bucket").await?;
        self.js
            .get_key_value(HEARTBEAT_BUCKET)
            .await
            .map_err(|e| NatsError::js("opening the heartbeat bucket", e))
    }

    /// Publishes `payload` on `subject` and waits for JetStream's acknowledgement; `id` (the
    /// `Nats-Msg-Id`) makes a repeated publish within two minutes a no-op.
    ///
    /// # Errors
    /// [`NatsError::JetStream`].
    pub async fn publish(
        &self,
        subject: String,
        id: &str,
        payload: Vec<u8>,
    ) -> Result<(), NatsError> {
        let message = jetstream::message::PublishMessage::build()
            .payload(payload.into())
            .message_id(id);
        self.js
            .send_publish(subject, message)
            .await
            .map_err(|e| NatsError::js("publishing", e))?
            .await
            .map_err(|e| NatsError::js("publishing (acknowledgement)", e))?;
        Ok(())
    }
}

/// A stream on disk of the messages on `subjects`, a message id seen within two minutes
/// dropped as a repeat.
fn on_disk(name: &str, subjects: &str) -> stream::Config {
    stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        storage: stream::StorageType::File,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_in_urls_are_redacted() {
        for (url, shown) in [
            (
                "nats://u:pw@h:4222,tls://v:p@w@k:1/x",
                "nats://u:***@h:4222,tls://v:***@k:1/x",
            ),
            ("nats://token@h:4222", "nats://token@h:4222"),
            ("nats://h:4222", "nats://h:4222"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }
}
