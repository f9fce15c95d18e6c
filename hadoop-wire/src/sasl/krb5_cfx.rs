//! RFC 4121 ("CFX", the Kerberos V5 GSS-API mechanism version 2) Wrap tokens for the AES
//! enctypes of RFC 3962 (`aes128-cts-hmac-sha1-96` = 17, `aes256-cts-hmac-sha1-96` = 18) and
//! RFC 8009 (`aes128-cts-hmac-sha256-128` = 19, `aes256-cts-hmac-sha384-192` = 20), sans-IO.
//!
//! A GSS context established by a Kerberos library (MIT's, in `ipc`) hands over its keys and
//! sequence numbers (MIT's "lucid" context); from then on [`CfxContext::wrap`] and
//! [`CfxContext::unwrap`] make and check the per-message tokens that `gss_wrap` / `gss_unwrap`
//! would, on the `aes` crate (AES-NI when the CPU has it) and `hmac` + `sha1` / `sha2`,
//! allocating nothing once the output buffer has room.
//!
//! What is implemented, from the specifications:
//! - Key derivation. RFC 3961 `n-fold` and the simplified profile's `DK(base, usage | c)` for
//!   17 and 18; RFC 8009 §3's `KDF-HMAC-SHA2(base, usage | c, k)` (one HMAC-SHA-256 for 19,
//!   HMAC-SHA-384 for 20, over `00000001 | usage | c | 00 | k`, cut to k bits) for 19 and 20.
//!   `Ke` (`0xAA`) and `Ki` (`0x55`) encrypt and MAC a sealed token, `Kc` (`0x99`) checksums an
//!   integrity-only one. Wrap tokens of both kinds use the SEAL usages (22 acceptor, 24
//!   initiator); the SIGN usages (23, 25) belong to MIC tokens, which SASL does not use.
//! - RFC 3962 encryption (17, 18): a 16-byte random confounder, AES-CBC with ciphertext
//!   stealing (the last two blocks swapped) and a zero IV, then HMAC-SHA1 truncated to 96 bits
//!   over the plaintext.
//! - RFC 8009 encryption (19, 20): the same confounder and AES-CTS with a zero IV (the default
//!   cipher state), then HMAC-SHA-256 truncated to 128 bits (19) or HMAC-SHA-384 truncated to
//!   192 bits (20) over the IV and the *ciphertext* (encrypt-then-MAC: a token whose MAC fails
//!   is not decrypted). Their checksum (integrity-only tokens) is the same HMAC with `Kc`,
//!   16 or 24 bytes.
//! - RFC 4121 §4.2 Wrap tokens: the 16-byte header (`05 04`, flags `SentByAcceptor` /
//!   `Sealed` / `AcceptorSubkey`, filler `FF`, EC, RRC, 64-bit sequence number). Sent tokens
//!   carry EC = 0 and RRC = 0 when sealed, EC = the checksum's length (12, 16 or 24) when not,
//!   as MIT and the JDK send them. Received tokens may have any RRC (the body is rotated back)
//!   and, sealed, any EC (that much filler is dropped); integrity-only ones must have EC = the
//!   checksum's length.
//! - Sequence numbers are strict on receive: each token must carry the next number, as on a TCP
//!   connection nothing is lost or reordered (a replayed, reordered or skipped token is an error,
//!   as in our DIGEST-MD5 layer).
//!
//! The acceptor subkey (when the acceptor asserted one) protects every token in both
//! directions and its flag is set on every token sent; a token from the acceptor without the
//! flag is refused then. Every bad token is a [`SaslError::Integrity`] naming the cause.

use aes::cipher::consts::U16;
use aes::cipher::{
    BlockCipherDecBackend, BlockCipherDecClosure, BlockCipherDecrypt, BlockCipherEncBackend,
    BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser, KeyInit,
};
use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Sha256, Sha384};
use subtle::ConstantTimeEq;

use super::SaslError;

/// `aes128-cts-hmac-sha1-96` (RFC 3962).
pub const ENCTYPE_AES128_CTS_HMAC_SHA1_96: i32 = 17;
/// `aes256-cts-hmac-sha1-96` (RFC 3962).
pub const ENCTYPE_AES256_CTS_HMAC_SHA1_96: i32 = 18;
/// `aes128-cts-hmac-sha256-128` (RFC 8009).
pub const ENCTYPE_AES128_CTS_HMAC_SHA256_128: i32 = 19;
/// `aes256-cts-hmac-sha384-192` (RFC 8009).
pub const ENCTYPE_AES256_CTS_HMAC_SHA384_192: i32 = 20;

