//! Fuzzes the lazy view `datanode_info` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_datanode_info`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_datanode_info(data);
});
