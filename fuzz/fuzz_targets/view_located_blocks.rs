//! Fuzzes the lazy view `located_blocks` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_located_blocks`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_located_blocks(data);
});
