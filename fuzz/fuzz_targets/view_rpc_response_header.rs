//! Fuzzes the lazy view `rpc_response_header` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_rpc_response_header`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_rpc_response_header(data);
});