/// `KG-USAGE-ACCEPTOR-SEAL` (RFC 4121 §2).
pub const KG_USAGE_ACCEPTOR_SEAL: u32 = 22;
/// `KG-USAGE-INITIATOR-SEAL` (RFC 4121 §2).
pub const KG_USAGE_INITIATOR_SEAL: u32 = 24;

const TOK_ID_WRAP: [u8; 2] = [0x05, 0x04];
const FLAG_SENT_BY_ACCEPTOR: u8 = 0x01;
const FLAG_SEALED: u8 = 0x02;
const FLAG_ACCEPTOR_SUBKEY: u8 = 0x04;
const HEADER: usize = 16;
const CONFOUNDER: usize = 16;
/// The longest checksum / sealed token MAC of the enctypes here (HMAC-SHA-384-192).
const MAX_MAC: usize = 24;
/// RFC 8009's MAC input starts with the cipher state, 16 zero bytes for a Wrap token.
const ZERO_IV: [u8; 16] = [0; 16];

/// Whether an enctype is one this module implements.
pub fn supports(enctype: i32) -> bool {
    matches!(
        enctype,
        ENCTYPE_AES128_CTS_HMAC_SHA1_96
            | ENCTYPE_AES256_CTS_HMAC_SHA1_96
            | ENCTYPE_AES128_CTS_HMAC_SHA256_128
            | ENCTYPE_AES256_CTS_HMAC_SHA384_192
    )
}

/// The length of `enctype`'s checksum and sealed-token MAC (12 for 17 and 18, 16 for 19, 24
/// for 20): a sealed Wrap token is the plaintext plus 48 plus this, an integrity-only one the
/// plaintext plus 16 plus this.
pub fn mac_len(enctype: i32) -> Option<usize> {
    match enctype {
        ENCTYPE_AES128_CTS_HMAC_SHA1_96 | ENCTYPE_AES256_CTS_HMAC_SHA1_96 => Some(12),
        ENCTYPE_AES128_CTS_HMAC_SHA256_128 => Some(16),
        ENCTYPE_AES256_CTS_HMAC_SHA384_192 => Some(24),
        _ => None,
    }
}

/// Why a context's keys cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CfxKeyError {
    /// An enctype other than 17, 18, 19 or 20.
    #[error(
        "enctype {0} is not implemented (only aes128/aes256-cts-hmac-sha1-96, \
         aes128-cts-hmac-sha256-128 and aes256-cts-hmac-sha384-192)"
    )]
    Enctype(i32),
    /// A key whose length does not fit its enctype.
    #[error("enctype {enctype} with a key of {len} bytes")]
    KeyLength { enctype: i32, len: usize },
}

/// One Kerberos key: its enctype and bytes.
#[derive(Clone, Copy)]
pub struct CfxKey<'a> {
    pub enctype: i32,
    pub key: &'a [u8],
}

impl std::fmt::Debug for CfxKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CfxKey")
            .field("enctype", &self.enctype)
            .field("len", &self.key.len())
            .finish_non_exhaustive()
    }
}

/// What an established context hands over (MIT's lucid context v1 with protocol 1).
#[derive(Debug, Clone, Copy)]
pub struct CfxParams<'a> {
    /// This side initiated the context.
    pub initiator: bool,
    /// The context key (the initiator's subkey or the session key).
    pub ctx_key: CfxKey<'a>,
    /// The acceptor-asserted subkey, when there is one: it then protects every token.
    pub acceptor_subkey: Option<CfxKey<'a>>,
    /// The sequence number of the next token this side sends.
    pub send_seq: u64,
    /// The sequence number the next token received must carry.
    pub recv_seq: u64,
}

/// AES with a 128- or 256-bit key (AES-NI when the CPU has it).
#[derive(Clone)]
enum Aes {
    A128(aes::Aes128),
    A256(aes::Aes256),
}

impl Aes {
    fn new(k: CfxKey<'_>) -> Result<Aes, CfxKeyError> {
        let bad = CfxKeyError::KeyLength {
            enctype: k.enctype,
            len: k.key.len(),
        };
        match (k.enctype, k.key.len()) {
            (ENCTYPE_AES128_CTS_HMAC_SHA1_96 | ENCTYPE_AES128_CTS_HMAC_SHA256_128, 16) => Ok(
                Aes::A128(aes::Aes128::new_from_slice(k.key).map_err(|_| bad)?),
            ),
            (ENCTYPE_AES256_CTS_HMAC_SHA1_96 | ENCTYPE_AES256_CTS_HMAC_SHA384_192, 32) => Ok(
                Aes::A256(aes::Aes256::new_from_slice(k.key).map_err(|_| bad)?),
            ),
            (e, _) if supports(e) => Err(bad),
            (e, _) => Err(CfxKeyError::Enctype(e)),
        }
    }

