//! The `auth-int` and `auth-conf` security layers (RFC 2831 §2.3–2.4 as the JDK's
//! `DigestIntegrity` / `DigestPrivacy` run them).
//!
//! Wire layout of one wrapped message (`seq` is a per-direction `u32` counter from 0):
//!
//! ```text
//! auth-int : msg ‖ MAC ‖ 00 01 ‖ seq
//! auth-conf: ENC(msg ‖ pad ‖ MAC) ‖ 00 01 ‖ seq     pad: 1..8 bytes of value pad (DES/3DES),
//!                                                  none (RC4)
//! MAC = HMAC-MD5(Ki, seq ‖ msg)[0..10]
//! ```
//!
//! The cipher state runs across messages: CBC chains from the last ciphertext block of the
//! previous message, RC4 continues its keystream. Each direction keeps its own keyed HMAC, cipher
//! and counter, built once; wrapping and unwrapping append to the caller's buffer and allocate
//! nothing else.

use des::cipher::{Block, BlockCipherDecrypt, BlockCipherEncrypt, KeyInit, StreamCipher};
use des::{Des, TdesEde2};
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use rc4::Rc4;
use subtle::ConstantTimeEq;

use super::DigestCipher;
use crate::sasl::{Qop, SaslError, SecurityLayer};

const CLIENT_INT_MAGIC: &[u8] =
    b"Digest session key to client-to-server signing key magic constant";
const SERVER_INT_MAGIC: &[u8] =
    b"Digest session key to server-to-client signing key magic constant";
const CLIENT_CONF_MAGIC: &[u8] = b"Digest H(A1) to client-to-server sealing key magic constant";
const SERVER_CONF_MAGIC: &[u8] = b"Digest H(A1) to server-to-client sealing key magic constant";

/// Message type of every wrapped message.
const MESSAGE_TYPE: [u8; 2] = [0, 1];
const MAC_LEN: usize = 10;
/// Bytes `auth-int` adds: MAC, type, seq.
const INT_OVERHEAD: usize = MAC_LEN + 2 + 4;
/// Bytes the JDK reserves for `auth-conf` (MAC, type, seq, and up to 10 bytes of padding).
const CONF_OVERHEAD: usize = 26;

