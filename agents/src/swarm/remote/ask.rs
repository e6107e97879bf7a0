//! Permission questions of remote workers, answered on the coordinator's terminal.
//!
//! When the coordinator can ask its user (the live view), each subtask message says so
//! ([`super::wire::SubtaskMessage::ask_coordinator`]) and the worker machine's permission gate
//! asks through a [`RemotePrompter`]: the question becomes a NATS request on
//! `ahelper.ask.<run>.<worker>` ([`ask_subject`]), the coordinator's [`QuestionServer`] shows it
//! through the run's own prompter — exactly as a local worker's question, labelled
//! `<worker> · <subtask title>` from the coordinator's own record, never from the message — and
//! replies with the answer. `a` (always) and `d` (never) answers are stored on the coordinator
//! (the run's policy, and the rule text, so that a later question of any machine that would add
//! the same rule is answered without being shown) and on the asking machine (its gate remembers
//! the rule for that subtask).
//!
//! When the coordinator has no terminal, the flag is off and the worker's gate denies at once,
//! as for a local worker of such a run; the refusal is reported as a worker event.
//!
//! Messages: [`AskMessage`] (the request) and [`AnswerMessage`] (the reply), JSON, carrying
//! [`WIRE_VERSION`]; a request that does not validate, or names a worker the coordinator did
//! not start, is answered "no". The reply is signed with the coordinator's key
//! ([`super::auth`]) and names the question's nonce: the asking worker reads replies on its
//! own inbox until one is signed by a key it trusts for its run, worker and question — a reply
//! from anyone else (another client that saw the question) is logged and ignored, and after
//! the first valid answer the inbox is closed, so a second answer is never read.

use super::super::coordinator::CoordinatorActor;
use super::auth::{Freshness, SHORT_LIFETIME, SigningKey, TrustedKeys};
use super::wire::{WIRE_VERSION, WireError, check_machine, check_run_id, check_worker_id};
use crate::config::RuleList;
use crate::permissions::{
    PermissionPolicy, PermissionRule, PromptAnswer, PromptRequest, Prompter, SettledCheck,
};
use futures::StreamExt;
use kameo::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

/// The subject of worker `worker`'s permission questions in run `run`.
pub fn ask_subject(run: &str, worker: &str) -> String {
    format!("ahelper.ask.{run}.{worker}")
}

/// A remote worker's permission question (the body of a NATS request).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AskMessage {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// Run id (a UUID).
    pub run_id: String,
    /// Worker id (`w1`, …).
    pub worker_id: String,
    /// The machine asking (`--name`).
    pub machine: String,
    /// A fresh UUID: the answer must name it.
    pub question: String,
    /// The question as its gate built it (its `requester` is replaced by the coordinator).
    pub request: PromptRequest,
}

/// The coordinator's reply to an [`AskMessage`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnswerMessage {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// Run id of the question.
    pub run_id: String,
    /// Worker id of the question.
    pub worker_id: String,
    /// The question's nonce ([`AskMessage::question`]).
    pub question: String,
    /// The user's answer.
    pub answer: PromptAnswer,
    /// Nonce and expiry of the answer.
    #[serde(flatten)]
    pub fresh: Freshness,
}

impl AnswerMessage {
    /// Opens a signed answer that arrived on the inbox `subject` and checks that it answers
    /// `question` of worker `worker` in run `run`.
    ///
    /// # Errors
    /// [`WireError`]: unsigned, untrusted or badly signed, malformed, another version, for
    /// another question, expired.
    pub fn open(
        trusted: &TrustedKeys,
        subject: &str,
        payload: &[u8],
        (run, worker, question): (&str, &str, &str),
    ) -> Result<AnswerMessage, WireError> {
        let body = trusted.open(subject, payload)?;
        let msg: AnswerMessage =
            serde_json::from_str(&body).map_err(|e| WireError::Malformed(e.to_string()))?;
        if msg.version != WIRE_VERSION {
            return Err(WireError::Version { found: msg.version });
        }
        if (
            msg.run_id.as_str(),
            msg.worker_id.as_str(),
            msg.question.as_str(),
        ) != (run, worker, question)
        {
            return Err(WireError::SubjectMismatch {
                subject: crate::text::clip(subject, 120).0.to_string(),
                run_id: msg.run_id,
                worker_id: msg.worker_id,
            });
        }
        msg.fresh.check(SHORT_LIFETIME)?;
        Ok(msg)
    }
}

