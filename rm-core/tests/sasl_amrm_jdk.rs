//! AMRMTokens our manager mints against Hadoop's own arithmetic: the peer's `TokenCheck amrm`
//! builds the same `AMRMTokenIdentifier` with Hadoop 3.5.0's classes and computes
//! `SecretManager.createPassword` over its bytes with the same raw key. Identifier bytes and
//! password must be equal, before and after a key roll (when tokens are minted with the next
//! key).

use hadoop_wire::entropy::{Entropy, EntropyError};
use hadoop_wire::token::{AmrmTokenIdentifier, TokenIdentifier};
use hadoop_wire::yarn::ids::{AppId, AttemptId};
use rm_core::amrm_token::AmrmTokenSecretManager;

/// Hands out fixed bytes in order: the key serial, then the key bytes.
struct Fixed(Vec<u8>);

impl Entropy for Fixed {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        if self.0.len() < buf.len() {
            return Err(EntropyError(std::io::Error::other(
                "fixed entropy exhausted",
            )));
        }
        let rest = self.0.split_off(buf.len());
        buf.copy_from_slice(&self.0);
        self.0 = rest;
        Ok(())
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Java's (identifier hex, password hex, kind, user) for this attempt, key and key id.
fn java_amrm(key: &[u8], a: &AttemptId, key_id: i32) -> Vec<String> {
    let build = peer_harness::build::ensure_built().expect("peer build");
    let out = build
        .java_command("hotpath.peer.TokenCheck")
        .args(["amrm", &hex(key)])
        .arg(a.app.cluster_timestamp.to_string())
        .arg(a.app.id.to_string())
        .arg(a.attempt.to_string())
        .arg(key_id.to_string())
        .output()
        .expect("run java");
    assert!(
        out.status.success(),
        "TokenCheck failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_once('\t').expect("name\tvalue").1.to_string())
        .collect()
}

#[test]
fn minted_amrm_tokens_equal_hadoops_password() {
    const ROLL: u64 = 10_000;
    let key1 = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
    let key2 = [0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10];
    // Serial 0x2a (key id 42), key 1; then at the roll key 2 (id 43).
    let mut entropy = Fixed([&[0x2a, 0, 0, 0][..], &key1, &key2].concat());
    let mut m = AmrmTokenSecretManager::new(&mut entropy, 0, ROLL, 3_000, 16).unwrap();
    let attempt = AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 5,
        },
        attempt: 1,
    };

    let t = m.create_and_get_amrm_token(attempt).unwrap();
    let j = java_amrm(&key1, &attempt, 42);
    assert_eq!(hex(&t.identifier), j[0], "identifier bytes");
    assert_eq!(hex(&t.password), j[1], "password");
    assert_eq!(t.kind, j[2]);
    let id = AmrmTokenIdentifier::parse(&t.identifier).unwrap();
    assert_eq!(id.user().as_deref(), Some(j[3].as_str()));

    // After a roll the manager mints with the next key (Java's getMasterKey()).
    assert!(m.tick(&mut entropy, ROLL).unwrap());
    assert_eq!(m.next_key().map(|k| k.key_id), Some(43));
    let t2 = m.create_and_get_amrm_token(attempt).unwrap();
    let j2 = java_amrm(&key2, &attempt, 43);
    assert_eq!(hex(&t2.identifier), j2[0]);
    assert_eq!(hex(&t2.password), j2[1]);
    // And both verify.
    for t in [&t, &t2] {
        let id = AmrmTokenIdentifier::parse(&t.identifier).unwrap();
        assert_eq!(m.retrieve_password(&id).unwrap().to_vec(), t.password);
    }
}