/// What a completed DIGEST-MD5 exchange leaves behind for its security layer: H(A1) (the one that
/// includes authzid, if sent), the QOP and, for `auth-conf`, the cipher.
///
/// Both directions' layers come from the same keys: the client's layer sends with Kic/Kcc and
/// receives with Kis/Kcs, the server's the reverse. A test that knows H(A1) (from
/// [`h_a1`](super::h_a1) with the exchanged nonce and cnonce) can so build the *peer's* layer
/// and predict or check the Java side's wrapped bytes exactly.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    h_a1: [u8; 16],
    qop: Qop,
    cipher: Option<DigestCipher>,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("qop", &self.qop)
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl SessionKeys {
    /// Keys for `auth-int` (`cipher` must be `None`) or `auth-conf` (`cipher` required).
    pub fn new(
        h_a1: [u8; 16],
        qop: Qop,
        cipher: Option<DigestCipher>,
    ) -> Result<SessionKeys, SaslError> {
        match (qop, cipher) {
            (Qop::AuthInt, None) | (Qop::AuthConf, Some(_)) => {
                Ok(SessionKeys { h_a1, qop, cipher })
            }
            (Qop::Auth, _) => Err(SaslError::Config(
                "DIGEST-MD5: qop auth has no security layer".into(),
            )),
            (Qop::AuthInt, Some(_)) => Err(SaslError::Config(
                "DIGEST-MD5: auth-int takes no cipher".into(),
            )),
            (Qop::AuthConf, None) => Err(SaslError::Config(
                "DIGEST-MD5: auth-conf needs a cipher".into(),
            )),
        }
    }

    /// The raw H(A1).
    pub fn h_a1(&self) -> &[u8; 16] {
        &self.h_a1
    }

    /// `auth-int` or `auth-conf`.
    pub fn qop(&self) -> Qop {
        self.qop
    }

    /// The `auth-conf` cipher.
    pub fn cipher(&self) -> Option<DigestCipher> {
        self.cipher
    }

    /// The signing keys `(Kic, Kis)`: `MD5(H(A1) ‖ magic)`.
    pub fn integrity_keys(&self) -> ([u8; 16], [u8; 16]) {
        (
            md5_of(&self.h_a1, CLIENT_INT_MAGIC),
            md5_of(&self.h_a1, SERVER_INT_MAGIC),
        )
    }

    /// The sealing keys `(Kcc, Kcs)`: `MD5(H(A1)[0..n] ‖ magic)` with n = 16, 7 (`rc4-56`) or 5
    /// (`rc4-40`). `None` without a cipher.
    pub fn privacy_keys(&self) -> Option<([u8; 16], [u8; 16])> {
        let n = self.cipher?.h_a1_prefix();
        let prefix = &self.h_a1[..n];
        Some((
            md5_of(prefix, CLIENT_CONF_MAGIC),
            md5_of(prefix, SERVER_CONF_MAGIC),
        ))
    }

    /// The client's layer. `server_max_buf` is the `maxbuf` of the server's challenge (65536 if
    /// absent).
    pub fn client_layer(&self, server_max_buf: u32) -> DigestLayer {
        self.layer(true, server_max_buf)
    }

    /// The server's layer. `client_max_buf` is the `maxbuf` of the client's response (65536 if
    /// absent).
    pub fn server_layer(&self, client_max_buf: u32) -> DigestLayer {
        self.layer(false, client_max_buf)
    }

    fn layer(&self, client: bool, peer_max_buf: u32) -> DigestLayer {
        let (kic, kis) = self.integrity_keys();
        let (my_ki, peer_ki) = if client { (kic, kis) } else { (kis, kic) };
        let (send_cipher, recv_cipher) = match (self.cipher, self.privacy_keys()) {
            (Some(c), Some((kcc, kcs))) => {
                let (my_kc, peer_kc) = if client { (kcc, kcs) } else { (kcs, kcc) };
                (Some(Sealer::new(c, &my_kc)), Some(Sealer::new(c, &peer_kc)))
            }
            _ => (None, None),
        };
        let overhead = if self.cipher.is_some() {
            CONF_OVERHEAD
        } else {
            INT_OVERHEAD
        };
        DigestLayer {
            qop: self.qop,
            max_wrap_input: usize::try_from(peer_max_buf)
                .unwrap_or(usize::MAX)
                .saturating_sub(overhead),
            send: Half {
                mac: hmac_key(&my_ki),
                seq: 0,
                cipher: send_cipher,
            },
            recv: Half {
                mac: hmac_key(&peer_ki),
                seq: 0,
                cipher: recv_cipher,
            },
        }
    }
}

fn md5_of(a: &[u8], b: &[u8]) -> [u8; 16] {
    let mut h = Md5::new();
    h.update(a);
    h.update(b);
    h.finalize().into()
}

/// HMAC-MD5 keyed with a 16-byte key. HMAC zero-pads short keys to the block size, so keying
/// with the padded block is the same MAC (and cannot fail).
fn hmac_key(k: &[u8; 16]) -> Hmac<Md5> {
    let mut block = [0u8; 64];
    block[..16].copy_from_slice(k);
    <Hmac<Md5> as KeyInit>::new(&block.into())
}

/// The JDK's `addDesParity`: 7 bytes (56 bits, MSB first) become eight bytes of 7 key bits each,
/// shifted left once, the low bit making each byte's parity odd.
fn add_des_parity(seven: &[u8]) -> [u8; 8] {
    let v = seven
        .iter()
        .take(7)
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    let mut out = [0u8; 8];
    for (i, o) in out.iter_mut().enumerate() {
        let bits = ((v >> (7 * (7 - i))) & 0x7f) as u8;
        let b = bits << 1;
        *o = b | u8::from(b.count_ones() % 2 == 0);
    }
    out
}