    #[inline]
    fn encrypt(&self, b: &mut [u8; 16]) {
        let mut block = aes::Block::from(*b);
        match self {
            Aes::A128(c) => c.encrypt_block(&mut block),
            Aes::A256(c) => c.encrypt_block(&mut block),
        }
        *b = block.into();
    }
}

/// RFC 3961 §5.1 `n-fold`: `input` folded (or stretched) to `out.len()` bytes. The input is
/// repeated lcm(in, out) / in times, each copy rotated right by 13 bits more than the one
/// before, and the out-sized pieces of that are added with end-around carry (ones' complement).
pub fn nfold(input: &[u8], out: &mut [u8]) {
    let (inlen, outlen) = (input.len(), out.len());
    out.fill(0);
    if inlen == 0 || outlen == 0 {
        return;
    }
    let lcm = inlen / gcd(inlen, outlen) * outlen;
    let inbits = inlen * 8;
    // Byte `i` of the repeated, rotated string: copy `i / inlen`, rotated right by 13 bits per
    // copy; a bit at position p of the copy comes from bit (p - rot) mod inbits of the input.
    let bit = |p: usize| -> u32 {
        let (byte, off) = (p / 8, 7 - p % 8);
        u32::from((input[byte] >> off) & 1)
    };
    let byte_at = |i: usize| -> u32 {
        let copy = i / inlen;
        let rot = (13 * copy) % inbits;
        let base = (i % inlen) * 8;
        (0..8).fold(0u32, |acc, k| {
            let p = (base + k + inbits - rot) % inbits;
            (acc << 1) | bit(p)
        })
    };
    // Ones'-complement sum of the lcm / outlen pieces, big-endian, carry wrapped around.
    let mut acc = vec![0u32; outlen];
    for piece in 0..lcm / outlen {
        for (j, a) in acc.iter_mut().enumerate() {
            *a += byte_at(piece * outlen + j);
        }
    }
    loop {
        let mut carry = 0u32;
        for a in acc.iter_mut().rev() {
            let v = *a + carry;
            *a = v & 0xff;
            carry = v >> 8;
        }
        if carry == 0 {
            break;
        }
        acc[outlen - 1] += carry;
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = a as u8;
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// RFC 3961 §5.1 `DK(base, usage | c)` for the AES enctypes (RFC 3962: random-to-key is the
/// identity): `n-fold(usage (4 bytes, big-endian) | c, 128)` encrypted with the base key, then
/// that block encrypted again, ..., concatenated to the key's length.
fn derive(base: &Aes, usage: u32, c: u8, out: &mut [u8]) {
    let mut constant = [0u8; 5];
    constant[..4].copy_from_slice(&usage.to_be_bytes());
    constant[4] = c;
    derive_with(base, &constant, out);
}

/// `DK(base, constant)` (RFC 3961 §5.1) for the AES enctypes.
fn derive_with(base: &Aes, constant: &[u8], out: &mut [u8]) {
    let mut block = [0u8; 16];
    nfold(constant, &mut block);
    for chunk in out.chunks_mut(16) {
        base.encrypt(&mut block);
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

/// RFC 3962 AES-CTS encryption in place with a zero IV: CBC over the blocks (the last one
/// zero-padded), the last two ciphertext blocks swapped and the (now) last one cut to the
/// plaintext's length. `buf` is at least one block long.
fn cts_encrypt(aes: &Aes, buf: &mut [u8]) {
    // The whole message inside one backend call: the `aes` crate's per-call dispatch costs
    // several times one AES-NI block, and CBC encryption is one block at a time.
    let f = CtsEncrypt { buf };
    match aes {
        Aes::A128(c) => c.encrypt_with_backend(f),
        Aes::A256(c) => c.encrypt_with_backend(f),
    }
}

/// The inverse of [`cts_encrypt`], in place. `buf` is at least one block long.
fn cts_decrypt(aes: &Aes, buf: &mut [u8]) {
    let f = CtsDecrypt { buf };
    match aes {
        Aes::A128(c) => c.decrypt_with_backend(f),
        Aes::A256(c) => c.decrypt_with_backend(f),
    }
}

struct CtsEncrypt<'a> {
    buf: &'a mut [u8],
}

impl BlockSizeUser for CtsEncrypt<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for CtsEncrypt<'_> {
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        let enc = |b: &mut [u8; 16]| {
            let mut block = aes::Block::from(*b);
            backend.encrypt_block((&mut block).into());
            *b = block.into();
        };
        let buf = self.buf;
        let n = buf.len();
        debug_assert!(n >= 16);
        if n == 16 {
            let b: &mut [u8; 16] = buf.try_into().expect("one block");
            enc(b);
            return;
        }
        let blocks = n.div_ceil(16);
        let last_len = n - 16 * (blocks - 1);
        let mut prev = [0u8; 16];
        for i in 0..blocks - 1 {
            let b: &mut [u8; 16] = (&mut buf[i * 16..i * 16 + 16]).try_into().expect("block");
            xor16(b, &prev);
            enc(b);
            prev = *b;
        }
        // `prev` is the second-to-last CBC block; now the last block, zero-padded.
        let mut last = [0u8; 16];
        last[..last_len].copy_from_slice(&buf[(blocks - 1) * 16..]);
        xor16(&mut last, &prev);
        enc(&mut last);
        buf[(blocks - 2) * 16..(blocks - 1) * 16].copy_from_slice(&last);
        buf[(blocks - 1) * 16..].copy_from_slice(&prev[..last_len]);
    }
}

struct CtsDecrypt<'a> {
    buf: &'a mut [u8],
}

