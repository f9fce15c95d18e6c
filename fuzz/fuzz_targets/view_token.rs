//! Fuzzes the lazy view `token` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_token`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_token(data);
});
