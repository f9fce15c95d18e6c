//! Fuzzes the lazy view `string_string_map` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_string_string_map`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_string_string_map(data);
});
