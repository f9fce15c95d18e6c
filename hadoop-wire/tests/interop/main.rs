//! hadoop-wire against Hadoop and the JDK (the Java peer), in one binary built only with the
//! `interop` feature: raw calls to a real NameNode, our messages against Hadoop 3.5's
//! descriptors, DIGEST-MD5 against the JDK's SASL, delegation tokens against Hadoop's manager.
//! Each module is one former `tests/<name>.rs`.

mod interop_namenode;
mod proto_vs_hadoop;
mod sasl_jdk;
mod sasl_tokens_jdk;
