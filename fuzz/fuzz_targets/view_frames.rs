//! Fuzzes frames with their header views; see `hadoop_wire_fuzz::checks::view_frames`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_frames(data);
});
