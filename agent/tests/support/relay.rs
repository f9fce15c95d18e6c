//! The TCP relay (`testkit::relay`) under the name the Kerberos tests use.
#[allow(unused_imports)] // each test binary uses its part
pub use testkit::relay::Relay;
