//! Fuzzes the lazy view `application_id` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_application_id`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_application_id(data);
});
