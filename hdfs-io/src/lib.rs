//! hdfs-io (placeholder: see the crate's issue)
