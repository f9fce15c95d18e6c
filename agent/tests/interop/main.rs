//! The agent's tests against real Hadoop (Java's RM, NodeManagers, HDFS and CLIs) in one binary,
//! built only with the `interop` feature (`scripts/test` turns it on). Each module is one former
//! `tests/<name>.rs`; tests of a module that share one Hadoop peer still do.
//!
//! The Kerberos tests that set MIT's process-wide environment (`KRB5_CONFIG`, `KRB5CCNAME`)
//! are binaries of their own beside this directory, behind the same feature.

#[path = "../support/app_run.rs"]
mod app_run;
#[path = "../support/cmp.rs"]
mod cmp;
#[path = "../support/daemon.rs"]
mod daemon;
#[path = "../support/mod.rs"]
mod support;

mod agent_disks_java_rm;
mod agent_interop_java_rm;
mod agent_localize;
mod agent_localize_footprint;
mod agent_yarn_app;
mod app_run_agents;
mod app_run_amrm_roll;
mod app_run_java_nm;
mod hdfs_kerberos_fetchdt;
mod mr_jobs;
mod resources_hdfs;
mod rm_admin;
mod rm_app_acls;
mod rm_apps;
mod rm_distributed_shell;
mod rm_ha_failover;
mod rm_ha_three;
mod rm_interop_java_nm;
mod rm_mr_jobs;
mod rm_recovery_java_nm;
mod rm_signal_cli;
mod shuffle_java;
