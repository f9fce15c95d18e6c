//! Fuzzes frames with their header views; see `ipc_fuzz::checks::view_frames`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_frames(data);
});
