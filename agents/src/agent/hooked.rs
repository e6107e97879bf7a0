//! The points of the loop where the user's hooks run ([`crate::hooks`]): session start and end,
//! a submitted prompt, before and after a tool call, and the end of an answer.

use super::{Agent, AgentEvent};
use crate::hooks::{HookEvent, HookPermission, HookResults};
use crate::model::ToolCall;
use serde_json::{Map, Value, json};

/// What the `PreToolUse` hooks decided about a call.
pub(super) enum PreToolDecision {
    /// Do not run it; the reason goes to the model.
    Block(String),
    /// Go on to the permission gate, with the hooks' `permissionDecision`.
    Proceed(Option<HookPermission>),
}

fn fields(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The hook input fields that name a tool call: `tool_name`, `tool_input`, `tool_use_id`
/// (Claude Code's names).
fn tool_call_fields(call: &ToolCall) -> Map<String, Value> {
    fields(&[
        ("tool_name", json!(call.name)),
        ("tool_input", call.input.clone()),
        ("tool_use_id", json!(call.id)),
    ])
}

impl Agent {
    /// Runs `event`'s hooks matching `target` in the agent's working directory, and shows
    /// their non-blocking errors to the user.
    async fn run_hooks(
        &self,
        event: HookEvent,
        target: Option<&str>,
        fields: Map<String, Value>,
    ) -> HookResults {
        if self.hooks.none_for(event) || !self.workspace_exists().await {
            return HookResults::default();
        }
        let results = self
            .hooks
            .run(event, target, &self.tool_context.cwd, fields)
            .await;
        for (command, message) in results.errors() {
            tracing::warn!(event = event.as_str(), %command, %message, "hook failed");
            self.emit(AgentEvent::HookMessage {
                event: event.as_str().into(),
                command,
                message,
            });
        }
        results
    }

    /// Runs the `SessionStart` hooks once, before the session's first prompt; returns the
    /// context they add for the model.
    pub(super) async fn start_session(&mut self) -> Option<String> {
        if self.session_started {
            return None;
        }
        self.session_started = true;
        let source = if self.history.is_empty() {
            "startup"
        } else {
            "resume"
        };
        self.run_hooks(
            HookEvent::SessionStart,
            None,
            fields(&[("source", json!(source))]),
        )
        .await
        .additional_context(true)
    }

    /// Runs the `SessionEnd` hooks (`reason`: `exit`, `prompt_input_exit`, `clear`, `other`).
    /// Nothing happens when the session never started a prompt.
    pub async fn end_session(&mut self, reason: &str) {
        if !self.session_started {
            return;
        }
        self.session_started = false;
        self.run_hooks(
            HookEvent::SessionEnd,
            None,
            fields(&[("reason", json!(reason))]),
        )
        .await;
    }

    /// Runs the `UserPromptSubmit` hooks on `prompt`.
    pub(super) async fn prompt_hooks(&self, prompt: &str) -> HookResults {
        self.run_hooks(
            HookEvent::UserPromptSubmit,
            None,
            fields(&[("prompt", json!(prompt))]),
        )
        .await
    }

    /// Runs the `Stop` (or `SubagentStop`) hooks when the model finished answering; returns
    /// the reason to go on when a hook blocks the stop.
    pub(super) async fn stop_hooks(&self, stop_hook_active: bool) -> Option<String> {
        self.run_hooks(
            self.stop_event,
            None,
            fields(&[("stop_hook_active", json!(stop_hook_active))]),
        )
        .await
        .block_reason()
    }

    /// Runs the `PreToolUse` hooks of `call`.
    pub(super) async fn pre_tool_hooks(&self, call: &ToolCall) -> PreToolDecision {
        let results = self
            .run_hooks(
                HookEvent::PreToolUse,
                Some(&call.name),
                tool_call_fields(call),
            )
            .await;
        match results.block_reason() {
            Some(reason) => PreToolDecision::Block(reason),
            None => PreToolDecision::Proceed(results.permission()),
        }
    }

    /// Runs the `PostToolUse` hooks of `call` that produced `content`; returns what they tell
    /// the model (a block reason, additional context), to append to the result.
    pub(super) async fn post_tool_hooks(
        &self,
        call: &ToolCall,
        content: &str,
        is_error: bool,
    ) -> Option<String> {
        let mut input = tool_call_fields(call);
        input.insert(
            "tool_response".into(),
            json!({"content": content, "is_error": is_error}),
        );
        let results = self
            .run_hooks(HookEvent::PostToolUse, Some(&call.name), input)
            .await;
        let notes: Vec<String> = results
            .block_reason()
            .into_iter()
            .chain(results.additional_context(false))
            .collect();
        (!notes.is_empty()).then(|| format!("[PostToolUse hook] {}", notes.join("\n")))
    }
}
