//! rm-core (placeholder: see the crate's issue)
