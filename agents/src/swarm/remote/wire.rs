//! The messages between a coordinator and remote workers, as JSON on NATS subjects, and their
//! validation. Everything that arrives from the queue is input from another machine: ids are
//! checked against their formats, refs are derived from checked ids (always under
//! `refs/ahelper/` or `refs/heads/ahelper/`), the index a worker reports is ignored in favour of
//! the one the coordinator gave its worker id.
//!
//! Subjects: `ahelper.work.<run>.<worker>` (subtasks, stream [`WORK_STREAM`], a work queue),
//! `ahelper.events.<run>.<worker>` (events, stream [`EVENTS_STREAM`]). Each message carries
//! [`WIRE_VERSION`]; a message of another version is refused, not guessed at.
//!
//! What a coordinator sends — subtasks, run announcements, cancels ([`ControlMessage`]) and
//! permission answers — is signed ([`super::auth`]): a worker machine opens it with the keys
//! it trusts ([`SubtaskMessage::open`], …) before it reads a field.

use super::super::coordinator::Progress;
use super::super::plan::Subtask;
use super::super::roles::RoleDefinition;
use super::super::state::{WorkerReport, WorkerStatus};
use super::auth::{AuthError, Freshness, SHORT_LIFETIME, SUBTASK_LIFETIME, TrustedKeys};
use serde::{Deserialize, Serialize};

/// Version of every message below; bumped on any incompatible change.
pub const WIRE_VERSION: u32 = 2;
/// The JetStream stream of subtasks (work-queue retention: a message is gone once acked).
pub const WORK_STREAM: &str = "AHELPER_WORK";
/// The JetStream stream of worker events (kept a day, so a coordinator that reconnects or
/// resumes reads what it missed).
pub const EVENTS_STREAM: &str = "AHELPER_EVENTS";
/// The durable pull consumer every `ahelper worker` pulls subtasks from.
pub const WORKERS_CONSUMER: &str = "ahelper-workers";
/// The KV bucket of worker heartbeats (key: machine name; entries expire after the TTL).
pub const HEARTBEAT_BUCKET: &str = "ahelper_machines";

/// The subject of worker `worker`'s subtask in run `run`.
pub fn work_subject(run: &str, worker: &str) -> String {
    format!("ahelper.work.{run}.{worker}")
}

/// The subject of worker `worker`'s events in run `run`.
pub fn events_subject(run: &str, worker: &str) -> String {
    format!("ahelper.events.{run}.{worker}")
}

/// The remote ref the run's base commit is pushed to.
pub fn base_ref(run: &str) -> String {
    format!("refs/ahelper/{run}/base")
}

/// The remote ref worker `worker`'s start commit is pushed to (the integration branch as it was
/// when the worker started: base plus merged dependencies).
pub fn start_ref(run: &str, worker: &str) -> String {
    format!("refs/ahelper/{run}/start/{worker}")
}

/// The branch a remote worker pushes its commits to (also its `wip` when handed back).
pub fn worker_branch(run: &str, worker: &str) -> String {
    format!("ahelper/{run}/{worker}")
}

/// The subject of run `run`'s announcement ([`RunAnnouncement`]).
pub fn run_subject(run: &str) -> String {
    format!("ahelper.runs.{run}")
}

/// The subjects of every run's announcement, which worker machines listen to.
pub const RUN_SUBJECTS: &str = "ahelper.runs.*";

/// A run whose subtasks are coming, sent (core NATS, not stored) once its base commit is on the
/// remote, while the coordinator still plans: a worker machine that hears it makes or fetches
/// its clone of `repo_url` ahead of the first subtask. A machine that misses it does that on
/// its first subtask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAnnouncement {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// Run id (a UUID).
    pub run_id: String,
    /// URL of the git remote both sides reach.
    pub repo_url: String,
    /// The run's base commit (40 hex), at [`base_ref`] on the remote.
    pub base_commit: String,
    /// Nonce and expiry.
    #[serde(flatten)]
    pub fresh: Freshness,
}

impl RunAnnouncement {
    /// Opens a signed announcement ([`TrustedKeys::open`]) and validates it.
    ///
    /// # Errors
    /// [`WireError::Auth`] and those of [`RunAnnouncement::parse`].
    pub fn open(trusted: &TrustedKeys, subject: &str, payload: &[u8]) -> Result<Self, WireError> {
        let body = trusted.open(subject, payload)?;
        RunAnnouncement::parse(subject, body.as_bytes())
    }

