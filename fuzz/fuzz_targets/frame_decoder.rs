//! Frame decoder, accumulator and request/response splitting (see `hadoop_wire_fuzz::checks`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::frame_decoder(data);
});
