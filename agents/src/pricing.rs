//! Model prices and the cost of token usage, in US dollars.
//!
//! Built-in prices are the providers' list prices for standard (non-batch, uncached) input and
//! output tokens, per million tokens, as read on 2026-12-01 from:
//! - Anthropic: <https://platform.claude.com/docs/en/about-claude/pricing> ("Model pricing":
//!   base input tokens and output tokens);
//! - OpenAI: <https://developers.openai.com/api/docs/pricing> (standard tier, with its "cached
//!   input" price for prompt-cache reads).
//!
//! Prompt caching: Anthropic cache writes (5-minute) cost 1.25× and reads 0.1× of the input
//! price; a configured price may set `cache_read_per_mtok` and `cache_write_per_mtok`.
//!
//! Other models (or newer prices) come from the configuration:
//! `[pricing."model-name"] input_per_mtok = 3.0, output_per_mtok = 15.0`. A model with no price
//! has no cost: ahelper never guesses one.

use crate::model::Usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The price of one model, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million input (prompt) tokens.
    pub input_per_mtok: f64,
    /// Dollars per million output (completion) tokens.
    pub output_per_mtok: f64,
    /// Dollars per million input tokens read from the prompt cache; when unset,
    /// [`CACHE_READ_FACTOR`] × `input_per_mtok` (Anthropic's rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// Dollars per million input tokens written to the prompt cache; when unset,
    /// [`CACHE_WRITE_FACTOR`] × `input_per_mtok` (Anthropic's 5-minute cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

/// Anthropic's price of a cache read relative to base input ("Prompt caching" on the pricing
/// page: cache hits and refreshes 0.1×).
pub const CACHE_READ_FACTOR: f64 = 0.1;

/// Anthropic's price of a 5-minute cache write relative to base input (1.25×).
pub const CACHE_WRITE_FACTOR: f64 = 1.25;

impl Price {
    /// The cost of `usage` in US dollars: uncached input at the input price, cache reads and
    /// writes at theirs, output at the output price.
    pub fn cost_usd(&self, usage: Usage) -> f64 {
        let read = self
            .cache_read_per_mtok
            .unwrap_or(self.input_per_mtok * CACHE_READ_FACTOR);
        let write = self
            .cache_write_per_mtok
            .unwrap_or(self.input_per_mtok * CACHE_WRITE_FACTOR);
        (usage.uncached_input_tokens() as f64 * self.input_per_mtok
            + usage.cache_read_tokens as f64 * read
            + usage.cache_write_tokens as f64 * write
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// An Anthropic price: cache reads and writes by [`CACHE_READ_FACTOR`] and
/// [`CACHE_WRITE_FACTOR`].
const fn price(input_per_mtok: f64, output_per_mtok: f64) -> Price {
    Price {
        input_per_mtok,
        output_per_mtok,
        cache_read_per_mtok: None,
        cache_write_per_mtok: None,
    }
}

/// An OpenAI price: cached input at `cached_per_mtok` ("Cached input" on the pricing page),
/// no surcharge for writing the cache.
const fn openai(input_per_mtok: f64, cached_per_mtok: f64, output_per_mtok: f64) -> Price {
    Price {
        input_per_mtok,
        output_per_mtok,
        cache_read_per_mtok: Some(cached_per_mtok),
        cache_write_per_mtok: Some(input_per_mtok),
    }
}

/// Built-in prices by model name (see the module documentation for the sources and date).
/// A dated snapshot (`claude-sonnet-4-5-20250929`) or `-latest` alias has its base name's price.
pub const BUILTIN_PRICES: &[(&str, Price)] = &[
    // Anthropic
    ("claude-opus-5", price(5.0, 25.0)),
    ("claude-opus-4-8", price(5.0, 25.0)),
    ("claude-opus-4-7", price(5.0, 25.0)),
    ("claude-opus-4-6", price(5.0, 25.0)),
    ("claude-opus-4-5", price(5.0, 25.0)),
    ("claude-opus-4-1", price(15.0, 75.0)),
    ("claude-opus-4", price(15.0, 75.0)),
    ("claude-sonnet-4-6", price(3.0, 15.0)),
    ("claude-sonnet-4-5", price(3.0, 15.0)),
    ("claude-sonnet-4", price(3.0, 15.0)),
    ("claude-3-7-sonnet", price(3.0, 15.0)),
    ("claude-haiku-4-5", price(1.0, 5.0)),
    ("claude-3-5-haiku", price(0.8, 4.0)),
    ("claude-3-haiku", price(0.25, 1.25)),
    // OpenAI
    ("gpt-5", openai(1.25, 0.125, 10.0)),
    ("gpt-5-mini", openai(0.25, 0.025, 2.0)),
    ("gpt-5-nano", openai(0.05, 0.005, 0.4)),
    ("gpt-4.1", openai(2.0, 0.5, 8.0)),
    ("gpt-4.1-mini", openai(0.4, 0.1, 1.6)),
    ("gpt-4.1-nano", openai(0.1, 0.025, 0.4)),
    ("gpt-4o", openai(2.5, 1.25, 10.0)),
    ("gpt-4o-mini", openai(0.15, 0.075, 0.6)),
    ("o3", openai(2.0, 0.5, 8.0)),
    ("o3-mini", openai(1.1, 0.55, 4.4)),
    ("o4-mini", openai(1.1, 0.275, 4.4)),
];

/// True when `model` is `base` or a dated snapshot or alias of it: `base-YYYYMMDD`,
/// `base-YYYY-MM-DD` (OpenAI) or `base-latest`.
fn names_model(model: &str, base: &str) -> bool {
    let Some(rest) = model.strip_prefix(base) else {
        return false;
    };
    let Some(suffix) = rest.strip_prefix('-') else {
        return rest.is_empty();
    };
    suffix == "latest"
        || (suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_digit()))
        || (suffix.len() == 10
            && suffix.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            }))
}

