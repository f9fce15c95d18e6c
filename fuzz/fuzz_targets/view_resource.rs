//! Fuzzes the lazy view `resource` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_resource`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_resource(data);
});