impl BlockSizeUser for CtsDecrypt<'_> {
    type BlockSize = U16;
}

impl BlockCipherDecClosure for CtsDecrypt<'_> {
    fn call<B: BlockCipherDecBackend<BlockSize = U16>>(self, backend: &B) {
        let dec = |b: &mut [u8; 16]| {
            let mut block = aes::Block::from(*b);
            backend.decrypt_block((&mut block).into());
            *b = block.into();
        };
        let buf = self.buf;
        let n = buf.len();
        debug_assert!(n >= 16);
        if n == 16 {
            let b: &mut [u8; 16] = buf.try_into().expect("one block");
            dec(b);
            return;
        }
        let blocks = n.div_ceil(16);
        let last_len = n - 16 * (blocks - 1);
        // CBC decryption of every block but the swapped last pair (the blocks are independent,
        // so the CPU overlaps their AES rounds).
        let mut prev = [0u8; 16];
        for i in 0..blocks - 2 {
            let b: &mut [u8; 16] = (&mut buf[i * 16..i * 16 + 16]).try_into().expect("block");
            let c = *b;
            dec(b);
            xor16(b, &prev);
            prev = c;
        }
        // The swapped pair: A = the full last CBC block, B = the one before it, cut short.
        let a_at = (blocks - 2) * 16;
        let mut t: [u8; 16] = buf[a_at..a_at + 16].try_into().expect("block");
        dec(&mut t);
        // D(A) = the padded last plaintext XOR the full B; B's missing tail is D(A)'s (the
        // padding was zeros).
        let mut b_full = t;
        b_full[..last_len].copy_from_slice(&buf[a_at + 16..]);
        // The last plaintext: D(A) ^ B over B's bytes.
        for (p, k) in buf[a_at + 16..].iter_mut().zip(t) {
            *p ^= k;
        }
        // The one before: D(full B) ^ the ciphertext block before the pair (CBC).
        let mut second = b_full;
        dec(&mut second);
        xor16(&mut second, &prev);
        buf[a_at..a_at + 16].copy_from_slice(&second);
    }
}

#[inline]
fn xor16(a: &mut [u8; 16], b: &[u8; 16]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= *y;
    }
}

type HmacSha1 = Hmac<Sha1>;
type HmacSha256 = Hmac<Sha256>;
type HmacSha384 = Hmac<Sha384>;

/// A keyed HMAC (the keyed state is cloned per token).
#[derive(Clone)]
enum KeyedMac {
    Sha1(HmacSha1),
    Sha256(HmacSha256),
    Sha384(HmacSha384),
}

impl KeyedMac {
    /// The HMAC of the parts concatenated, its first [`MAX_MAC`] bytes (SHA-1's 20 and zeros);
    /// the enctype's MAC is the first `mac_len` of them.
    #[inline]
    fn tag(&self, parts: &[&[u8]]) -> [u8; MAX_MAC] {
        match self {
            KeyedMac::Sha1(m) => tag_of(m.clone(), parts),
            KeyedMac::Sha256(m) => tag_of(m.clone(), parts),
            KeyedMac::Sha384(m) => tag_of(m.clone(), parts),
        }
    }
}

