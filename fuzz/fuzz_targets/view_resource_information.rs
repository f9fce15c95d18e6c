//! Fuzzes the lazy view `resource_information` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_resource_information`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_resource_information(data);
});