    /// Parses and validates an announcement that arrived on `subject`.
    ///
    /// # Errors
    /// [`WireError`]: malformed JSON, another version, a bad run id, a subject that
    /// disagrees, a base commit that is not a full object id, a refused repository URL.
    pub fn parse(subject: &str, payload: &[u8]) -> Result<Self, WireError> {
        let msg: RunAnnouncement = decode(payload)?;
        msg.fresh.check(SHORT_LIFETIME)?;
        (msg.version == WIRE_VERSION)
            .then_some(())
            .ok_or(WireError::Version { found: msg.version })?;
        check_run_id(&msg.run_id)?;
        if subject != run_subject(&msg.run_id) {
            return Err(WireError::SubjectMismatch {
                subject: crate::text::clip(subject, 120).0.to_string(),
                run_id: msg.run_id.clone(),
                worker_id: String::new(),
            });
        }
        check_commit("base commit", &msg.base_commit)?;
        check_repo_url(&msg.repo_url)?;
        Ok(msg)
    }
}

/// Checks a full object id: 40 hex digits.
fn check_commit(what: &'static str, commit: &str) -> Result<(), WireError> {
    let hex = commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then_some(())
        .ok_or_else(|| invalid(what, commit, "40 hex digits"))
}

/// One subtask for a remote worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubtaskMessage {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// Run id (a UUID).
    pub run_id: String,
    /// Worker id (`w1`, …).
    pub worker_id: String,
    /// URL of the git remote both sides reach.
    pub repo_url: String,
    /// The commit the worker starts from (40 hex): on the remote at [`start_ref`], or, when it
    /// was there already, at [`base_ref`] or a worker's branch of the run.
    pub start_commit: String,
    /// The subtask.
    pub subtask: Subtask,
    /// The whole swarm's task (context for the worker's prompt).
    pub task: String,
    /// The run's worker role (tools, turn cap, instructions).
    pub role: RoleDefinition,
    /// The coordinator answers permission questions (it has a terminal): the worker asks it
    /// ([`super::ask`]) instead of denying at once. Absent in older messages: `false`.
    #[serde(default)]
    pub ask_coordinator: bool,
    /// The worker's first attempt in the run: no machine can have pushed its branch yet, so
    /// on the message's first delivery the machine does not look for a `wip` (and needs no
    /// fetch when it has the start commit). Absent in older messages: `false`.
    #[serde(default)]
    pub first_attempt: bool,
    /// Nonce (also the message's JetStream message id) and expiry.
    #[serde(flatten)]
    pub fresh: Freshness,
}

/// The coordinator's cancel of one running subtask, on `ahelper.control.<run>.<worker>`
/// ([`control_subject`]), signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlMessage {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// Run id.
    pub run_id: String,
    /// Worker id.
    pub worker_id: String,
    /// The nonce of the subtask message it cancels (a cancel of an earlier attempt does not
    /// cancel a later one).
    pub subtask_nonce: String,
    /// Nonce and expiry of the cancel itself.
    #[serde(flatten)]
    pub fresh: Freshness,
}

/// The subject of worker `worker`'s cancel in run `run`.
pub fn control_subject(run: &str, worker: &str) -> String {
    format!("ahelper.control.{run}.{worker}")
}

impl ControlMessage {
    /// Opens and validates a signed cancel that arrived on `subject`.
    ///
    /// # Errors
    /// [`WireError`]: unsigned or untrusted ([`WireError::Auth`]), malformed, another version,
    /// bad ids, a subject that disagrees, expired.
    pub fn open(trusted: &TrustedKeys, subject: &str, payload: &[u8]) -> Result<Self, WireError> {
        let body = trusted.open(subject, payload)?;
        let msg: ControlMessage = decode(body.as_bytes())?;
        check_envelope(msg.version, &msg.run_id, &msg.worker_id)?;
        check_subject(subject, control_subject, &msg.run_id, &msg.worker_id)?;
        msg.fresh.check(SHORT_LIFETIME)?;
        Ok(msg)
    }
}

