//! The delegation-token secret manager against Hadoop's own: the peer's `TokenCheck dt` runs a
//! real 3.5.0 `AbstractDelegationTokenSecretManager` (HDFS identifiers, default intervals) in a
//! JVM whose zone is Asia/Kolkata (+0530), prints its keys, one minted token and the class and
//! text of every refusal; we rebuild the same manager from those keys and must mint the same
//! identifier bytes and password, print the same `toString`/`formatTime`, and refuse with the
//! same class and text.

use std::collections::HashMap;

use hadoop_wire::entropy::{Entropy, EntropyError};
use hadoop_wire::token::delegation::{
    format_time, format_token_id, identifier_to_string, DelegationConfig,
    DelegationTokenSecretManager,
};
use hadoop_wire::token::{
    DelegationIdentifier as _, DelegationTokenIdentifier, Token, TokenError, TokenIdentifier,
};

/// Hands out the bytes Java's keys were made of, in order.
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

const KOLKATA: i32 = 330;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Runs `TokenCheck dt` and returns its lines by name (a name may repeat).
fn java_dt(times: &[i64]) -> HashMap<String, Vec<Vec<String>>> {
    let build = peer_harness::build::ensure_built().expect("peer build");
    let list: Vec<String> = times.iter().map(|t| t.to_string()).collect();
    let out = build
        .java_command("hotpath.peer.TokenCheck")
        .env("JAVA_TOOL_OPTIONS", "-Duser.timezone=Asia/Kolkata")
        .arg("dt")
        .arg(list.join(","))
        .output()
        .expect("run java");
    assert!(
        out.status.success(),
        "TokenCheck failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: HashMap<String, Vec<Vec<String>>> = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut f = line.split('\t').map(str::to_string);
        let name = f.next().unwrap();
        lines.entry(name).or_default().push(f.collect());
    }
    lines
}

fn one<'a>(lines: &'a HashMap<String, Vec<Vec<String>>>, name: &str) -> &'a [String] {
    &lines.get(name).unwrap_or_else(|| panic!("no {name} line"))[0]
}

/// Java's (class, message) of a refusal.
fn refusal<'a>(lines: &'a HashMap<String, Vec<Vec<String>>>, name: &str) -> (&'a str, &'a str) {
    let f = one(lines, name);
    (f[0].as_str(), f.get(1).map_or("", String::as_str))
}

fn ours(e: TokenError) -> (String, String) {
    (e.java_class().to_string(), e.to_string())
}

fn same(
    lines: &HashMap<String, Vec<Vec<String>>>,
    name: &str,
    got: Result<impl std::fmt::Debug, TokenError>,
) {
    let (class, text) = refusal(lines, name);
    let (c, t) = ours(got.expect_err(name));
    assert_eq!((c.as_str(), t.as_str()), (class, text), "{name}");
}

