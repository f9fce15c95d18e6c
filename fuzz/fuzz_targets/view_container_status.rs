//! Fuzzes the lazy view `container_status` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_container_status`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_container_status(data);
});