/// What a remote worker tells the coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventMessage {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// Run id.
    pub run_id: String,
    /// Worker id.
    pub worker_id: String,
    /// The machine running it (`--name`).
    pub machine: String,
    /// What happened.
    pub body: EventBody,
}

/// The kinds of [`EventMessage`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// A machine took the subtask.
    Accepted,
    /// Progress of the worker's loop (its `index` is ignored by the coordinator).
    Progress {
        /// The progress.
        progress: Progress,
    },
    /// New lines of the worker's transcript (each one JSON object), in order.
    Transcript {
        /// Number of lines sent before these (so a repeated batch is written once).
        from_line: u64,
        /// The lines, without newlines.
        lines: Vec<String>,
    },
    /// The worker ended; its branch is pushed when `report.commit` is set.
    Done {
        /// Its final state (`finished`, `no_changes`, `failed`, `cancelled`).
        status: WorkerStatus,
        /// Its report.
        report: WorkerReport,
    },
    /// The worker was stopped (SIGTERM) and handed the subtask back to the queue, its `wip`
    /// pushed when it had one.
    Released,
}

/// A message from the queue was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// Not JSON of the expected shape.
    #[error("malformed message: {0}; it was not sent by a matching ahelper version")]
    Malformed(String),
    /// Another wire version.
    #[error(
        "message version {found}, this ahelper speaks version {WIRE_VERSION}; run the same ahelper version on the coordinator and the workers"
    )]
    Version {
        /// The version it carried.
        found: u32,
    },
    /// An id has the wrong format.
    #[error("invalid {what} `{value}`: {expected}")]
    InvalidId {
        /// Which id.
        what: &'static str,
        /// Its value (cut to 80 characters).
        value: String,
        /// The format it must have.
        expected: &'static str,
    },
    /// The message's subject disagrees with its ids.
    #[error("message on `{subject}` names run {run_id} worker {worker_id}")]
    SubjectMismatch {
        /// The subject.
        subject: String,
        /// Run id in the message.
        run_id: String,
        /// Worker id in the message.
        worker_id: String,
    },
    /// Not signed by a trusted coordinator, expired or replayed.
    #[error("{0}")]
    Auth(#[from] AuthError),
}

impl WireError {
    /// Whether the message is signed by a key this machine does not trust (it may be another
    /// coordinator's, for a machine that trusts it: handed back, not terminated).
    pub fn is_untrusted_key(&self) -> bool {
        matches!(self, WireError::Auth(AuthError::UntrustedKey { .. }))
    }
}

/// Checks a run id: a UUID in its hyphenated form.
///
/// # Errors
/// [`WireError::InvalidId`].
pub fn check_run_id(id: &str) -> Result<(), WireError> {
    let ok = id.len() == 36 && uuid::Uuid::try_parse(id).is_ok_and(|u| u.to_string() == id);
    ok.then_some(())
        .ok_or_else(|| invalid("run id", id, "a UUID"))
}

/// Checks a worker id: `w` and 1 to 4 digits, no leading zero.
///
/// # Errors
/// [`WireError::InvalidId`].
pub fn check_worker_id(id: &str) -> Result<(), WireError> {
    let digits = id.strip_prefix('w').unwrap_or("");
    let ok = (1..=4).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    ok.then_some(())
        .ok_or_else(|| invalid("worker id", id, "`w` followed by a number"))
}

/// Checks a machine name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `.`.
///
/// # Errors
/// [`WireError::InvalidId`].
pub fn check_machine(name: &str) -> Result<(), WireError> {
    let ok = (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then_some(())
        .ok_or_else(|| invalid("machine name", name, "1-64 of A-Z a-z 0-9 . _ -"))
}

/// Checks a repository URL from the queue before `git clone`/`fetch`/`push` see it: not
/// empty, at most 2,048 bytes, no control characters, not starting with `-` (read as an
/// option) and no `<transport>::` prefix (git's remote-helper syntax, e.g. `ext::<command>`,
/// which runs a program). URLs (`https://`, `ssh://`, `file://`), scp-like `host:path` and
/// plain paths pass.
///
/// # Errors
/// [`WireError::InvalidId`].
pub fn check_repo_url(url: &str) -> Result<(), WireError> {
    let helper = url
        .split_once("::")
        .is_some_and(|(transport, _)| !transport.contains('/') && !transport.contains(':'));
    let ok = !url.is_empty()
        && url.len() <= 2048
        && !url.starts_with('-')
        && !url.chars().any(char::is_control)
        && !helper;
    ok.then_some(()).ok_or_else(|| {
        invalid(
            "repository URL",
            url,
            "a git URL or path (no option, no `transport::` helper, no control characters)",
        )
    })
}

fn invalid(what: &'static str, value: &str, expected: &'static str) -> WireError {
    WireError::InvalidId {
        what,
        value: crate::text::clip(value, 80).0.to_string(),
        expected,
    }
}

/// Reads a message's JSON.
fn decode<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(payload).map_err(|e| WireError::Malformed(e.to_string()))
}

