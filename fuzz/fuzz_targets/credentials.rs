//! Credentials files, tokens and token identifiers (see `hadoop_wire_fuzz::checks`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::credentials(data);
});