#[test]
fn delegation_tokens_match_hadoops_manager() {
    let times = [0, 1_711_242_400_403, -1, 951_782_400_000, 4_102_444_800_123];
    let j = java_dt(&times);

    // Time.formatTime in the JVM's zone.
    for t in &j["time"] {
        let ms: i64 = t[0].parse().unwrap();
        assert_eq!(format_time(ms, KOLKATA), t[1], "formatTime({ms})");
    }
    assert_eq!(j["time"].len(), times.len());

    // The manager, rebuilt from Java's two keys (start + the remover's first roll).
    let keys = &j["key"];
    assert_eq!(
        keys.iter().map(|k| k[0].as_str()).collect::<Vec<_>>(),
        ["1", "2"]
    );
    let mut bytes = hex(&keys[0][1]);
    bytes.extend(hex(&keys[1][1]));
    let tok = one(&j, "token");
    let java_id = DelegationTokenIdentifier::parse(&hex(&tok[0])).unwrap();
    let issue = java_id.issue_date();
    let cfg = DelegationConfig {
        utc_offset_minutes: KOLKATA,
        ..DelegationConfig::default()
    };
    let mut m = DelegationTokenSecretManager::started(cfg, &mut Fixed(bytes), issue).unwrap();
    assert_eq!(m.current_key().unwrap().key_id, 2);

    // Same identifier bytes, same password, same toString.
    let (id, token) = m.create_token("alice", "yarn", "oozie", issue).unwrap();
    assert_eq!(token.identifier, hex(&tok[0]), "identifier bytes");
    assert_eq!(token.password, hex(&tok[1]), "password");
    assert_eq!(
        identifier_to_string(&id).as_deref(),
        Some(one(&j, "toString")[0].as_str())
    );

    // Every refusal: class and text.
    let unknown = DelegationTokenIdentifier::new("bob", "yarn", "carol", 0, 0, 999, 0);
    same(&j, "unknown", m.retrieve_password(&unknown, issue));
    same(&j, "wrong-password", m.verify_token(&id, &[0; 20], issue));
    same(&j, "wrong-renewer", m.renew_token(&token, "mallory", issue));
    let forged = Token {
        password: vec![0; 20],
        ..token.clone()
    };
    same(
        &j,
        "renew-wrong-password",
        m.renew_token(&forged, "yarn", issue),
    );

    let no_renewer =
        DelegationTokenIdentifier::parse(&hex(&one(&j, "no-renewer-token")[0])).unwrap();
    let nr = Token::for_identifier(&no_renewer, &[0; 20], "");
    same(
        &j,
        "renew-no-renewer",
        m.renew_token(&nr, "", no_renewer.issue_date()),
    );

    let alien = DelegationTokenIdentifier::new("alice", "yarn", "", 1, i64::MAX / 2, 5, 77);
    let at = Token::for_identifier(&alien, &[0; 20], "");
    same(&j, "renew-unknown-key", m.renew_token(&at, "yarn", issue));

    // Past the max date: Java's "currentTime" is its own clock; the rest must be equal.
    let old = DelegationTokenIdentifier::new(
        "alice",
        "yarn",
        "",
        1_711_242_400_403,
        1_711_847_200_403,
        1,
        2,
    );
    let ot = Token::for_identifier(&old, &[0; 20], "");
    let (class, text) = refusal(&j, "renew-past-max");
    let (c, t) = ours(m.renew_token(&ot, "yarn", issue).unwrap_err());
    assert_eq!(c, class);
    let cut = |s: &str| s[..s.rfind("currentTime: ").unwrap() + 13].to_string();
    assert_eq!(cut(&t), cut(text));
    assert_eq!(t.len(), text.len(), "{t}\n{text}");
    assert!(text.ends_with("+0530"));

    same(&j, "cancel-stranger", m.cancel_token(&token, "mallory"));
    assert_eq!(one(&j, "renew")[0], "ok");
    assert!(m.renew_token(&token, "yarn", issue).is_ok());
    assert_eq!(one(&j, "cancel-renewer"), ["ok", "1"]);
    assert_eq!(m.cancel_token(&token, "yarn").unwrap().sequence_number(), 1);
    same(&j, "cancel-again", m.cancel_token(&token, "alice"));
    same(&j, "renew-cancelled", m.renew_token(&token, "yarn", issue));
    let ownerless = DelegationTokenIdentifier::new("", "yarn", "", 0, 0, 8, 0);
    let ol = Token::for_identifier(&ownerless, &[0; 20], "");
    same(&j, "cancel-ownerless", m.cancel_token(&ol, "yarn"));
    assert_eq!(format_token_id(&ownerless), "( SequenceNumber=8 )");
}

#[test]
fn expired_token_text_matches_hadoop() {
    let j = java_dt(&[0]);
    let q = DelegationTokenIdentifier::parse(&hex(&one(&j, "expired-token")[0])).unwrap();
    let cfg = DelegationConfig {
        renew_interval_ms: 1,
        utc_offset_minutes: KOLKATA,
        ..DelegationConfig::default()
    };
    let mut m = DelegationTokenSecretManager::started(
        cfg,
        &mut hadoop_wire::entropy::SeededEntropy(3),
        q.issue_date(),
    )
    .unwrap();
    let (id, _) = m
        .create_token("alice", "yarn", "oozie", q.issue_date())
        .unwrap();
    assert_eq!(id.bytes(), q.bytes());
    let (class, text) = refusal(&j, "expired");
    let (c, t) = ours(m.retrieve_password(&id, q.issue_date() + 2).unwrap_err());
    assert_eq!(c, class);
    // "Token oozie has expired, current time: <Java's now> expected renewal time: <renew>"
    let split = |s: &str| {
        let (a, b) = s.split_once(" expected renewal time: ").unwrap();
        (
            a[..a.rfind(": ").unwrap()].to_string(),
            a.len(),
            b.to_string(),
        )
    };
    assert_eq!(split(&t), split(text), "{t}\n{text}");
}
