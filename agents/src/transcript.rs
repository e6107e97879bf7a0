//! Transcripts (being written).
