//! Fuzzes the lazy view `located_block` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_located_block`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_located_block(data);
});
