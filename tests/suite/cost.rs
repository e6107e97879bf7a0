//! Cost in `--output-format json`: `total_cost_usd` from the built-in price table or the
//! configuration's `[pricing]`, null when the model's price is unknown.

use super::support::config::write_user_config;
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::Turn;
use serde_json::Value;

fn cost_of(repo: &TestRepo, model: &str) -> Value {
    let server = start(agent([Turn::text("ok").with_usage(1_000_000, 100_000)]));
    let result = json_stdout_of(ahelper(repo, &server, Wire::Anthropic).args([
        "-p",
        "hi",
        "--output-format",
        "json",
        "--model",
        model,
    ]));
    assert_eq!(result["usage"]["input_tokens"], 1_000_000);
    result["total_cost_usd"].clone()
}

#[test]
fn a_known_model_has_its_list_price() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    // claude-sonnet-4-5: $3 / $15 per million tokens
    let cost = cost_of(&repo, "claude-sonnet-4-5-20250929")
        .as_f64()
        .unwrap();
    assert!((cost - 4.5).abs() < 1e-9, "{cost}");
}

#[test]
fn an_unknown_model_has_no_cost_and_a_configured_one_has_its_price() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    assert_eq!(cost_of(&repo, "my-local-model"), Value::Null);
    write_user_config(
        &repo,
        "[pricing.\"my-local-model\"]\ninput_per_mtok = 0.5\noutput_per_mtok = 2.0\n",
    );
    let cost = cost_of(&repo, "my-local-model").as_f64().unwrap();
    assert!((cost - 0.7).abs() < 1e-9, "{cost}");
}

#[test]
fn a_negative_price_is_refused() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[pricing.\"m\"]\ninput_per_mtok = -1.0\noutput_per_mtok = 2.0\n",
    );
    let server = start(agent([Turn::text("ok")]));
    assert_usage_error(
        ahelper(&repo, &server, Wire::Anthropic).args(["-p", "hi"]),
        &["input_per_mtok"],
    );
}

#[test]
fn the_swarm_totals_line_shows_the_cost_of_a_priced_model() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let script = coordinator(
        plan_turn(serde_json::json!([subtask("s1", "a.txt")])).with_usage(1_000_000, 0),
    )
    .with_conversation(worker(
        "s1",
        [
            writes("a.txt", "A\n").with_usage(1_000_000, 0),
            Turn::text("done").with_usage(1_000_000, 0),
        ],
    ));
    let server = start(script);
    let out = stdout_of(ahelper(&repo, &server, Wire::Anthropic).args([
        "swarm",
        "do it",
        "--yes",
        "--permission-mode",
        "bypass",
        "--model",
        "claude-haiku-4-5",
    ]));
    let totals = out
        .lines()
        .find(|l| l.starts_with("run ") && l.contains("workers done"))
        .unwrap_or_else(|| panic!("a totals line: {out}"));
    // 4,000,000 input tokens (plan, both worker turns and the coordinator's synthesis turn,
    // which replays the last scripted turn) at $1 per million
    assert!(totals.contains(" · cost $4.00 · "), "{totals}");
}

/// One `-p` turn whose usage reports prompt-cache reads and writes, on `wire`.
fn cached_usage_result(repo: &TestRepo, wire: Wire, model: &str) -> Value {
    let usage = ahelper_fake_llm::Usage {
        input_tokens: 100_000,
        output_tokens: 10_000,
        cache_read_tokens: 800_000,
        cache_write_tokens: 100_000,
    };
    let server = start(agent([Turn::text("ok").with_cached_usage(usage)]));
    json_stdout_of(ahelper(repo, &server, wire).args([
        "-p",
        "hi",
        "--output-format",
        "json",
        "--model",
        model,
    ]))
}

#[test]
fn anthropic_cache_reads_and_writes_are_shown_and_priced_by_anthropic_rules() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let result = cached_usage_result(&repo, Wire::Anthropic, "claude-sonnet-4-5");
    assert_eq!(result["usage"]["input_tokens"], 1_000_000, "{result}");
    assert_eq!(result["usage"]["cache_read_input_tokens"], 800_000);
    assert_eq!(result["usage"]["cache_creation_input_tokens"], 100_000);
    // $3/M input: 100k uncached $0.30 + 100k written ×1.25 $0.375 + 800k read ×0.1 $0.24;
    // $15/M output: 10k $0.15.
    let cost = result["total_cost_usd"].as_f64().unwrap();
    assert!((cost - 1.065).abs() < 1e-9, "{cost}");
}

#[test]
fn openai_cached_input_is_shown_and_priced_at_the_cached_input_price() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let result = cached_usage_result(&repo, Wire::OpenAi, "gpt-4.1");
    // OpenAI counts everything in prompt_tokens and reports the cached part only.
    assert_eq!(result["usage"]["input_tokens"], 1_000_000, "{result}");
    assert_eq!(result["usage"]["cache_read_input_tokens"], 800_000);
    assert_eq!(result["usage"]["cache_creation_input_tokens"], 0);
    // gpt-4.1: $2/M input, $0.50/M cached input, $8/M output:
    // 200k × $2 = $0.40, 800k × $0.50 = $0.40, 10k × $8 = $0.08.
    let cost = result["total_cost_usd"].as_f64().unwrap();
    assert!((cost - 0.88).abs() < 1e-9, "{cost}");
}
