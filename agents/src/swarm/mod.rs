//! Swarm (being written).