/// Checks what every message carries: its version, then its run and worker ids.
fn check_envelope(version: u32, run: &str, worker: &str) -> Result<(), WireError> {
    (version == WIRE_VERSION)
        .then_some(())
        .ok_or(WireError::Version { found: version })?;
    check_run_id(run)?;
    check_worker_id(worker)
}

/// Checks that a message arrived on the subject (`work_subject`, `events_subject`) of its ids.
fn check_subject(
    subject: &str,
    subject_of: fn(&str, &str) -> String,
    run: &str,
    worker: &str,
) -> Result<(), WireError> {
    (subject == subject_of(run, worker))
        .then_some(())
        .ok_or_else(|| WireError::SubjectMismatch {
            subject: crate::text::clip(subject, 120).0.to_string(),
            run_id: run.to_string(),
            worker_id: worker.to_string(),
        })
}

impl SubtaskMessage {
    /// Parses and validates a subtask that arrived on `subject`.
    ///
    /// # Errors
    /// [`WireError`]: malformed JSON, another version, a bad id, a subject that disagrees, a
    /// start commit that is not a full object id.
    pub fn parse(subject: &str, payload: &[u8]) -> Result<Self, WireError> {
        let msg: SubtaskMessage = decode(payload)?;
        check_envelope(msg.version, &msg.run_id, &msg.worker_id)?;
        check_subject(subject, work_subject, &msg.run_id, &msg.worker_id)?;
        check_commit("start commit", &msg.start_commit)?;
        check_repo_url(&msg.repo_url)?;
        msg.fresh.check(SUBTASK_LIFETIME)?;
        Ok(msg)
    }

    /// Opens a signed subtask that arrived on `subject` with JetStream message id `msg_id`
    /// (`Nats-Msg-Id`), then validates it ([`SubtaskMessage::parse`]): the message id must be
    /// the signed nonce, so the same message published again under another id is a replay.
    ///
    /// # Errors
    /// [`WireError::Auth`] (unsigned, untrusted key, bad signature, expired, replayed), and
    /// those of [`SubtaskMessage::parse`].
    pub fn open(
        trusted: &TrustedKeys,
        subject: &str,
        payload: &[u8],
        msg_id: Option<&str>,
    ) -> Result<Self, WireError> {
        let body = trusted.open(subject, payload)?;
        let msg = SubtaskMessage::parse(subject, body.as_bytes())?;
        if msg_id != Some(msg.fresh.nonce.as_str()) {
            return Err(AuthError::Replayed.into());
        }
        Ok(msg)
    }
}