#[inline]
fn tag_of<M: Mac>(mut mac: M, parts: &[&[u8]]) -> [u8; MAX_MAC] {
    for p in parts {
        mac.update(p);
    }
    let full = mac.finalize().into_bytes();
    let n = full.len().min(MAX_MAC);
    let mut out = [0u8; MAX_MAC];
    out[..n].copy_from_slice(&full[..n]);
    out
}

/// The keys of one direction's Wrap tokens (one key usage) and how they are used.
#[derive(Clone)]
struct DirKeys {
    /// `Ke`: encrypts a sealed token.
    ke: Aes,
    /// `Ki`: MACs a sealed token (its plaintext, or RFC 8009's IV and ciphertext).
    ki: KeyedMac,
    /// `Kc`: checksums an integrity-only token.
    kc: KeyedMac,
    /// The checksum's and the sealed token MAC's length (12, 16 or 24).
    mac_len: usize,
    /// RFC 8009: the MAC covers the IV and ciphertext (RFC 3962: the plaintext).
    encrypt_then_mac: bool,
}

impl DirKeys {
    fn new(base: CfxKey<'_>, usage: u32) -> Result<DirKeys, CfxKeyError> {
        let bad_len = CfxKeyError::KeyLength {
            enctype: base.enctype,
            len: base.key.len(),
        };
        match base.enctype {
            ENCTYPE_AES128_CTS_HMAC_SHA1_96 | ENCTYPE_AES256_CTS_HMAC_SHA1_96 => {
                let aes = Aes::new(base)?;
                let len = base.key.len();
                let mut k = [0u8; 32];
                derive(&aes, usage, 0xAA, &mut k[..len]);
                let ke = Aes::new(CfxKey {
                    enctype: base.enctype,
                    key: &k[..len],
                })?;
                derive(&aes, usage, 0x55, &mut k[..len]);
                let ki = KeyedMac::Sha1(hmac_key(&k[..len]));
                derive(&aes, usage, 0x99, &mut k[..len]);
                let kc = KeyedMac::Sha1(hmac_key(&k[..len]));
                k.fill(0);
                Ok(DirKeys {
                    ke,
                    ki,
                    kc,
                    mac_len: 12,
                    encrypt_then_mac: false,
                })
            }
            ENCTYPE_AES128_CTS_HMAC_SHA256_128 if base.key.len() == 16 => {
                Self::rfc8009::<HmacSha256>(base, usage, 16, KeyedMac::Sha256)
            }
            ENCTYPE_AES256_CTS_HMAC_SHA384_192 if base.key.len() == 32 => {
                Self::rfc8009::<HmacSha384>(base, usage, 24, KeyedMac::Sha384)
            }
            e if supports(e) => Err(bad_len),
            e => Err(CfxKeyError::Enctype(e)),
        }
    }

    /// RFC 8009 §5: `Ke` as long as the base key, `Ki` and `Kc` of `mac_len` bytes, each
    /// `KDF-HMAC-SHA2(base, usage | c, bits)` with the enctype's hash `M`.
    fn rfc8009<M: Mac + KeyInit>(
        base: CfxKey<'_>,
        usage: u32,
        mac_len: usize,
        keyed: fn(M) -> KeyedMac,
    ) -> Result<DirKeys, CfxKeyError> {
        let len = base.key.len();
        let mut k = [0u8; 32];
        kdf_hmac_sha2::<M>(base.key, usage, 0xAA, &mut k[..len]);
        let ke = Aes::new(CfxKey {
            enctype: base.enctype,
            key: &k[..len],
        })?;
        kdf_hmac_sha2::<M>(base.key, usage, 0x55, &mut k[..mac_len]);
        let ki = keyed(hmac_key(&k[..mac_len]));
        kdf_hmac_sha2::<M>(base.key, usage, 0x99, &mut k[..mac_len]);
        let kc = keyed(hmac_key(&k[..mac_len]));
        k.fill(0);
        Ok(DirKeys {
            ke,
            ki,
            kc,
            mac_len,
            encrypt_then_mac: true,
        })
    }

    /// Encrypts a sealed token's body (confounder | data | header) in place; its MAC (the
    /// first `mac_len` bytes count).
    #[inline]
    fn seal(&self, body: &mut [u8]) -> [u8; MAX_MAC] {
        if self.encrypt_then_mac {
            cts_encrypt(&self.ke, body);
            self.ki.tag(&[&ZERO_IV, body])
        } else {
            let mac = self.ki.tag(&[body]);
            cts_encrypt(&self.ke, body);
            mac
        }
    }