impl AskMessage {
    /// Parses and validates a question that arrived on `subject`.
    ///
    /// # Errors
    /// [`WireError`]: malformed JSON, another version, a bad id or machine name, a subject
    /// that disagrees.
    pub fn parse(subject: &str, payload: &[u8]) -> Result<Self, WireError> {
        let msg: AskMessage =
            serde_json::from_slice(payload).map_err(|e| WireError::Malformed(e.to_string()))?;
        if msg.version != WIRE_VERSION {
            return Err(WireError::Version { found: msg.version });
        }
        check_run_id(&msg.run_id)?;
        check_worker_id(&msg.worker_id)?;
        check_machine(&msg.machine)?;
        if subject != ask_subject(&msg.run_id, &msg.worker_id) {
            return Err(WireError::SubjectMismatch {
                subject: crate::text::clip(subject, 120).0.to_string(),
                run_id: msg.run_id,
                worker_id: msg.worker_id,
            });
        }
        Ok(msg)
    }
}

/// The worker machine's prompter when the coordinator can answer: each question is a request to
/// the coordinator, waiting as long as the user takes. A question that cannot be delivered (no
/// coordinator listening, a lost connection) or a reply that does not parse is a "no".
pub struct RemotePrompter {
    /// The connection.
    pub client: async_nats::Client,
    /// Run id.
    pub run_id: String,
    /// Worker id.
    pub worker_id: String,
    /// This machine's name.
    pub machine: String,
    /// The coordinator keys whose answers count.
    pub trusted: Arc<TrustedKeys>,
}

impl RemotePrompter {
    /// Sends the question with a reply inbox of its own; `None` when it cannot be sent.
    async fn send(
        &self,
        request: &PromptRequest,
        question: &str,
    ) -> Option<async_nats::Subscriber> {
        let message = AskMessage {
            version: WIRE_VERSION,
            run_id: self.run_id.clone(),
            worker_id: self.worker_id.clone(),
            machine: self.machine.clone(),
            question: question.to_string(),
            request: request.clone(),
        };
        let payload = serde_json::to_vec(&message).unwrap_or_default();
        let subject = ask_subject(&self.run_id, &self.worker_id);
        let inbox = self.client.new_inbox();
        let replies = match self.client.subscribe(inbox.clone()).await {
            Ok(replies) => replies,
            Err(error) => {
                tracing::warn!(%error, "asking the coordinator failed; the call is refused");
                return None;
            }
        };
        let sent = self
            .client
            .publish_with_reply(subject, inbox, payload.into())
            .await;
        if let Err(error) = sent {
            tracing::warn!(%error, "asking the coordinator failed; the call is refused");
            return None;
        }
        Some(replies)
    }
}

#[async_trait::async_trait]
impl Prompter for RemotePrompter {
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer {
        let question = uuid::Uuid::now_v7().to_string();
        let Some(mut replies) = self.send(request, &question).await else {
            return PromptAnswer::Deny;
        };
        let ids = (
            self.run_id.as_str(),
            self.worker_id.as_str(),
            question.as_str(),
        );
        while let Some(reply) = replies.next().await {
            match AnswerMessage::open(&self.trusted, &reply.subject, &reply.payload, ids) {
                // The first valid answer counts; dropping `replies` unsubscribes the inbox.
                Ok(answer) => return answer.answer,
                Err(error) => {
                    tracing::warn!(worker = %self.worker_id, %error, "ignored an answer that is not the coordinator's")
                }
            }
        }
        tracing::warn!("the connection closed while asking the coordinator; the call is refused");
        PromptAnswer::Deny
    }

    fn is_interactive(&self) -> bool {
        true
    }
}

/// What the coordinator knows about remote questions: the label of each worker it started and
/// the rules its user answered `a` or `d` for.
#[derive(Default)]
pub struct Questions {
    labels: Mutex<HashMap<String, String>>,
    always: Mutex<HashSet<String>>,
    never: Mutex<HashSet<String>>,
    /// The questions being asked, by worker id: given up when the worker ends.
    asking: Mutex<HashMap<String, Vec<tokio::task::AbortHandle>>>,
}

impl Questions {
    /// Worker `worker` was started: its questions are shown labelled `label`.
    pub fn expect(&self, worker: &str, label: String) {
        if let Ok(mut labels) = self.labels.lock() {
            labels.insert(worker.to_string(), label);
        }
    }

