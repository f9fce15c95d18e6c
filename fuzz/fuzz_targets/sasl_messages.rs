//! SASL negotiation messages through both state machines (see `hadoop_wire_fuzz::checks`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hadoop_wire_fuzz::checks::sasl_messages(data);
});