/// One direction's cipher, keyed once; chaining state carried across messages.
enum Sealer {
    Des { key: Des, chain: [u8; 8] },
    TripleDes { key: TdesEde2, chain: [u8; 8] },
    Rc4(Rc4),
}

impl Sealer {
    fn new(cipher: DigestCipher, kc: &[u8; 16]) -> Sealer {
        let mut iv = [0u8; 8];
        iv.copy_from_slice(&kc[8..16]);
        match cipher {
            DigestCipher::TripleDes => {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&add_des_parity(&kc[0..7]));
                k[8..].copy_from_slice(&add_des_parity(&kc[7..14]));
                Sealer::TripleDes {
                    key: TdesEde2::new(&k.into()),
                    chain: iv,
                }
            }
            DigestCipher::Des => Sealer::Des {
                key: Des::new(&add_des_parity(&kc[0..7]).into()),
                chain: iv,
            },
            DigestCipher::Rc4 | DigestCipher::Rc4_56 | DigestCipher::Rc4_40 => {
                // RC4's key schedule reads key[i mod len]: the 16-byte key twice is the same
                // schedule, and fits the crate's infallible 32-byte constructor.
                let mut k = [0u8; 32];
                k[..16].copy_from_slice(kc);
                k[16..].copy_from_slice(kc);
                Sealer::Rc4(<Rc4 as KeyInit>::new(&k.into()))
            }
        }
    }

    fn block_size(&self) -> usize {
        match self {
            Sealer::Rc4(_) => 1,
            _ => 8,
        }
    }

    /// Encrypts `data` in place (a multiple of the block size).
    fn encrypt(&mut self, data: &mut [u8]) {
        match self {
            Sealer::Des { key, chain } => cbc_encrypt(key, chain, data),
            Sealer::TripleDes { key, chain } => cbc_encrypt(key, chain, data),
            Sealer::Rc4(rc4) => rc4.apply_keystream(data),
        }
    }

    /// Decrypts `data` in place (a multiple of the block size).
    fn decrypt(&mut self, data: &mut [u8]) {
        match self {
            Sealer::Des { key, chain } => cbc_decrypt(key, chain, data),
            Sealer::TripleDes { key, chain } => cbc_decrypt(key, chain, data),
            Sealer::Rc4(rc4) => rc4.apply_keystream(data),
        }
    }
}

fn cbc_encrypt<C>(key: &C, chain: &mut [u8; 8], data: &mut [u8])
where
    C: BlockCipherEncrypt<BlockSize = des::cipher::consts::U8>,
{
    for chunk in data.chunks_exact_mut(8) {
        let mut block = Block::<C>::default();
        for ((b, &c), &p) in block.iter_mut().zip(chain.iter()).zip(chunk.iter()) {
            *b = c ^ p;
        }
        key.encrypt_block(&mut block);
        chunk.copy_from_slice(&block);
        chain.copy_from_slice(&block);
    }
}

fn cbc_decrypt<C>(key: &C, chain: &mut [u8; 8], data: &mut [u8])
where
    C: BlockCipherDecrypt<BlockSize = des::cipher::consts::U8>,
{
    for chunk in data.chunks_exact_mut(8) {
        let mut block = Block::<C>::default();
        block.copy_from_slice(chunk);
        let mut next_chain = [0u8; 8];
        next_chain.copy_from_slice(chunk);
        key.decrypt_block(&mut block);
        for ((o, &b), &c) in chunk.iter_mut().zip(block.iter()).zip(chain.iter()) {
            *o = b ^ c;
        }
        *chain = next_chain;
    }
}

struct Half {
    mac: Hmac<Md5>,
    seq: u32,
    cipher: Option<Sealer>,
}

