//! Fuzzes the lazy view `resource` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_resource`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_resource(data);
});
