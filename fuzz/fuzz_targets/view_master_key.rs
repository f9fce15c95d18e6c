//! Fuzzes the lazy view `master_key` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_master_key`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_master_key(data);
});
