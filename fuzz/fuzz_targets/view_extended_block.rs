//! Fuzzes the lazy view `extended_block` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_extended_block`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_extended_block(data);
});