    /// Checks `mac` (`mac_len` bytes) of the sealed `cipher` and decrypts it in place; `false`
    /// when the MAC does not match (`cipher` is then left undecrypted or garbled).
    #[inline]
    fn open(&self, cipher: &mut [u8], mac: &[u8]) -> bool {
        if self.encrypt_then_mac {
            let want = self.ki.tag(&[&ZERO_IV, cipher]);
            if !bool::from(want[..self.mac_len].ct_eq(mac)) {
                return false;
            }
            cts_decrypt(&self.ke, cipher);
            true
        } else {
            cts_decrypt(&self.ke, cipher);
            let want = self.ki.tag(&[cipher]);
            bool::from(want[..self.mac_len].ct_eq(mac))
        }
    }
}

/// RFC 8009 §3 `KDF-HMAC-SHA2(base, usage | c, k)` with `k` = `out`'s length in bits, which
/// is at most the hash's: `K1 = HMAC(base, 00000001 | usage | c | 00 | k)` (32-bit big-endian
/// counter and `k`), cut to `out`'s length.
fn kdf_hmac_sha2<M: Mac + KeyInit>(base: &[u8], usage: u32, c: u8, out: &mut [u8]) {
    let mut mac: M = hmac_key(base);
    Mac::update(&mut mac, &1u32.to_be_bytes());
    Mac::update(&mut mac, &usage.to_be_bytes());
    Mac::update(&mut mac, &[c, 0]);
    Mac::update(&mut mac, &((out.len() * 8) as u32).to_be_bytes());
    let k1 = mac.finalize().into_bytes();
    let n = out.len();
    out.copy_from_slice(&k1[..n]);
}

/// An HMAC keyed with `k` (at most 32 bytes). HMAC zero-pads keys shorter than its block (64
/// or 128 bytes): keying with the padded block is the same MAC and cannot fail.
fn hmac_key<M: KeyInit>(k: &[u8]) -> M {
    let mut block = hmac::digest::Key::<M>::default();
    block[..k.len()].copy_from_slice(k);
    let mac = M::new(&block);
    block.fill(0);
    mac
}

/// Confounders made per block-cipher call (the blocks are encrypted in parallel).
const CONFOUNDER_BATCH: usize = 16;

/// AES-128 in counter mode as a generator of confounders, keyed (and its counter started) from
/// 32 random bytes the caller got from the OS.
struct Confounders {
    aes: aes::Aes128,
    counter: u128,
    /// Made and not used yet: blocks `used..`.
    batch: [aes::Block; CONFOUNDER_BATCH],
    used: usize,
}

impl Confounders {
    fn new(seed: &[u8; 32]) -> Confounders {
        let key: [u8; 16] = seed[..16].try_into().expect("16 bytes");
        let ctr: [u8; 16] = seed[16..].try_into().expect("16 bytes");
        Confounders {
            aes: aes::Aes128::new(&key.into()),
            counter: u128::from_be_bytes(ctr),
            batch: [aes::Block::default(); CONFOUNDER_BATCH],
            used: CONFOUNDER_BATCH,
        }
    }

    fn next(&mut self) -> [u8; 16] {
        if self.used == CONFOUNDER_BATCH {
            for b in self.batch.iter_mut() {
                *b = aes::Block::from(self.counter.to_be_bytes());
                self.counter = self.counter.wrapping_add(1);
            }
            self.aes.encrypt_blocks(&mut self.batch);
            self.used = 0;
        }
        let b: [u8; 16] = self.batch[self.used].into();
        self.batch[self.used] = aes::Block::default();
        self.used += 1;
        b
    }
}

/// Both directions of an established context's Wrap tokens.
pub struct CfxContext {
    initiator: bool,
    /// The acceptor asserted a subkey: it protects every token, whose flag says so.
    acceptor_subkey: bool,
    send: DirKeys,
    recv: DirKeys,
    send_seq: u64,
    recv_seq: u64,
    confounders: Confounders,
}

impl std::fmt::Debug for CfxContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CfxContext")
            .field("initiator", &self.initiator)
            .field("acceptor_subkey", &self.acceptor_subkey)
            .field("send_seq", &self.send_seq)
            .field("recv_seq", &self.recv_seq)
            .finish_non_exhaustive()
    }
}