/// The built-in price of `model`, if it has one.
pub fn builtin_price(model: &str) -> Option<Price> {
    BUILTIN_PRICES
        .iter()
        .find(|(base, _)| names_model(model, base))
        .map(|(_, p)| *p)
}

/// Prices from the configuration (`[pricing."<model>"]`) over the built-in ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    configured: BTreeMap<String, Price>,
}

impl PriceTable {
    /// A table with the configured prices (exact model names).
    pub fn new(configured: BTreeMap<String, Price>) -> Self {
        PriceTable { configured }
    }

    /// The price of `model`: the configured one, else the built-in one, else `None`.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.configured
            .get(model)
            .copied()
            .or_else(|| builtin_price(model))
    }

    /// The cost of `usage` by `model` in US dollars; `None` when the price is unknown.
    pub fn cost_usd(&self, model: &str, usage: Usage) -> Option<f64> {
        self.price(model).map(|p| p.cost_usd(usage))
    }
}

/// A cost for people: `$0.0123` below a dollar (4 decimals), `$12.35` above.
pub fn format_usd(cost: f64) -> String {
    if cost < 1.0 {
        format!("${cost:.4}")
    } else {
        format!("${cost:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_have_their_base_price_and_unknown_models_none() {
        assert_eq!(
            builtin_price("claude-sonnet-4-5-20250929"),
            Some(price(3.0, 15.0))
        );
        assert_eq!(
            builtin_price("claude-opus-4-20250514"),
            Some(price(15.0, 75.0))
        );
        assert_eq!(builtin_price("claude-opus-4-5"), Some(price(5.0, 25.0)));
        assert_eq!(
            builtin_price("gpt-4o-2024-08-06"),
            Some(openai(2.5, 1.25, 10.0))
        );
        assert_eq!(
            builtin_price("gpt-4o-mini"),
            Some(openai(0.15, 0.075, 0.60))
        );
        // a newer version is not priced as an older one
        assert_eq!(builtin_price("claude-opus-4-9"), None);
        assert_eq!(builtin_price("llama3"), None);
    }

    #[test]
    fn configured_prices_win_and_costs_add_up() {
        let mut configured = BTreeMap::new();
        configured.insert("gpt-4o".to_string(), price(1.0, 2.0));
        configured.insert("local".to_string(), price(0.5, 0.5));
        let table = PriceTable::new(configured);
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            ..Default::default()
        };
        assert_eq!(table.cost_usd("gpt-4o", usage), Some(2.0));
        assert_eq!(table.cost_usd("local", usage), Some(0.75));
        assert_eq!(table.cost_usd("claude-sonnet-4-5", usage), Some(10.5));
        assert_eq!(table.cost_usd("unknown-model", usage), None);
        assert_eq!(format_usd(0.01234), "$0.0123");
        assert_eq!(format_usd(12.346), "$12.35");
    }
}
