//! Frame decoder, accumulator and request/response splitting (see `ipc_fuzz::checks`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::frame_decoder(data);
});
