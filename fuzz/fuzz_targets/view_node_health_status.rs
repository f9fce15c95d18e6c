//! Fuzzes the lazy view `node_health_status` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_node_health_status`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_node_health_status(data);
});
