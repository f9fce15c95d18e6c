//! DataTransfer packet decoder and splitter (see `hadoop_wire_fuzz::checks`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::packet(data);
});
