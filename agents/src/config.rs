//! Layered configuration (being written).
