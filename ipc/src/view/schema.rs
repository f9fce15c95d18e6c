//! Static message schemas (generated into `crate::pb::schema`) and the generic validator.
//!
//! A [`Schema`] lists a message's fields by number with their type ([`Kind`]) and label
//! ([`Label`]). [`validate`] walks a message once against its schema.

/// How a field is labelled in the `.proto` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// `optional`: absent means the proto2 default.
    Optional,
    /// `required`: Java rejects a message without it.
    Required,
    /// `repeated`: any number of occurrences; scalars may be packed or not.
    Repeated,
}

/// The declared type of a field.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Bool,
    /// An enum with its known values (sorted).
    Enum(&'static [i32]),
    Fixed32,
    SFixed32,
    Float,
    Fixed64,
    SFixed64,
    Double,
    String,
    Bytes,
    /// An embedded message.
    Message(&'static Schema),
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub number: u32,
    pub name: &'static str,
    pub kind: Kind,
    pub label: Label,
}

/// A message's fields, sorted by number, with a number → index table.
#[derive(Debug)]
pub struct Schema {
    /// Full protobuf name, e.g. `hadoop.yarn.ContainerStatusProto`.
    pub name: &'static str,
    pub fields: &'static [Field],
    /// `slots[number]` is the field's index + 1, or 0 for an unknown number.
    pub slots: &'static [u8],
    /// Bit `i` set when `fields[i]` is required.
    pub required: u64,
}