impl EventMessage {
    /// Parses and validates an event that arrived on `subject`.
    ///
    /// # Errors
    /// [`WireError`]: malformed JSON, another version, a bad id or machine name, a subject
    /// that disagrees.
    pub fn parse(subject: &str, payload: &[u8]) -> Result<Self, WireError> {
        let msg: EventMessage = decode(payload)?;
        check_envelope(msg.version, &msg.run_id, &msg.worker_id)?;
        check_machine(&msg.machine)?;
        check_subject(subject, events_subject, &msg.run_id, &msg.worker_id)?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "0190f2a4-6b1c-7cc3-a3f1-2b7d5e9c1a20";

    fn subtask() -> SubtaskMessage {
        SubtaskMessage {
            version: WIRE_VERSION,
            run_id: RUN.into(),
            worker_id: "w2".into(),
            repo_url: "/srv/git/project.git".into(),
            start_commit: "a".repeat(40),
            subtask: Subtask {
                id: "s2".into(),
                title: "t".into(),
                instructions: "i".into(),
                scope: vec!["b.txt".into()],
                depends_on: vec![],
            },
            task: "task".into(),
            role: RoleDefinition {
                name: "worker".into(),
                description: String::new(),
                tools: vec!["write_file".into()],
                max_turns: None,
                mcp_servers: Vec::new(),
                instructions: String::new(),
            },
            ask_coordinator: true,
            first_attempt: true,
            fresh: Freshness::new(SUBTASK_LIFETIME),
        }
    }

    fn parse(msg: &SubtaskMessage) -> Result<SubtaskMessage, WireError> {
        let subject = work_subject(&msg.run_id, &msg.worker_id);
        SubtaskMessage::parse(&subject, &serde_json::to_vec(msg).unwrap())
    }

    #[test]
    fn a_run_announcement_is_checked_like_a_subtask() {
        let valid = RunAnnouncement {
            version: WIRE_VERSION,
            run_id: RUN.into(),
            repo_url: "/srv/git/project.git".into(),
            base_commit: "b".repeat(40),
            fresh: Freshness::new(SHORT_LIFETIME),
        };
        let parse = |subject: &str, msg: &RunAnnouncement| {
            RunAnnouncement::parse(subject, &serde_json::to_vec(msg).unwrap())
        };
        assert_eq!(parse(&run_subject(RUN), &valid).unwrap(), valid);
        let other_run = run_subject("0190f2a4-6b1c-7cc3-a3f1-2b7d5e9c1a21");
        assert!(matches!(
            parse(&other_run, &valid),
            Err(WireError::SubjectMismatch { .. })
        ));
        let forged = [
            RunAnnouncement {
                repo_url: "ext::sh -c touch% /tmp/pwned".into(),
                ..valid.clone()
            },
            RunAnnouncement {
                base_commit: "HEAD".into(),
                ..valid.clone()
            },
            RunAnnouncement {
                version: WIRE_VERSION + 1,
                ..valid.clone()
            },
        ];
        for msg in forged {
            assert!(parse(&run_subject(RUN), &msg).is_err(), "{msg:?}");
        }
    }

    #[test]
    fn a_valid_subtask_round_trips() {
        let valid = subtask();
        assert_eq!(parse(&valid).unwrap(), valid);
    }

    #[test]
    fn a_subtask_opens_only_signed_by_a_trusted_key_under_its_nonce_as_message_id() {
        let dir = tempfile::tempdir().unwrap();
        let key = super::super::auth::SigningKey::load_or_create(&dir.path().join("k")).unwrap();
        let trusted = TrustedKeys::of(&key);
        let msg = subtask();
        let subject = work_subject(RUN, "w2");
        let signed = key.sign(&subject, serde_json::to_string(&msg).unwrap());
        let nonce = Some(msg.fresh.nonce.as_str());
        assert_eq!(
            SubtaskMessage::open(&trusted, &subject, &signed, nonce).unwrap(),
            msg
        );
        assert_eq!(
            SubtaskMessage::open(&trusted, &subject, &signed, Some("test-1")),
            Err(WireError::Auth(AuthError::Replayed))
        );
        let unsigned = serde_json::to_vec(&msg).unwrap();
        assert_eq!(
            SubtaskMessage::open(&trusted, &subject, &unsigned, nonce),
            Err(WireError::Auth(AuthError::Unsigned))
        );
        let expired = SubtaskMessage {
            fresh: Freshness {
                expires_at: 1,
                ..msg.fresh.clone()
            },
            ..msg.clone()
        };
        let signed = key.sign(&subject, serde_json::to_string(&expired).unwrap());
        assert!(matches!(
            SubtaskMessage::open(&trusted, &subject, &signed, nonce),
            Err(WireError::Auth(AuthError::Expired { .. }))
        ));
    }

    #[test]
    fn a_message_without_the_newer_fields_is_not_a_first_attempt() {
        let mut json = serde_json::to_value(subtask()).unwrap();
        let fields = json.as_object_mut().unwrap();
        fields.remove("ask_coordinator");
        fields.remove("first_attempt");
        let subject = work_subject(RUN, "w2");
        let msg = SubtaskMessage::parse(&subject, json.to_string().as_bytes()).unwrap();
        assert!(!msg.ask_coordinator);
        assert!(
            !msg.first_attempt,
            "an older coordinator's message may follow an attempt"
        );
    }

    #[test]
    fn forged_ids_are_refused() {
        for (run, worker) in [
            ("../../etc", "w1"),
            ("0190F2A4-6B1C-7CC3-A3F1-2B7D5E9C1A20", "w1"),
            (RUN, "w1/../../x"),
            (RUN, "w01"),
            (RUN, "main"),
            (RUN, "w"),
        ] {
            let mut msg = subtask();
            msg.run_id = run.into();
            msg.worker_id = worker.into();
            let subject = format!("ahelper.work.{RUN}.w1");
            let err = SubtaskMessage::parse(&subject, &serde_json::to_vec(&msg).unwrap());
            assert!(
                matches!(err, Err(WireError::InvalidId { .. })),
                "{run} {worker}: {err:?}"
            );
        }
    }

    #[test]
    fn a_subject_that_disagrees_another_version_and_a_bad_commit_are_refused() {
        let msg = subtask();
        let other = work_subject(RUN, "w3");
        let err = SubtaskMessage::parse(&other, &serde_json::to_vec(&msg).unwrap());
        assert!(
            matches!(err, Err(WireError::SubjectMismatch { .. })),
            "{err:?}"
        );
        let mut newer = subtask();
        newer.version = WIRE_VERSION + 1;
        assert_eq!(
            parse(&newer),
            Err(WireError::Version {
                found: WIRE_VERSION + 1
            })
        );
        let mut bad = subtask();
        bad.start_commit = "HEAD~1".into();
        assert!(matches!(
            parse(&bad),
            Err(WireError::InvalidId {
                what: "start commit",
                ..
            })
        ));
        let mut option = subtask();
        option.repo_url = "--upload-pack=touch /tmp/x".into();
        assert!(matches!(parse(&option), Err(WireError::InvalidId { .. })));
        let garbage = SubtaskMessage::parse(&work_subject(RUN, "w2"), b"{not json");
        assert!(matches!(garbage, Err(WireError::Malformed(_))));
    }

    #[test]
    fn repository_urls_that_run_programs_or_read_as_options_are_refused() {
        let refused = [
            "ext::sh -c touch% /tmp/pwned",
            "fd::17",
            "-uhttps://x",
            "https://host/repo.git\n--upload-pack=x",
            "",
        ];
        let accepted = [
            "https://forge.example/team/project.git",
            "ssh://git@forge.example/team/project.git",
            "git@forge.example:team/project.git",
            "file:///srv/git/project.git",
            "/srv/git/a::b/project.git",
        ];
        let cases = refused.map(|url| (url, false)).into_iter();
        for (url, ok) in cases.chain(accepted.map(|url| (url, true))) {
            let mut msg = subtask();
            msg.repo_url = url.into();
            let result = parse(&msg);
            let refused_as_url = matches!(
                result,
                Err(WireError::InvalidId {
                    what: "repository URL",
                    ..
                })
            );
            if ok {
                assert!(result.is_ok(), "{url:?}: {result:?}");
            } else {
                assert!(refused_as_url, "{url:?}: {result:?}");
            }
        }
    }

    #[test]
    fn refs_are_derived_from_checked_ids_under_ahelper() {
        assert_eq!(base_ref(RUN), format!("refs/ahelper/{RUN}/base"));
        assert_eq!(start_ref(RUN, "w2"), format!("refs/ahelper/{RUN}/start/w2"));
        assert_eq!(worker_branch(RUN, "w2"), format!("ahelper/{RUN}/w2"));
    }

    #[test]
    fn events_with_a_bad_machine_name_are_refused() {
        let event = EventMessage {
            version: WIRE_VERSION,
            run_id: RUN.into(),
            worker_id: "w1".into(),
            machine: "../evil".into(),
            body: EventBody::Accepted,
        };
        let subject = events_subject(RUN, "w1");
        let err = EventMessage::parse(&subject, &serde_json::to_vec(&event).unwrap());
        assert!(matches!(
            err,
            Err(WireError::InvalidId {
                what: "machine name",
                ..
            })
        ));
        let ok = EventMessage {
            machine: "build-01.lan".into(),
            ..event
        };
        assert!(EventMessage::parse(&subject, &serde_json::to_vec(&ok).unwrap()).is_ok());
    }
}
