//! Smoke tests of the `hotpath-bench` measurements that need Hadoop (the Java RM beside ours,
//! the Kerberized HDFS peer), in one binary built only with the `interop` feature.

#[path = "../support/mod.rs"]
mod support;

mod filestatus_kerberos_smoke;
mod loadgen_side_by_side;
mod storm_apps_java;