impl CfxContext {
    /// The context for `p`'s keys and sequence numbers; `confounder_seed`: 32 random bytes
    /// from the OS that key the generator of the sealed tokens' confounders.
    pub fn new(p: &CfxParams<'_>, confounder_seed: &[u8; 32]) -> Result<CfxContext, CfxKeyError> {
        let base = p.acceptor_subkey.unwrap_or(p.ctx_key);
        if !supports(base.enctype) {
            return Err(CfxKeyError::Enctype(base.enctype));
        }
        let (send_usage, recv_usage) = if p.initiator {
            (KG_USAGE_INITIATOR_SEAL, KG_USAGE_ACCEPTOR_SEAL)
        } else {
            (KG_USAGE_ACCEPTOR_SEAL, KG_USAGE_INITIATOR_SEAL)
        };
        Ok(CfxContext {
            initiator: p.initiator,
            acceptor_subkey: p.acceptor_subkey.is_some(),
            send: DirKeys::new(base, send_usage)?,
            recv: DirKeys::new(base, recv_usage)?,
            send_seq: p.send_seq,
            recv_seq: p.recv_seq,
            confounders: Confounders::new(confounder_seed),
        })
    }

    /// The sequence number of the next token sent.
    pub fn send_seq(&self) -> u64 {
        self.send_seq
    }

    /// The sequence number the next token received must carry.
    pub fn recv_seq(&self) -> u64 {
        self.recv_seq
    }

    fn flags(&self, sealed: bool) -> u8 {
        let mut f = if self.initiator {
            0
        } else {
            FLAG_SENT_BY_ACCEPTOR
        };
        if sealed {
            f |= FLAG_SEALED;
        }
        if self.acceptor_subkey {
            f |= FLAG_ACCEPTOR_SUBKEY;
        }
        f
    }

    /// Appends the Wrap token of `plain` to `out`: sealed (encrypted and MACed) when `sealed`,
    /// else integrity-protected (a checksum). Allocates only when `out` lacks the room (the
    /// token is `plain.len()` + 48 + [`mac_len`] bytes sealed, + 16 + [`mac_len`] not: + 60 and
    /// + 28 for enctypes 17 and 18).
    pub fn wrap(&mut self, sealed: bool, plain: &[u8], out: &mut Vec<u8>) {
        let seq = self.send_seq;
        self.send_seq = self.send_seq.wrapping_add(1);
        let flags = self.flags(sealed);
        let mac_len = self.send.mac_len;
        if sealed {
            let hdr = header(flags, 0, 0, seq);
            let start = out.len();
            out.reserve(HEADER + CONFOUNDER + plain.len() + HEADER + mac_len);
            out.extend_from_slice(&hdr);
            out.extend_from_slice(&self.confounders.next());
            out.extend_from_slice(plain);
            out.extend_from_slice(&hdr);
            let mac = self.send.seal(&mut out[start + HEADER..]);
            out.extend_from_slice(&mac[..mac_len]);
        } else {
            let mac = self.send.kc.tag(&[plain, &header(flags, 0, 0, seq)]);
            out.reserve(HEADER + plain.len() + mac_len);
            out.extend_from_slice(&header(flags, mac_len as u16, 0, seq));
            out.extend_from_slice(plain);
            out.extend_from_slice(&mac[..mac_len]);
        }
    }

