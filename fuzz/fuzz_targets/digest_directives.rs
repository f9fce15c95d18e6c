//! Fuzzes DIGEST-MD5: the directive parser, client and server steps, layer unwrap, and full
//! exchanges with arbitrary credentials; see `hadoop_wire_fuzz::checks::digest_directives`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::digest_directives(data);
});
