//! Fuzzes the lazy view `node_heartbeat_request` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_node_heartbeat_request`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_node_heartbeat_request(data);
});