impl Half {
    fn mac(&self, seq: &[u8; 4], msg: &[u8]) -> [u8; MAC_LEN] {
        let mut m = self.mac.clone();
        m.update(seq);
        m.update(msg);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// The checks after a good MAC, in the JDK's order: sequence number, then message type.
    fn check_trailer(&self, msg_type: &[u8], seq: &[u8; 4]) -> Result<(), SaslError> {
        let got = u32::from_be_bytes(*seq);
        if got != self.seq {
            // The JDK's text says "from server" on both sides; its counters are Java ints.
            return Err(SaslError::Sasl(format!(
                "DIGEST-MD5: Out of order sequencing of messages from server. Got: {} Expected: {}",
                got as i32, self.seq as i32
            )));
        }
        if msg_type != MESSAGE_TYPE {
            return Err(SaslError::Sasl(format!(
                "DIGEST-MD5: invalid message type: {}",
                u16::from_be_bytes([msg_type[0], msg_type[1]])
            )));
        }
        Ok(())
    }
}

fn trailer(token: &[u8]) -> (&[u8], &[u8], [u8; 4]) {
    let (body, t) = token.split_at(token.len() - 6);
    let mut seq = [0u8; 4];
    seq.copy_from_slice(&t[2..]);
    (body, &t[..2], seq)
}

/// The DIGEST-MD5 security layer of one connection. Built by [`SessionKeys::client_layer`] /
/// [`SessionKeys::server_layer`], or taken from a completed [`DigestClient`](super::DigestClient)
/// or [`DigestServer`](super::DigestServer).
///
/// `unwrap` verifies before it changes the sequence number: on any error the counter stays. A
/// bad MAC or bad padding is [`SaslError::Integrity`] (the JDK drops such a message silently and
/// returns nothing), a wrong sequence number or message type [`SaslError::Sasl`] with the JDK's
/// text. Under `auth-conf` the cipher state has consumed the rejected token, as in the JDK, so
/// the connection should be closed after any unwrap error.
pub struct DigestLayer {
    qop: Qop,
    max_wrap_input: usize,
    send: Half,
    recv: Half,
}

impl std::fmt::Debug for DigestLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestLayer")
            .field("qop", &self.qop)
            .field("max_wrap_input", &self.max_wrap_input)
            .field("send_seq", &self.send.seq)
            .field("recv_seq", &self.recv.seq)
            .finish_non_exhaustive()
    }
}

impl DigestLayer {
    /// The sequence number the next `wrap` uses.
    pub fn send_seq(&self) -> u32 {
        self.send.seq
    }

    /// The sequence number the next `unwrap` expects.
    pub fn recv_seq(&self) -> u32 {
        self.recv.seq
    }
}

impl SecurityLayer for DigestLayer {
    fn qop(&self) -> Qop {
        self.qop
    }

    /// The peer's maxbuf minus 16 (`auth-int`) or 26 (`auth-conf`): the JDK's `RAW_SEND_SIZE`.
    /// `wrap` does not enforce it (the JDK does not either); callers chunk by it.
    fn max_wrap_input(&self) -> usize {
        self.max_wrap_input
    }

    fn wrap(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
        if plain.is_empty() {
            return Ok(());
        }
        let seq = self.send.seq.to_be_bytes();
        self.send.seq = self.send.seq.wrapping_add(1);
        let mac = self.send.mac(&seq, plain);
        match self.send.cipher.as_mut() {
            None => {
                out.reserve(plain.len() + INT_OVERHEAD);
                out.extend_from_slice(plain);
                out.extend_from_slice(&mac);
            }
            Some(cipher) => {
                let bs = cipher.block_size();
                let pad = if bs > 1 {
                    bs - (plain.len() + MAC_LEN) % bs
                } else {
                    0
                };
                out.reserve(plain.len() + pad + MAC_LEN + 6);
                let start = out.len();
                out.extend_from_slice(plain);
                // pad ≤ 8, so the cast is exact.
                out.resize(out.len() + pad, pad as u8);
                out.extend_from_slice(&mac);
                cipher.encrypt(&mut out[start..]);
            }
        }
        out.extend_from_slice(&MESSAGE_TYPE);
        out.extend_from_slice(&seq);
        Ok(())
    }

    fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
        if token.is_empty() {
            return Ok(());
        }
        let Some(cipher) = self.recv.cipher.as_mut() else {
            if token.len() < INT_OVERHEAD {
                return Err(SaslError::Integrity(format!(
                    "DIGEST-MD5: wrapped message of {} bytes is shorter than its {INT_OVERHEAD}-byte trailer",
                    token.len()
                )));
            }
            let (body, msg_type, seq) = trailer(token);
            let (msg, mac) = body.split_at(body.len() - MAC_LEN);
            if !bool::from(self.recv.mac(&seq, msg).ct_eq(mac)) {
                return Err(SaslError::Integrity("DIGEST-MD5: Unmatched MACs".into()));
            }
            self.recv.check_trailer(msg_type, &seq)?;
            self.recv.seq = self.recv.seq.wrapping_add(1);
            out.extend_from_slice(msg);
            return Ok(());
        };
        let bs = cipher.block_size();
        // Smallest sealed part: the MAC plus at least one pad byte for a block cipher.
        let min = if bs > 1 { 16 } else { MAC_LEN };
        let sealed_len = token.len().saturating_sub(6);
        if token.len() < 6 + min || sealed_len % bs != 0 {
            return Err(SaslError::Integrity(format!(
                "DIGEST-MD5: wrapped message of {} bytes has no valid encrypted part",
                token.len()
            )));
        }
        let (sealed, msg_type, seq) = trailer(token);
        let start = out.len();
        out.extend_from_slice(sealed);
        cipher.decrypt(&mut out[start..]);
        let plain = &out[start..];
        let mac_at = plain.len() - MAC_LEN;
        let mut msg_len = mac_at;
        if bs > 1 {
            let pad = plain[mac_at - 1];
            let p = usize::from(pad);
            let ok = (1..=bs).contains(&p)
                && p <= mac_at
                && plain[mac_at - p..mac_at].iter().all(|&b| b == pad);
            if !ok {
                out.truncate(start);
                return Err(SaslError::Integrity(format!(
                    "DIGEST-MD5: Incorrect padding: {}",
                    pad as i8
                )));
            }
            msg_len -= p;
        }
        let expected = self.recv.mac(&seq, &plain[..msg_len]);
        if !bool::from(expected.ct_eq(&plain[mac_at..])) {
            out.truncate(start);
            return Err(SaslError::Integrity("DIGEST-MD5: Unmatched MACs".into()));
        }
        if let Err(e) = self.recv.check_trailer(msg_type, &seq) {
            out.truncate(start);
            return Err(e);
        }
        self.recv.seq = self.recv.seq.wrapping_add(1);
        out.truncate(start + msg_len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn des_parity_is_odd_and_spreads_seven_bit_groups() {
        // 56 one-bits: every group is 0x7f → 0xfe, seven ones already odd: parity bit 0.
        assert_eq!(add_des_parity(&[0xff; 7]), [0xfe; 8]);
        // All zero: each byte gets parity 1.
        assert_eq!(add_des_parity(&[0; 7]), [0x01; 8]);
        // 0x80 00 .. : the first group is 1000000 → 0x80, parity → 0x80 (one bit: odd).
        assert_eq!(
            add_des_parity(&[0x80, 0, 0, 0, 0, 0, 0]),
            [0x80, 1, 1, 1, 1, 1, 1, 1]
        );
        for k in add_des_parity(&[0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde]) {
            assert_eq!(k.count_ones() % 2, 1);
        }
        // 0x12345678 9abcde = groups 0001001 0001101 0001010 1100111 1000100 1101010 1111001 1011110
        assert_eq!(
            add_des_parity(&[0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde]).map(|b| b >> 1),
            [
                0b0001001, 0b0001101, 0b0001010, 0b1100111, 0b1000100, 0b1101010, 0b1111001,
                0b1011110
            ]
        );
    }

    fn keys(cipher: DigestCipher) -> SessionKeys {
        let h: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5a);
        SessionKeys::new(h, Qop::AuthConf, Some(cipher)).unwrap()
    }

    /// A client-to-server message sealed by hand: `body` (msg ‖ pad ‖ MAC) encrypted with a
    /// fresh client sealer, then the type and seq 0.
    fn sealed(keys: &SessionKeys, body: &[u8]) -> Vec<u8> {
        let (kcc, _) = keys.privacy_keys().unwrap();
        let mut s = Sealer::new(keys.cipher().unwrap(), &kcc);
        let mut out = body.to_vec();
        s.encrypt(&mut out);
        out.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
        out
    }

