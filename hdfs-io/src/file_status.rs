//! `HdfsFileStatusProto` read in one pass into borrowed fields ([`FileStatusView`]), and an
//! owned copy for callers that keep it ([`FileStatus`]).

use crate::error::Error;
use hadoop_wire::reader::{DecodeError, Reader, WireType};

/// `HdfsFileStatusProto.FileType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Dir,
    File,
    Symlink,
}

/// `HdfsFileStatusProto.flags` bits.
pub mod flags {
    pub const HAS_ACL: u32 = 0x01;
    pub const HAS_CRYPT: u32 = 0x02;
    pub const HAS_EC: u32 = 0x04;
    pub const SNAPSHOT_ENABLED: u32 = 0x08;
}

/// A file status borrowing the response bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStatusView<'a> {
    pub file_type: FileType,
    /// Local name (empty for getFileInfo).
    pub path: &'a [u8],
    pub length: u64,
    /// Permission bits (`FsPermissionProto.perm`).
    pub permission: u32,
    pub owner: &'a [u8],
    pub group: &'a [u8],
    pub modification_time: u64,
    pub access_time: u64,
    pub symlink: Option<&'a [u8]>,
    pub block_replication: u32,
    pub blocksize: u64,
    pub file_id: u64,
    pub children_num: i32,
    pub storage_policy: u32,
    pub flags: u32,
    /// `fileEncryptionInfo` present (field 15).
    pub encrypted: bool,
    /// `ecPolicy` present (field 17).
    pub erasure_coded: bool,
    /// `locations` bytes (LocatedBlocksProto), when the call asked for them.
    pub locations: Option<&'a [u8]>,
}

fn bad(e: DecodeError) -> Error {
    Error::Decode {
        what: "HdfsFileStatusProto",
        source: e,
    }
}

impl<'a> FileStatusView<'a> {
    /// Reads the whole message once; required fields checked.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, Error> {
        let wrong = |f| Error::Malformed {
            what: "HdfsFileStatusProto",
            reason: f,
        };
        let mut v = FileStatusView {
            file_type: FileType::File,
            path: &[],
            length: 0,
            permission: 0,
            owner: &[],
            group: &[],
            modification_time: 0,
            access_time: 0,
            symlink: None,
            block_replication: 0,
            blocksize: 0,
            file_id: 0,
            children_num: -1,
            storage_policy: 0,
            flags: 0,
            encrypted: false,
            erasure_coded: false,
            locations: None,
        };
        let mut seen = 0u32;
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let (n, wt) = r.read_tag().map_err(bad)?;
            match (n, wt) {
                (1, WireType::Varint) => {
                    v.file_type = match r.read_varint().map_err(bad)? {
                        1 => FileType::Dir,
                        2 => FileType::File,
                        3 => FileType::Symlink,
                        _ => return Err(wrong("unknown fileType")),
                    }
                }
                (2, WireType::Len) => v.path = r.read_len().map_err(bad)?,
                (3, WireType::Varint) => v.length = r.read_varint().map_err(bad)?,
                (4, WireType::Len) => {
                    let mut p = Reader::new(r.read_len().map_err(bad)?);
                    while !p.is_empty() {
                        match p.read_tag().map_err(bad)? {
                            (1, WireType::Varint) => {
                                v.permission = p.read_varint().map_err(bad)? as u32
                            }
                            (1, _) => return Err(wrong("wire type of permission.perm")),
                            (n, wt) => p.skip(n, wt, 1).map_err(bad)?,
                        }
                    }
                }
                (5, WireType::Len) => v.owner = r.read_len().map_err(bad)?,
                (6, WireType::Len) => v.group = r.read_len().map_err(bad)?,
                (7, WireType::Varint) => v.modification_time = r.read_varint().map_err(bad)?,
                (8, WireType::Varint) => v.access_time = r.read_varint().map_err(bad)?,
                (9, WireType::Len) => v.symlink = Some(r.read_len().map_err(bad)?),
                (10, WireType::Varint) => {
                    v.block_replication = r.read_varint().map_err(bad)? as u32
                }
                (11, WireType::Varint) => v.blocksize = r.read_varint().map_err(bad)?,
                (12, WireType::Len) => v.locations = Some(r.read_len().map_err(bad)?),
                (13, WireType::Varint) => v.file_id = r.read_varint().map_err(bad)?,
                (14, WireType::Varint) => v.children_num = r.read_varint().map_err(bad)? as i32,
                (15, WireType::Len) => {
                    r.read_len().map_err(bad)?;
                    v.encrypted = true;
                }
                (16, WireType::Varint) => v.storage_policy = r.read_varint().map_err(bad)? as u32,
                (17, WireType::Len) => {
                    r.read_len().map_err(bad)?;
                    v.erasure_coded = true;
                }
                (18, WireType::Varint) => v.flags = r.read_varint().map_err(bad)? as u32,
                (1..=18, _) => return Err(wrong("wire type of a known field")),
                _ => r.skip(n, wt, 0).map_err(bad)?,
            }
            if n <= 8 {
                seen |= 1 << n;
            }
        }
        // required: 1..=8
        if seen & 0x1fe != 0x1fe {
            return Err(wrong("missing a required field (fileType, path, length, permission, owner, group, modification_time or access_time)"));
        }
        Ok(v)
    }

    /// An owned copy.
    pub fn to_owned(&self) -> FileStatus {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        FileStatus {
            file_type: self.file_type,
            length: self.length,
            permission: self.permission,
            owner: s(self.owner),
            group: s(self.group),
            modification_time: self.modification_time,
            access_time: self.access_time,
            symlink: self.symlink.map(s),
            block_replication: self.block_replication,
            blocksize: self.blocksize,
            file_id: self.file_id,
            children_num: self.children_num,
            storage_policy: self.storage_policy,
            flags: self.flags,
            encrypted: self.encrypted || self.flags & flags::HAS_CRYPT != 0,
            erasure_coded: self.erasure_coded || self.flags & flags::HAS_EC != 0,
        }
    }
}

