//! Fuzzes the lazy view `packet_header` (validate, every accessor, prost differential); see `ipc_fuzz::checks::view_packet_header`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ipc_fuzz::checks::view_packet_header(data);
});
