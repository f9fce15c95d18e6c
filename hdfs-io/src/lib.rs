//! hdfs-io: the HDFS client's hot paths — NameNode calls, the DataNode choice with an address
//! cache, and block reads verified with hardware CRC32C.
//!
//! How the types connect, following one read ([`dfs::DfsClient::read`]):
//!
//! ```text
//!  namenode::NameNodeClient ──getBlockLocations──> namenode::LocatedBlocksBuf (response bytes)
//!   (ipc::client, typed Hadoop            │  hadoop_wire::view::hdfs::LocatedBlockView (borrowed)
//!    exceptions, stateId, observer)       v
//!                          replica::decode_replicas ──> [replica::Replica]  (one pass, borrowed)
//!                                         │
//!   topology::{LocalNode, RackMap} ──> selection::Selector::order / choose   (pure; ranks by
//!   dead_nodes::DeadNodes (shared) ──>     health, then this host / this rack, NameNode order)
//!                                         │
//!                          addr_cache::AddrCache::get / resolve ──> SocketAddr (no parse on a hit)
//!                                         │
//!   datanode::PeerCache / connect ──> receive::read_block_uring ──drives──> block_reader::BlockRead
//!    (std TcpStream, timeouts)        (io_uring, pooled chunks;   (sans-IO OP_READ_BLOCK: response,
//!                                      fallback: datanode::        packets parsed in place,
//!                                      read_block_on, blocking)    checksum::DataChecksum, status)
//!                                         v
//!                              verified bytes to the caller's sink; failures mark DeadNodes,
//!                              checksum errors go to NameNodeClient::report_bad_blocks
//! ```
//!
//! - `getFileInfo` on a single NameNode goes through `connection` (a pool of connections each
//!   used by one caller at a time: no reader-thread handoff); everything else through
//!   `ipc::client` (see [`namenode`]).
//! - Sans-IO and pure: [`replica`], [`selection`], [`addr_cache`], [`topology`],
//!   [`block_reader`], [`checksum`], [`file_status`]. I/O: [`receive`] (block data by
//!   io_uring into the `ipc` transport's pooled buffers, one ring per reading thread;
//!   `HOTPATH_IO=epoll` or no io_uring: blocking reads), [`datanode`] (connections, peer
//!   cache, the blocking receive), [`namenode`] (through `ipc::client`), [`dfs`] (the read
//!   loop).
//! - [`fixtures`] builds realistic NameNode and DataNode messages for this crate's unit tests
//!   and for the `benches` crate (the measurements themselves live there: `dn-select`,
//!   `filestatus`, the checksum rate).
//! - Secure data transfer: [`datanode::handshake`] runs the DataTransfer SASL handshake
//!   (`hadoop_wire::hdfs::transfer_sasl`) on new DataNode connections when the NameNode hands
//!   out a data encryption key or `dfs.data.transfer.protection` is set on a Kerberized
//!   cluster; AES-CTR streams ride with the connection ([`datanode::Peer`]) and decrypt in
//!   place on both receive paths; without AES, `auth-int` / `auth-conf` run the connection
//!   through the DIGEST-MD5 stream layer ([`datanode::read_block_on_sasl`]: blocking receive,
//!   one more copy).
//! - [`tokens`]: HDFS delegation tokens (the get/renew/cancel messages, the token service,
//!   Credentials files from `HADOOP_TOKEN_FILE_LOCATION`); [`namenode`] makes the calls and
//!   authenticates with a token it holds (SASL TOKEN).
//! - Errors: one [`Error`] enum; NameNode exceptions keep their class and message
//!   ([`RemoteException`], [`RemoteKind`]).
//!
//! Entry points for the CLI: [`dfs::DfsClient::from_conf`] then
//! [`stat`](dfs::DfsClient::stat) / [`read`](dfs::DfsClient::read);
//! [`namenode::NameNodeClient::get_file_info_with`] for a getFileInfo benchmark (the
//! `hotpath-bench filestatus` load in `benches`).
//!
//! Not done: short-circuit local reads (Java reads local replicas through a Unix socket and
//! file descriptors; this client always uses TCP), erasure-coded and encrypted files (refused
//! with [`Error::Unsupported`]), the visible length of a block under construction (reads that
//! reach into it are refused).

#![forbid(unsafe_code)]

pub mod addr_cache;
pub mod block_reader;
pub mod checksum;
mod connection;
pub mod datanode;
pub mod dead_nodes;
pub mod dfs;
pub mod error;
pub mod file_status;
pub mod fixtures;
mod hash;
pub mod namenode;
pub mod receive;
pub mod replica;
pub mod selection;
pub mod tokens;
pub mod topology;

pub use error::{BlockName, Error, RemoteException, RemoteKind};
