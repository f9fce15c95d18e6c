//! Fuzzes the lazy view `located_blocks` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_located_blocks`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_located_blocks(data);
});
