//! Fuzzes the lazy view `datanode_id` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_datanode_id`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_datanode_id(data);
});
