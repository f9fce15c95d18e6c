//! peer-harness (placeholder)
