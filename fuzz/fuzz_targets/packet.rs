//! DataTransfer packet decoder and splitter (see `ipc_fuzz::checks`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::packet(data);
});
