//! `UrlHash` and `ReplyHash`: Hadoop's `SecureShuffleUtils` with the job's shuffle secret as
//! the key. The algorithm is `hadoop.security.secret-manager.key-generator.algorithm`
//! (`HmacSHA1` by default, configurable since 3.5.0); the hash is standard Base64 with padding.
//!
//! - The request's hash covers `<bound port><path>?<raw query>` exactly as received (the port is
//!   the one this service listens on, never the `Host` header).
//! - The reply's hash covers the received `UrlHash` header value.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use subtle::ConstantTimeEq;

/// The HMACs a JCE `Mac.getInstance` name may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HmacAlgorithm {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Md5,
}

/// The longest MAC (SHA-512's 64 bytes).
pub const MAX_MAC: usize = 64;

fn mac_of<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]], out: &mut [u8; MAX_MAC]) -> usize {
    // HMAC takes a key of any length.
    let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length");
    for p in parts {
        m.update(p);
    }
    let tag = m.finalize().into_bytes();
    out[..tag.len()].copy_from_slice(&tag);
    tag.len()
}

impl HmacAlgorithm {
    /// The algorithm for a JCE name (`HmacSHA1`, `HmacSHA256`, …; JCE names are
    /// case-insensitive).
    pub fn from_java_name(name: &str) -> Option<HmacAlgorithm> {
        Some(match name.to_ascii_lowercase().as_str() {
            "hmacsha1" => HmacAlgorithm::Sha1,
            "hmacsha224" => HmacAlgorithm::Sha224,
            "hmacsha256" => HmacAlgorithm::Sha256,
            "hmacsha384" => HmacAlgorithm::Sha384,
            "hmacsha512" => HmacAlgorithm::Sha512,
            "hmacmd5" => HmacAlgorithm::Md5,
            _ => return None,
        })
    }

    /// The HMAC of `parts` concatenated, keyed with `key`: the tag in `out[..n]`, `n` returned.
    pub fn mac(self, key: &[u8], parts: &[&[u8]], out: &mut [u8; MAX_MAC]) -> usize {
        match self {
            HmacAlgorithm::Sha1 => mac_of::<Hmac<sha1::Sha1>>(key, parts, out),
            HmacAlgorithm::Sha224 => mac_of::<Hmac<sha2::Sha224>>(key, parts, out),
            HmacAlgorithm::Sha256 => mac_of::<Hmac<sha2::Sha256>>(key, parts, out),
            HmacAlgorithm::Sha384 => mac_of::<Hmac<sha2::Sha384>>(key, parts, out),
            HmacAlgorithm::Sha512 => mac_of::<Hmac<sha2::Sha512>>(key, parts, out),
            HmacAlgorithm::Md5 => mac_of::<Hmac<md5::Md5>>(key, parts, out),
        }
    }

    /// `UrlHash` as a Fetcher computes it: Base64(HMAC(secret, `<port><path>?<query>`)).
    pub fn url_hash(self, secret: &[u8], port: u16, path: &str, query: &str) -> String {
        let mut out = [0u8; MAX_MAC];
        let port = port.to_string();
        let n = self.mac(
            secret,
            &[port.as_bytes(), path.as_bytes(), b"?", query.as_bytes()],
            &mut out,
        );
        STANDARD.encode(&out[..n])
    }

    /// Whether `url_hash` (the received header) is the HMAC of the request target: Java decodes
    /// it leniently (commons-codec skips characters outside the alphabet), and so do we; the
    /// comparison is constant-time (Java's is not).
    pub fn verify(self, secret: &[u8], port: u16, path: &str, query: &str, url_hash: &str) -> bool {
        let mut expected = [0u8; MAX_MAC];
        let port = port.to_string();
        let n = self.mac(
            secret,
            &[port.as_bytes(), path.as_bytes(), b"?", query.as_bytes()],
            &mut expected,
        );
        let Some(got) = lenient_decode(url_hash) else {
            return false;
        };
        got.len() == n && bool::from(got.as_slice().ct_eq(&expected[..n]))
    }

    /// `ReplyHash`: Base64(HMAC(secret, the received `UrlHash` value)).
    pub fn reply_hash(self, secret: &[u8], url_hash: &str) -> String {
        let mut out = [0u8; MAX_MAC];
        let n = self.mac(secret, &[url_hash.as_bytes()], &mut out);
        STANDARD.encode(&out[..n])
    }
}

/// Base64 as commons-codec decodes it: characters outside the standard and URL-safe alphabets
/// are skipped, padding is optional. The header is bounded by the request's size limit.
fn lenient_decode(s: &str) -> Option<Vec<u8>> {
    let clean: Vec<u8> = s
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'))
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => b,
        })
        .collect();
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&clean)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
    const QUERY: &str = "job=job_1700000000000_0001&reduce=0&map=attempt_1700000000000_0001_m_000000_0,attempt_1700000000000_0001_m_000001_0";

    #[test]
    fn the_hashes_are_shuffle_md_s_vectors() {
        let h = HmacAlgorithm::Sha1.url_hash(&SECRET, 13562, "/mapOutput", QUERY);
        assert_eq!(h, "wXDoGto/qYcVUKhvWtlTyemFbz0=");
        assert!(HmacAlgorithm::Sha1.verify(&SECRET, 13562, "/mapOutput", QUERY, &h));
        assert!(!HmacAlgorithm::Sha1.verify(&SECRET, 13563, "/mapOutput", QUERY, &h));
        assert_eq!(
            HmacAlgorithm::Sha1.reply_hash(&SECRET, &h),
            "0goChIZfbA/N9aBdwsGaz3p1L7A="
        );
        // SHA-256 gives a 44-character hash
        assert_eq!(
            HmacAlgorithm::Sha256
                .url_hash(&SECRET, 13562, "/mapOutput", QUERY)
                .len(),
            44
        );
        assert_eq!(
            HmacAlgorithm::from_java_name("HMACSHA256"),
            Some(HmacAlgorithm::Sha256)
        );
        assert_eq!(HmacAlgorithm::from_java_name("HmacSHA3-256"), None);
    }

    #[test]
    fn garbage_hashes_do_not_verify() {
        for h in [
            "",
            "!!!!",
            "wXDoGto/qYcVUKhvWtlTyemFbz0",
            "AAAA",
            "wXDoGto/qYcVUKhvWtlTyemFbz0=AAAA",
        ] {
            let ok = HmacAlgorithm::Sha1.verify(&SECRET, 13562, "/mapOutput", QUERY, h);
            // without padding it is still the same bytes (commons-codec is lenient)
            assert_eq!(ok, h == "wXDoGto/qYcVUKhvWtlTyemFbz0", "{h}");
        }
    }
}
