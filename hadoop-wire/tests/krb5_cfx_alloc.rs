//! The RFC 4121 (CFX) Wrap tokens allocate nothing per message when the caller's buffers have
//! the capacity: a counting global allocator (own test binary, one #[test]) watches wrap and
//! unwrap, sealed and not, every enctype (RFC 3962's and RFC 8009's), both directions.

use hadoop_wire::sasl::krb5_cfx::{
    CfxContext, CfxKey, CfxParams, ENCTYPE_AES128_CTS_HMAC_SHA1_96,
    ENCTYPE_AES128_CTS_HMAC_SHA256_128, ENCTYPE_AES256_CTS_HMAC_SHA1_96,
    ENCTYPE_AES256_CTS_HMAC_SHA384_192,
};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

#[test]
fn warm_wrap_and_unwrap_do_not_allocate() {
    let msg: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
    let mut wrapped = Vec::with_capacity(8192);
    let mut plain = Vec::with_capacity(8192);
    for (enctype, len) in [
        (ENCTYPE_AES128_CTS_HMAC_SHA1_96, 16),
        (ENCTYPE_AES256_CTS_HMAC_SHA1_96, 32),
        (ENCTYPE_AES128_CTS_HMAC_SHA256_128, 16),
        (ENCTYPE_AES256_CTS_HMAC_SHA384_192, 32),
    ] {
        let key = vec![3u8; len];
        let sub = vec![4u8; len];
        let p = |initiator| CfxParams {
            initiator,
            ctx_key: CfxKey { enctype, key: &key },
            acceptor_subkey: Some(CfxKey { enctype, key: &sub }),
            send_seq: 5,
            recv_seq: 5,
        };
        let mut i = CfxContext::new(&p(true), &[1; 32]).unwrap();
        let mut a = CfxContext::new(&p(false), &[2; 32]).unwrap();
        // The counter works: growing past the capacity is seen.
        let mut small = Vec::with_capacity(1);
        assert!(
            alloc_counter::thread(|| i.wrap(true, b"hello", &mut small))
                .1
                .allocs
                > 0
        );
        a.unwrap(&small, &mut Vec::new()).unwrap();
        let (_, counts) = alloc_counter::thread(|| {
            for k in 0..200 {
                let m = &msg[..(k * 37) % msg.len()];
                let sealed = k % 3 != 0;
                for dir in 0..2 {
                    let (from, to) = if dir == 0 {
                        (&mut i, &mut a)
                    } else {
                        (&mut a, &mut i)
                    };
                    wrapped.clear();
                    plain.clear();
                    from.wrap(sealed, m, &mut wrapped);
                    assert_eq!(to.unwrap(&wrapped, &mut plain).unwrap(), sealed);
                    assert_eq!(&plain[..], m);
                }
            }
        });
        assert_eq!(counts.allocs, 0, "enctype {enctype}");
        assert_eq!(i.send_seq(), 206);
        assert_eq!(a.send_seq(), 205);
    }
}
