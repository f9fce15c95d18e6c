//! The DIGEST-MD5 security layers allocate nothing per message when the caller's buffers have
//! the capacity: a counting global allocator (own test binary, one #[test]) watches wrap and
//! unwrap at `auth-int` and `auth-conf` with every cipher, both directions.

use hadoop_wire::sasl::digest::{DigestCipher, DigestLayer, SessionKeys};
use hadoop_wire::sasl::{Qop, SecurityLayer};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

fn round(from: &mut DigestLayer, to: &mut DigestLayer, m: &[u8], w: &mut Vec<u8>, p: &mut Vec<u8>) {
    w.clear();
    p.clear();
    from.wrap(m, w).unwrap();
    to.unwrap(w, p).unwrap();
    assert_eq!(&p[..], m);
}

#[test]
fn wrap_and_unwrap_do_not_allocate_with_capacity() {
    let h_a1: [u8; 16] = std::array::from_fn(|i| i as u8 * 11 + 3);
    let mut keys = vec![SessionKeys::new(h_a1, Qop::AuthInt, None).unwrap()];
    for c in DigestCipher::ALL {
        keys.push(SessionKeys::new(h_a1, Qop::AuthConf, Some(c)).unwrap());
    }
    let msg: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
    let mut wrapped = Vec::with_capacity(8192);
    let mut plain = Vec::with_capacity(8192);

    // The counter works: growing past the capacity is seen.
    let mut small = Vec::with_capacity(1);
    let mut probe = keys[0].client_layer(65536);
    assert!(
        alloc_counter::thread(|| probe.wrap(b"hello", &mut small).unwrap())
            .1
            .allocs
            > 0
    );

    for k in &keys {
        let mut client = k.client_layer(65536);
        let mut server = k.server_layer(65536);
        let (_, counts) = alloc_counter::thread(|| {
            for i in 0..100 {
                let m = &msg[..(i * 37) % msg.len() + 1];
                round(&mut client, &mut server, m, &mut wrapped, &mut plain);
                round(&mut server, &mut client, m, &mut wrapped, &mut plain);
            }
        });
        assert_eq!(counts.allocs, 0, "{:?} {:?}", k.qop(), k.cipher());
        assert_eq!(client.send_seq(), 100);
        assert_eq!(client.recv_seq(), 100);
    }
}