    /// Worker `worker` ended: the questions it asked that are still shown are given up (the
    /// live view withdraws them), and later ones are refused.
    pub fn forget(&self, worker: &str) {
        if let Ok(mut labels) = self.labels.lock() {
            labels.remove(worker);
        }
        let asking = self.asking.lock().ok().and_then(|mut a| a.remove(worker));
        for task in asking.into_iter().flatten() {
            task.abort();
        }
    }

    /// Every question still being asked is given up (the run's coordinator stopped).
    fn forget_all(&self) {
        let asking = self
            .asking
            .lock()
            .map(|mut a| std::mem::take(&mut *a))
            .unwrap_or_default();
        for task in asking.into_values().flatten() {
            task.abort();
        }
    }

    /// Worker `worker`'s question is being asked by `task`.
    fn asked(&self, worker: &str, task: tokio::task::AbortHandle) {
        if let Ok(mut asking) = self.asking.lock() {
            let tasks = asking.entry(worker.to_string()).or_default();
            tasks.retain(|t| !t.is_finished());
            tasks.push(task);
        }
    }

    fn label(&self, worker: &str) -> Option<String> {
        self.labels.lock().ok()?.get(worker).cloned()
    }

    /// The answer a stored `a`/`d` gives to a question that would add `rule`.
    fn stored(&self, rule: &str) -> Option<PromptAnswer> {
        let has = |set: &Mutex<HashSet<String>>| set.lock().is_ok_and(|s| s.contains(rule));
        if has(&self.never) {
            Some(PromptAnswer::DenyAlways)
        } else if has(&self.always) {
            Some(PromptAnswer::AllowAlways)
        } else {
            None
        }
    }

    fn store(&self, rule: &str, list: RuleList) {
        let set = match list {
            RuleList::Allow => &self.always,
            RuleList::Deny => &self.never,
        };
        if let Ok(mut set) = set.lock() {
            set.insert(rule.to_string());
        }
    }
}

/// Answers the run's remote permission questions with the coordinator's prompter until the
/// coordinator stops.
pub struct QuestionServer {
    /// The connection.
    pub client: async_nats::Client,
    /// Run id.
    pub run_id: String,
    /// The run's prompter (the live view's question queue).
    pub prompter: Arc<dyn Prompter>,
    /// The run's policy: `a`/`d` answers add their rule here.
    pub policy: Arc<RwLock<PermissionPolicy>>,
    /// Labels and stored answers.
    pub questions: Arc<Questions>,
    /// The coordinator; the server stops when it has stopped.
    pub coordinator: ActorRef<CoordinatorActor>,
    /// The coordinator's key, which signs every answer.
    pub key: Arc<SigningKey>,
}

