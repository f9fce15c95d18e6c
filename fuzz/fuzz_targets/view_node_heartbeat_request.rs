//! Fuzzes the lazy view `node_heartbeat_request` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_node_heartbeat_request`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_node_heartbeat_request(data);
});
