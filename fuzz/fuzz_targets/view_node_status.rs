//! Fuzzes the lazy view `node_status` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_node_status`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_node_status(data);
});
