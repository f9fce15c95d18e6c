//! hdfs-io: the HDFS client's hot paths (work in progress; the overview is completed as the
//! modules land).

pub mod addr_cache;
pub mod block_reader;
pub mod checksum;
pub mod dead_nodes;
pub mod error;
pub mod fixtures;
mod hash;
pub mod measure;
pub mod replica;
pub mod selection;
pub mod topology;

pub use error::{BlockName, Error, RemoteException, RemoteKind};
