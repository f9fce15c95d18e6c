//! Fuzzes the lazy view `node_health_status` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_node_health_status`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_node_health_status(data);
});
