//! Every `.sse` case file of `tests/data/sse/` (see `tests/data/README.md`) fed to the
//! real stream parsers (a) whole, (b) one byte at a time and (c) in random chunk sizes with
//! several seeds: the events must be identical across all feedings and match the file's row in
//! `INDEX.md`.

use super::support::sse_cases::{
    Item, LOCAL_DIR, case_path, check_by_hand, expected, sse_files, summarise,
};
use ahelper_agents::model::anthropic::parse_anthropic_stream;
use ahelper_agents::model::openai::parse_openai_stream;
use ahelper_agents::model::{ModelError, ModelEvent};
use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::path::Path;

async fn parse(name: &str, chunks: Vec<Bytes>) -> Vec<Item> {
    let input = futures::stream::iter(chunks.into_iter().map(Ok::<_, ModelError>));
    let stream = if name.starts_with("anthropic-") {
        parse_anthropic_stream(input)
    } else {
        parse_openai_stream(input)
    };
    stream.collect().await
}

/// Parses `name` whole, byte by byte and in random chunks; asserts all agree; returns the events.
async fn parse_all_ways(name: &str) -> Vec<Item> {
    let raw = std::fs::read(case_path(name)).unwrap();
    let whole = parse(name, vec![Bytes::from(raw.clone())]).await;
    let bytewise = parse(name, raw.iter().map(|b| Bytes::from(vec![*b])).collect()).await;
    assert_eq!(whole, bytewise, "{name}: byte-by-byte feeding differs");
    for seed in [1u64, 2, 3, 42, 1234] {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut chunks = Vec::new();
        let mut rest = &raw[..];
        while !rest.is_empty() {
            let n = rng.random_range(1..=rest.len().min(97));
            chunks.push(Bytes::copy_from_slice(&rest[..n]));
            rest = &rest[n..];
        }
        let random = parse(name, chunks).await;
        assert_eq!(whole, random, "{name}: random chunks (seed {seed}) differ");
    }
    whole
}

/// The set is whole: `INDEX.md` names every `.sse` file of the directory, and every file it
/// names is there.
#[tokio::test]
async fn every_case_file_is_indexed_and_every_indexed_file_exists() {
    let files = sse_files(Path::new(LOCAL_DIR));
    assert!(files.len() >= 16, "{files:?}");
    let index = std::fs::read_to_string(case_path("INDEX.md")).unwrap();
    let indexed: BTreeSet<String> = index
        .split(|c: char| c.is_whitespace() || "`|*()[],".contains(c))
        .filter(|word| word.ends_with(".sse"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        indexed, files,
        "INDEX.md and the .sse files of tests/data/sse differ"
    );
}

#[tokio::test]
async fn every_case_file_gives_its_indexed_result() {
    for name in sse_files(Path::new(LOCAL_DIR)) {
        let items = parse_all_ways(&name).await;
        let got = summarise(&name, &items);
        match expected(&name) {
            Some(want) => assert_eq!(got, want, "{name}"),
            None => check_by_hand(&name, &got),
        }
        if let Some(e) = &got.error {
            let retryable = !matches!(e, ModelError::Decode(_));
            assert_eq!(e.is_retryable(), retryable, "{name}: {e:?}");
        }
    }
}

#[tokio::test]
async fn crlf_framing_gives_the_same_events() {
    for name in sse_files(Path::new(LOCAL_DIR)) {
        let raw = std::fs::read_to_string(case_path(&name)).unwrap();
        let crlf = raw.replace('\n', "\r\n");
        let lf = parse(&name, vec![Bytes::from(raw)]).await;
        let bytes = crlf.into_bytes();
        let split: Vec<Bytes> = bytes.chunks(3).map(Bytes::copy_from_slice).collect();
        assert_eq!(
            lf,
            parse(&name, split).await,
            "{name}: CRLF split mid-line differs"
        );
    }
}

#[tokio::test]
async fn multibyte_text_split_inside_a_character_survives() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"héllo ✓ 日本\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let chunks: Vec<Bytes> = body
        .as_bytes()
        .iter()
        .map(|b| Bytes::from(vec![*b]))
        .collect();
    let got = parse("openai-x.sse", chunks).await;
    assert_eq!(
        got[0],
        Ok(ModelEvent::TextDelta {
            text: "héllo ✓ 日本".into()
        })
    );
}

#[tokio::test]
async fn a_transport_error_mid_stream_ends_the_turn_with_that_error() {
    let raw = std::fs::read(case_path("anthropic-text-basic.sse")).unwrap();
    let items = vec![
        Ok(Bytes::copy_from_slice(&raw[..raw.len() / 2])),
        Err(ModelError::Connection("connection reset by peer".into())),
    ];
    let got: Vec<Item> = parse_anthropic_stream(futures::stream::iter(items))
        .collect()
        .await;
    assert_eq!(
        got.last(),
        Some(&Err(ModelError::Connection(
            "connection reset by peer".into()
        )))
    );
    assert!(!got.iter().any(|i| matches!(i, Ok(ModelEvent::Stop { .. }))));
}