impl QuestionServer {
    /// Serves questions (each in its own task: the prompter queues them) until the coordinator
    /// has stopped; retries the subscription when it fails.
    pub async fn run(self) {
        let this = Arc::new(self);
        let subject = format!("ahelper.ask.{}.*", this.run_id);
        while this.coordinator.is_alive() {
            let mut questions = match this.client.subscribe(subject.clone()).await {
                Ok(s) => s,
                Err(error) => {
                    tracing::warn!(%error, "subscribing to worker questions failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
            loop {
                tokio::select! {
                    next = questions.next() => match next {
                        Some(message) => this.spawn_answer(message),
                        None => break,
                    },
                    _ = tick.tick() => if !this.coordinator.is_alive() { break; },
                }
            }
        }
        this.questions.forget_all();
    }

    /// Answers `message` in a task of its own, which is given up when its worker ends.
    fn spawn_answer(self: &Arc<Self>, message: async_nats::Message) {
        let worker = message
            .subject
            .rsplit('.')
            .next()
            .unwrap_or_default()
            .to_string();
        let task = tokio::spawn(self.clone().answer(message));
        self.questions.asked(&worker, task.abort_handle());
    }

    /// One question: validated, shown (unless a stored answer settles it), answered.
    async fn answer(self: Arc<Self>, message: async_nats::Message) {
        let Some(reply) = message.reply.clone() else {
            return;
        };
        let Some((ask, answer)) = self.decide(&message.subject, &message.payload).await else {
            // Not a question of this run's workers: nothing is signed for it.
            return;
        };
        let body = AnswerMessage {
            version: WIRE_VERSION,
            run_id: ask.run_id,
            worker_id: ask.worker_id,
            question: ask.question,
            answer,
            fresh: Freshness::new(SHORT_LIFETIME),
        };
        let body = serde_json::to_string(&body).unwrap_or_default();
        let payload = self.key.sign(&reply, body);
        if let Err(error) = self.client.publish(reply, payload.into()).await {
            tracing::warn!(%error, "sending a permission answer failed");
        }
    }

    /// The question of `payload` and its answer; `None` for a message that is no question of
    /// this run (logged).
    async fn decide(&self, subject: &str, payload: &[u8]) -> Option<(AskMessage, PromptAnswer)> {
        let ask = match AskMessage::parse(subject, payload) {
            Ok(ask) if ask.run_id == self.run_id => ask,
            Ok(_) => return None,
            Err(error) => {
                tracing::warn!(%subject, %error, "refused a permission question");
                return None;
            }
        };
        let Some(label) = self.questions.label(&ask.worker_id) else {
            tracing::warn!(worker = %ask.worker_id, "question of a worker this run did not start refused");
            return Some((ask, PromptAnswer::Deny));
        };
        let answer = self.answer_of(label, ask.request.clone()).await;
        Some((ask, answer))
    }

    /// The answer to `request` of the worker labelled `label`: a stored `a`/`d`, else the
    /// user's.
    async fn answer_of(&self, label: String, mut request: PromptRequest) -> PromptAnswer {
        request.requester = Some(label);
        let rule = request.suggested_rule.clone();
        if let Some(stored) = self.questions.stored(&rule) {
            return stored;
        }
        let questions = self.questions.clone();
        let pending_rule = rule.clone();
        let settled: SettledCheck = Arc::new(move || {
            (questions.stored(&pending_rule) == Some(PromptAnswer::AllowAlways))
                .then(|| pending_rule.clone())
        });
        let answer = self.prompter.ask_unless_settled(&request, settled).await;
        match answer {
            PromptAnswer::AllowAlways => self.remember(&rule, RuleList::Allow),
            PromptAnswer::DenyAlways => self.remember(&rule, RuleList::Deny),
            PromptAnswer::AllowOnce | PromptAnswer::Deny | PromptAnswer::AllowedByRule => {}
        }
        answer
    }

    /// Stores an `a`/`d` answer: in the run's policy (when the rule parses) and by its text.
    fn remember(&self, rule: &str, list: RuleList) {
        self.questions.store(rule, list);
        let Ok(parsed) = PermissionRule::parse(rule) else {
            return;
        };
        let mut policy = self.policy.write().unwrap_or_else(|e| e.into_inner());
        match list {
            RuleList::Allow => policy.rules.allow.push(parsed),
            RuleList::Deny => policy.rules.deny.push(parsed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "0190f2a4-6b1c-7cc3-a3f1-2b7d5e9c1a20";

    fn ask(worker: &str) -> AskMessage {
        AskMessage {
            version: WIRE_VERSION,
            run_id: RUN.into(),
            worker_id: worker.into(),
            machine: "m1".into(),
            question: uuid::Uuid::now_v7().to_string(),
            request: PromptRequest {
                requester: Some("w9 · forged label".into()),
                tool: "run_command".into(),
                subject: Some("make".into()),
                input: serde_json::json!({"command": "make"}),
                reason: "not allowed by a rule".into(),
                suggested_rule: "run_command(make)".into(),
            },
        }
    }

    #[test]
    fn a_question_on_another_workers_subject_or_version_is_refused() {
        let payload = serde_json::to_vec(&ask("w1")).unwrap();
        assert!(AskMessage::parse(&ask_subject(RUN, "w1"), &payload).is_ok());
        assert!(matches!(
            AskMessage::parse(&ask_subject(RUN, "w2"), &payload),
            Err(WireError::SubjectMismatch { .. })
        ));
        let mut newer = ask("w1");
        newer.version += 1;
        let payload = serde_json::to_vec(&newer).unwrap();
        assert!(matches!(
            AskMessage::parse(&ask_subject(RUN, "w1"), &payload),
            Err(WireError::Version { .. })
        ));
    }

    #[test]
    fn stored_answers_settle_later_questions_of_the_same_rule() {
        let questions = Questions::default();
        assert_eq!(questions.stored("run_command(make)"), None);
        questions.store("run_command(make)", RuleList::Allow);
        questions.store("run_command(rm:*)", RuleList::Deny);
        assert_eq!(
            questions.stored("run_command(make)"),
            Some(PromptAnswer::AllowAlways)
        );
        assert_eq!(
            questions.stored("run_command(rm:*)"),
            Some(PromptAnswer::DenyAlways)
        );
    }
}