    /// Appends the plaintext of the Wrap token `token` to `out` and says whether it was sealed.
    /// A malformed, tampered, misdirected or out-of-sequence token is a
    /// [`SaslError::Integrity`] and leaves `out` as it was. Allocates only when `out` lacks the
    /// room for `token.len()` more bytes.
    pub fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<bool, SaslError> {
        let bad = |why: String| Err(SaslError::Integrity(format!("Kerberos unwrap: {why}")));
        if token.len() < HEADER {
            return bad(format!(
                "a token of {} bytes is shorter than its 16-byte header",
                token.len()
            ));
        }
        let hdr: [u8; HEADER] = token[..HEADER].try_into().expect("16 bytes");
        if hdr[..2] != TOK_ID_WRAP {
            return bad(format!(
                "not a Wrap token (TOK_ID {:02x}{:02x})",
                hdr[0], hdr[1]
            ));
        }
        if hdr[3] != 0xff {
            return bad(format!("bad filler byte {:02x}", hdr[3]));
        }
        let flags = hdr[2];
        let from_acceptor = flags & FLAG_SENT_BY_ACCEPTOR != 0;
        if from_acceptor != self.initiator {
            return bad(format!(
                "wrong direction: the token's SentByAcceptor flag is {}, and this side is the {}",
                u8::from(from_acceptor),
                if self.initiator {
                    "initiator"
                } else {
                    "acceptor"
                }
            ));
        }
        if self.acceptor_subkey && flags & FLAG_ACCEPTOR_SUBKEY == 0 {
            return bad(
                "the token lacks the AcceptorSubkey flag, though the acceptor asserted a subkey"
                    .into(),
            );
        }
        let ec = usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
        let rrc = usize::from(u16::from_be_bytes([hdr[6], hdr[7]]));
        let seq = u64::from_be_bytes(hdr[8..16].try_into().expect("8 bytes"));
        let body = &token[HEADER..];
        let sealed = flags & FLAG_SEALED != 0;
        let mac_len = self.recv.mac_len;
        let min = if sealed {
            CONFOUNDER + HEADER + mac_len
        } else {
            mac_len
        };
        if body.len() < min {
            return bad(format!(
                "a {} token of {} bytes is too short (at least {} after the header)",
                if sealed { "sealed" } else { "integrity" },
                token.len(),
                min
            ));
        }
        // Undo the sender's right rotation by RRC.
        let r = rrc % body.len();
        let start = out.len();
        out.reserve(body.len());
        out.extend_from_slice(&body[r..]);
        out.extend_from_slice(&body[..r]);
        let result = if sealed {
            self.open_sealed(&hdr, ec, &mut out[start..])
        } else {
            self.check_integrity(&hdr, ec, &out[start..])
        };
        let plain_len = match result {
            Ok(n) => n,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        };
        if seq != self.recv_seq {
            out.truncate(start);
            return bad(format!(
                "sequence number {seq}, expected {}: a replayed, reordered or lost token",
                self.recv_seq
            ));
        }
        self.recv_seq = self.recv_seq.wrapping_add(1);
        if sealed {
            out.copy_within(start + CONFOUNDER..start + CONFOUNDER + plain_len, start);
        }
        out.truncate(start + plain_len);
        Ok(sealed)
    }

    /// Decrypts the (un-rotated) body of a sealed token in place and checks its MAC and inner
    /// header; the plaintext's length (it starts after the confounder).
    fn open_sealed(
        &self,
        hdr: &[u8; HEADER],
        ec: usize,
        body: &mut [u8],
    ) -> Result<usize, SaslError> {
        let (cipher, mac) = body.split_at_mut(body.len() - self.recv.mac_len);
        if !self.recv.open(cipher, mac) {
            return Err(SaslError::Integrity(
                "Kerberos unwrap: the sealed token's MAC does not match (tampered, or another key)"
                    .into(),
            ));
        }
        let Some(plain_len) = cipher.len().checked_sub(CONFOUNDER + HEADER + ec) else {
            return Err(SaslError::Integrity(format!(
                "Kerberos unwrap: EC {ec} exceeds the sealed token's {} bytes of plaintext",
                cipher.len() - CONFOUNDER - HEADER
            )));
        };
        let inner = &cipher[cipher.len() - HEADER..];
        if inner[..6] != hdr[..6] || inner[8..] != hdr[8..] {
            return Err(SaslError::Integrity(
                "Kerberos unwrap: the sealed token's inner header differs from its outer one"
                    .into(),
            ));
        }
        Ok(plain_len)
    }

    /// Checks the checksum of an integrity-only token's (un-rotated) body; the plaintext's
    /// length.
    fn check_integrity(
        &self,
        hdr: &[u8; HEADER],
        ec: usize,
        body: &[u8],
    ) -> Result<usize, SaslError> {
        let mac_len = self.recv.mac_len;
        if ec != mac_len {
            return Err(SaslError::Integrity(format!(
                "Kerberos unwrap: an integrity token's EC is {ec}, not the checksum's {mac_len} \
                 bytes"
            )));
        }
        let (plain, sum) = body.split_at(body.len() - mac_len);
        let mut h = *hdr;
        h[4..8].fill(0);
        let want = self.recv.kc.tag(&[plain, &h]);
        if !bool::from(want[..mac_len].ct_eq(sum)) {
            return Err(SaslError::Integrity(
                "Kerberos unwrap: the token's checksum does not match (tampered, or another key)"
                    .into(),
            ));
        }
        Ok(plain.len())
    }
}

fn header(flags: u8, ec: u16, rrc: u16, seq: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..2].copy_from_slice(&TOK_ID_WRAP);
    h[2] = flags;
    h[3] = 0xff;
    h[4..6].copy_from_slice(&ec.to_be_bytes());
    h[6..8].copy_from_slice(&rrc.to_be_bytes());
    h[8..].copy_from_slice(&seq.to_be_bytes());
    h
}

#[cfg(test)]
mod tests;
