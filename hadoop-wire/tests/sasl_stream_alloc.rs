//! The DataTransfer SASL stream layer (`transfer_sasl::SaslStreams`) allocates nothing per
//! frame when the caller's buffers have the capacity, and refuses an oversized frame length
//! from its prefix without allocating for it: a counting global allocator (own test binary,
//! one #[test]) watches both directions at `auth-int` and at `auth-conf` with every cipher.

use hadoop_wire::hdfs::transfer_sasl::{SaslStreamError, SaslStreams, MAX_FRAME_LEN};
use hadoop_wire::sasl::digest::{DigestCipher, SessionKeys};
use hadoop_wire::sasl::Qop;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

#[test]
fn framing_allocates_nothing_with_capacity_and_oversized_lengths_allocate_nothing() {
    let h_a1: [u8; 16] = std::array::from_fn(|i| i as u8 * 7 + 1);
    let mut keys = vec![SessionKeys::new(h_a1, Qop::AuthInt, None).unwrap()];
    for c in DigestCipher::ALL {
        keys.push(SessionKeys::new(h_a1, Qop::AuthConf, Some(c)).unwrap());
    }
    // a default DataNode packet's worth
    let packet: Vec<u8> = (0..66_000u32).map(|i| (i * 13) as u8).collect();
    let mut wire = Vec::with_capacity(256 * 1024);
    let mut plain = Vec::with_capacity(256 * 1024);

    // The counter works: growing past the capacity is seen.
    let (_, c) = alloc_counter::thread(|| {
        let mut v: Vec<u8> = Vec::with_capacity(1);
        v.extend_from_slice(&packet);
    });
    assert!(c.allocs >= 2, "{c:?}");

    for k in &keys {
        let mut client = SaslStreams::new(Box::new(k.client_layer(65536)));
        let mut dn = SaslStreams::new(Box::new(k.server_layer(65536)));
        for round in 0..3 {
            wire.clear();
            plain.clear();
            let (r, c) = alloc_counter::thread(|| {
                dn.wrap(&packet, &mut wire)?;
                dn.wrap(&packet[..512], &mut wire)?;
                client.unwrap(&wire, &mut plain)
            });
            let u = r.unwrap();
            assert_eq!(u.consumed, wire.len());
            assert_eq!(plain.len(), packet.len() + 512);
            assert_eq!(
                c.allocs,
                0,
                "{:?} {:?} round {round}: {c:?}",
                k.qop(),
                k.cipher()
            );
        }
        // an oversized length: refused from the prefix, nothing allocated for it
        let mut input = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes().to_vec();
        input.extend_from_slice(&[0; 64]);
        plain.clear();
        let (r, c) = alloc_counter::thread(|| client.unwrap(&input, &mut plain));
        assert!(
            matches!(r, Err(SaslStreamError::FrameTooLong { .. })),
            "{r:?}"
        );
        assert_eq!(c.allocs, 0, "{c:?}");
    }
}
