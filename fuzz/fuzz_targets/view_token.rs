//! Fuzzes the lazy view `token` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_token`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_token(data);
});