    fn client_mac(keys: &SessionKeys, msg: &[u8]) -> [u8; MAC_LEN] {
        let half = Half {
            mac: hmac_key(&keys.integrity_keys().0),
            seq: 0,
            cipher: None,
        };
        half.mac(&[0; 4], msg)
    }

    #[test]
    fn bad_padding_is_an_integrity_error() {
        let keys = keys(DigestCipher::TripleDes);
        let body = |msg: &[u8], pad: &[u8]| {
            let mut b = msg.to_vec();
            b.extend_from_slice(pad);
            b.extend_from_slice(&client_mac(&keys, msg));
            b
        };
        // The hand-made message is right when the padding is.
        let mut out = Vec::new();
        keys.server_layer(65536)
            .unwrap(&sealed(&keys, &body(b"hel", &[3, 3, 3])), &mut out)
            .unwrap();
        assert_eq!(out, b"hel");
        for (msg, pad, shown) in [
            (&b"hello"[..], &[0u8][..], "0"),
            (b"hello", &[9; 9], "9"),
            (b"hel", &[1, 3, 3], "3"),
            (b"hello", &[0x80], "-128"),
        ] {
            let mut out = vec![1];
            let e = keys
                .server_layer(65536)
                .unwrap(&sealed(&keys, &body(msg, pad)), &mut out)
                .unwrap_err();
            assert_eq!(
                e,
                SaslError::Integrity(format!("DIGEST-MD5: Incorrect padding: {shown}"))
            );
            assert_eq!(out, [1]);
        }
    }

    #[test]
    fn cbc_chains_across_messages() {
        let keys = keys(DigestCipher::Des);
        let (kcc, _) = keys.privacy_keys().unwrap();
        let data: Vec<u8> = (0..48).collect();
        let mut whole = data.clone();
        Sealer::new(DigestCipher::Des, &kcc).encrypt(&mut whole);
        let mut parts = data.clone();
        let mut s = Sealer::new(DigestCipher::Des, &kcc);
        let (a, b) = parts.split_at_mut(16);
        s.encrypt(a);
        s.encrypt(b);
        assert_eq!(parts, whole);
        let mut d = Sealer::new(DigestCipher::Des, &kcc);
        let (a, b) = parts.split_at_mut(8);
        d.decrypt(a);
        d.decrypt(b);
        assert_eq!(parts, data);
    }

    #[test]
    fn rc4_doubled_key_is_the_16_byte_key() {
        let kc: [u8; 16] = std::array::from_fn(|i| i as u8 * 7 + 1);
        let mut ours = [0u8; 64];
        match Sealer::new(DigestCipher::Rc4, &kc) {
            Sealer::Rc4(mut r) => r.apply_keystream(&mut ours),
            _ => unreachable!(),
        }
        let mut direct = [0u8; 64];
        <Rc4 as KeyInit>::new_from_slice(&kc)
            .unwrap()
            .apply_keystream(&mut direct);
        assert_eq!(ours, direct);
    }

    #[test]
    fn three_des_is_two_key_ede_with_parity_keys() {
        let keys = keys(DigestCipher::TripleDes);
        let (kcc, _) = keys.privacy_keys().unwrap();
        let k1 = Des::new(&add_des_parity(&kcc[0..7]).into());
        let k2 = Des::new(&add_des_parity(&kcc[7..14]).into());
        let mut iv = [0u8; 8];
        iv.copy_from_slice(&kcc[8..]);
        let plain = *b"8 bytes!";
        let mut block = Block::<Des>::default();
        for ((b, p), v) in block.iter_mut().zip(plain).zip(iv) {
            *b = p ^ v;
        }
        k1.encrypt_block(&mut block);
        k2.decrypt_block(&mut block);
        k1.encrypt_block(&mut block);
        let mut ours = plain;
        Sealer::new(DigestCipher::TripleDes, &kcc).encrypt(&mut ours);
        assert_eq!(&ours[..], &block[..]);
    }
}
