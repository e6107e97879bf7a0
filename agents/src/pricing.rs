//! Model prices and the cost of token usage, in US dollars.
//!
//! Built-in prices are the providers' list prices for standard (non-batch, uncached) input and
//! output tokens, per million tokens, as read on 2026-12-01 from:
//! - Anthropic: <https://platform.claude.com/docs/en/about-claude/pricing> ("Model pricing":
//!   base input tokens and output tokens);
//! - OpenAI: <https://developers.openai.com/api/docs/pricing> (standard tier).
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
}

impl Price {
    /// The cost of `usage` in US dollars.
    pub fn cost_usd(&self, usage: Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

const fn price(input_per_mtok: f64, output_per_mtok: f64) -> Price {
    Price {
        input_per_mtok,
        output_per_mtok,
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
    ("gpt-5", price(1.25, 10.0)),
    ("gpt-5-mini", price(0.25, 2.0)),
    ("gpt-5-nano", price(0.05, 0.40)),
    ("gpt-4.1", price(2.0, 8.0)),
    ("gpt-4.1-mini", price(0.40, 1.60)),
    ("gpt-4.1-nano", price(0.10, 0.40)),
    ("gpt-4o", price(2.50, 10.0)),
    ("gpt-4o-mini", price(0.15, 0.60)),
    ("o3", price(2.0, 8.0)),
    ("o3-mini", price(1.10, 4.40)),
    ("o4-mini", price(1.10, 4.40)),
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
        assert_eq!(builtin_price("gpt-4o-2024-08-06"), Some(price(2.5, 10.0)));
        assert_eq!(builtin_price("gpt-4o-mini"), Some(price(0.15, 0.60)));
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
        };
        assert_eq!(table.cost_usd("gpt-4o", usage), Some(2.0));
        assert_eq!(table.cost_usd("local", usage), Some(0.75));
        assert_eq!(table.cost_usd("claude-sonnet-4-5", usage), Some(10.5));
        assert_eq!(table.cost_usd("unknown-model", usage), None);
        assert_eq!(format_usd(0.01234), "$0.0123");
        assert_eq!(format_usd(12.346), "$12.35");
    }
}
