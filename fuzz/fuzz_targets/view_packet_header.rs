//! Fuzzes the lazy view `packet_header` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_packet_header`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_packet_header(data);
});
