//! Hadoop's tokens: `TokenProto` and the Writable `Token`, the Credentials file ("HDTS"),
//! token identifiers, and the secret manager that mints and verifies passwords. (Being written.)
