//! Fuzzes the lazy view `request_header` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_request_header`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_request_header(data);
});
