//! hdfs-io: the HDFS client's hot paths (work in progress; the overview is completed as the
//! modules land).

pub mod addr_cache;
pub mod block_reader;
pub mod checksum;
pub mod datanode;
pub mod dead_nodes;
pub mod dfs;
pub mod error;
pub mod file_status;
pub mod fixtures;
mod hash;
pub mod measure;
pub mod namenode;
pub mod replica;
pub mod selection;
pub mod topology;

pub use error::{BlockName, Error, RemoteException, RemoteKind};
