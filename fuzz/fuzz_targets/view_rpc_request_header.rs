//! Fuzzes the lazy view `rpc_request_header` (validate, every accessor, prost differential); see `hadoop_wire_fuzz::checks::view_rpc_request_header`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::view_rpc_request_header(data);
});