/// An owned file status (what `hotpath hdfs stat` prints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStatus {
    pub file_type: FileType,
    pub length: u64,
    pub permission: u32,
    pub owner: String,
    pub group: String,
    /// ms since the epoch.
    pub modification_time: u64,
    pub access_time: u64,
    pub symlink: Option<String>,
    pub block_replication: u32,
    pub blocksize: u64,
    pub file_id: u64,
    pub children_num: i32,
    pub storage_policy: u32,
    pub flags: u32,
    pub encrypted: bool,
    pub erasure_coded: bool,
}

impl FileStatus {
    /// `rwxr-xr-x` style permission string with the type letter first (`-`, `d`, `l`).
    pub fn mode_string(&self) -> String {
        let mut s = String::with_capacity(10);
        s.push(match self.file_type {
            FileType::Dir => 'd',
            FileType::File => '-',
            FileType::Symlink => 'l',
        });
        for shift in [6, 3, 0] {
            let p = self.permission >> shift;
            s.push(if p & 4 != 0 { 'r' } else { '-' });
            s.push(if p & 2 != 0 { 'w' } else { '-' });
            s.push(if p & 1 != 0 { 'x' } else { '-' });
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::hdfs::{FsPermissionProto, HdfsFileStatusProto};
    use prost::Message;

    fn sample() -> HdfsFileStatusProto {
        HdfsFileStatusProto {
            file_type: 2,
            path: vec![],
            length: 5 << 20,
            permission: FsPermissionProto { perm: 0o644 },
            owner: "alice".into(),
            group: "supergroup".into(),
            modification_time: 1_767_225_600_123,
            access_time: 1_767_225_600_000,
            block_replication: Some(3),
            blocksize: Some(1 << 20),
            file_id: Some(16386),
            children_num: Some(0),
            storage_policy: Some(0),
            flags: Some(0),
            ..Default::default()
        }
    }

    #[test]
    fn decodes_and_matches_prost() {
        let b = sample().encode_to_vec();
        let v = FileStatusView::decode(&b).unwrap();
        assert_eq!(v.file_type, FileType::File);
        assert_eq!(
            (v.length, v.permission, v.owner, v.group),
            (5 << 20, 0o644, &b"alice"[..], &b"supergroup"[..])
        );
        assert_eq!(
            (v.block_replication, v.blocksize, v.file_id, v.children_num),
            (3, 1 << 20, 16386, 0)
        );
        let o = v.to_owned();
        assert_eq!(o.mode_string(), "-rw-r--r--");
        assert!(!o.encrypted && !o.erasure_coded);
        let mut e = sample();
        e.flags = Some(flags::HAS_EC);
        e.file_type = 1;
        let o = FileStatusView::decode(&e.encode_to_vec())
            .unwrap()
            .to_owned();
        assert!(o.erasure_coded);
        assert_eq!(o.mode_string(), "drw-r--r--");
    }

    #[test]
    fn rejects_bad_input() {
        let b = sample().encode_to_vec();
        for cut in 0..b.len() {
            let _ = FileStatusView::decode(&b[..cut]); // never panics
        }
        assert!(
            FileStatusView::decode(&b[..b.len() - 1]).is_err(),
            "cut inside the last field"
        );
        assert!(
            FileStatusView::decode(&b[..10]).is_err(),
            "required fields missing"
        );
        let mut w = b.clone();
        w.extend_from_slice(&[0x1d, 0, 0, 0, 0]); // field 3 as fixed32
        assert!(FileStatusView::decode(&w).is_err());
    }
}
