//! The `name=value` lists of challenges and responses, parsed as the JDK's
//! `DigestMD5Base.parseDirectives` parses them.
//!
//! What the JDK accepts, and so this parser: values quoted or not; `\` escapes any byte inside
//! quotes; LWS (any of CR, LF, SP, HT) around names, `=` and separators, and LWS alone also ends
//! an unquoted or quoted value (so `a=1 b=2` is two directives); empty elements (`,,`); a
//! trailing name without `=` is a directive with an empty value. Names are matched
//! case-insensitively with Java's `equalsIgnoreCase`; unknown names are ignored; a known name
//! that appears twice is an error, except `realm` in a challenge.
//!
//! The parser is linear in the input, borrows every value that has no escape, and never
//! panics. Length caps ([`MAX_CHALLENGE_LENGTH`](super::MAX_CHALLENGE_LENGTH),
//! [`MAX_RESPONSE_LENGTH`](super::MAX_RESPONSE_LENGTH)) are the mechanisms' job, before parsing.

use std::borrow::Cow;

use super::{java_eq_ignore_case, lossy};
use crate::sasl::SaslError;

/// One directive, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive<'a> {
    /// The name as sent.
    pub name: &'a [u8],
    /// The value: quotes removed, escapes resolved. Borrowed unless it had an escape.
    pub value: Cow<'a, [u8]>,
}

impl Directive<'_> {
    /// Whether this directive's name is `name` (Java `equalsIgnoreCase`).
    pub fn is(&self, name: &str) -> bool {
        name_matches(self.name, name)
    }
}

/// The directives of a challenge or response; see [`directives`].
#[derive(Debug, Clone)]
pub struct Directives<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
}

/// Iterates the directives of `buf`. After the first error the iterator ends.
pub fn directives(buf: &[u8]) -> Directives<'_> {
    Directives {
        buf,
        pos: skip_lws(buf, 0),
        done: false,
    }
}

fn is_lws(b: u8) -> bool {
    matches!(b, b'\r' | b'\n' | b' ' | b'\t')
}

fn skip_lws(buf: &[u8], mut i: usize) -> usize {
    while i < buf.len() && is_lws(buf[i]) {
        i += 1;
    }
    i
}

fn err(msg: String) -> SaslError {
    SaslError::Sasl(msg)
}

impl<'a> Directives<'a> {
    fn parse_next(&mut self) -> Result<Option<Directive<'a>>, SaslError> {
        let buf = self.buf;
        let mut i = self.pos;
        // The name: up to `=`, LWS or `,`. Empty elements are skipped.
        let key_start = loop {
            if i >= buf.len() {
                return Ok(None);
            }
            if buf[i] == b',' {
                i = skip_lws(buf, i + 1);
            } else {
                break i;
            }
        };
        let key_end = loop {
            if i >= buf.len() {
                // A trailing name without `=`: the JDK extracts it with an empty value.
                self.pos = i;
                return Ok(Some(Directive {
                    name: &buf[key_start..i],
                    value: Cow::Borrowed(&[]),
                }));
            }
            match buf[i] {
                b',' => {
                    return Err(err(format!(
                        "Directive key contains a ',':{}",
                        lossy(&buf[key_start..i])
                    )))
                }
                b'=' if i == key_start => return Err(err("Empty directive key".into())),
                b'=' => break i,
                b if is_lws(b) => {
                    let end = i;
                    i = skip_lws(buf, i + 1);
                    if i >= buf.len() || buf[i] != b'=' {
                        return Err(err(format!(
                            "'=' expected after key: {}",
                            lossy(&buf[key_start..end])
                        )));
                    }
                    break end;
                }
                _ => i += 1,
            }
        };
        let name = &buf[key_start..key_end];
        // `buf[i]` is `=`.
        i = skip_lws(buf, i + 1);
        if i >= buf.len() {
            return Err(err(format!("Valueless directive found: {}", lossy(name))));
        }
        let value = if buf[i] == b'"' {
            i += 1;
            let start = i;
            let mut owned: Option<Vec<u8>> = None;
            loop {
                if i >= buf.len() {
                    let v = owned.as_deref().unwrap_or(&buf[start..i]);
                    return Err(unmatched(name, v));
                }
                match buf[i] {
                    b'\\' => {
                        let v = owned.get_or_insert_with(|| buf[start..i].to_vec());
                        i += 1;
                        if i >= buf.len() {
                            return Err(unmatched(name, v));
                        }
                        v.push(buf[i]);
                        i += 1;
                    }
                    b'"' => {
                        let value = match owned {
                            Some(v) => Cow::Owned(v),
                            None => Cow::Borrowed(&buf[start..i]),
                        };
                        i += 1;
                        if i < buf.len() && !is_lws(buf[i]) && buf[i] != b',' {
                            return Err(err(format!(
                                "Expecting comma or linear whitespace after quoted string: \"{}\"",
                                lossy(&value)
                            )));
                        }
                        break value;
                    }
                    b => {
                        if let Some(v) = owned.as_mut() {
                            v.push(b);
                        }
                        i += 1;
                    }
                }
            }
        } else {
            let start = i;
            while i < buf.len() && !is_lws(buf[i]) && buf[i] != b',' {
                i += 1;
            }
            Cow::Borrowed(&buf[start..i])
        };
        // `buf[i]` is the separator (LWS or `,`), or the input ended.
        self.pos = if i < buf.len() {
            skip_lws(buf, i + 1)
        } else {
            i
        };
        Ok(Some(Directive { name, value }))
    }
}

fn unmatched(name: &[u8], value: &[u8]) -> SaslError {
    err(format!(
        "Unmatched quote found for directive: {} with value: {}",
        lossy(name),
        lossy(value)
    ))
}

impl<'a> Iterator for Directives<'a> {
    type Item = Result<Directive<'a>, SaslError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.parse_next() {
            Ok(Some(d)) => Some(Ok(d)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Java `equalsIgnoreCase` of a name as sent (decoded as UTF-8, the platform charset of current
/// JDKs) with one of the mechanism's names.
pub(crate) fn name_matches(key: &[u8], name: &str) -> bool {
    if key.is_ascii() {
        return key.eq_ignore_ascii_case(name.as_bytes());
    }
    java_eq_ignore_case(&lossy(key), name)
}

/// The values of the directives a mechanism knows, by index into its key table (the JDK's
/// `valueTable`), plus every `realm` when a challenge repeats it (`realmChoices`).
pub(crate) struct Table<'a, const N: usize> {
    pub values: [Option<Cow<'a, [u8]>>; N],
    pub realm_choices: Vec<Cow<'a, [u8]>>,
}

impl<'a, const N: usize> Table<'a, N> {
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.values.get(i).and_then(|v| v.as_deref())
    }
}

/// Parses `buf` into a table of `keys`. A repeated known directive is an error, except the one
/// at `multi` (the client's `realm`), whose values are collected in `realm_choices`.
pub(crate) fn parse_table<'a, const N: usize>(
    buf: &'a [u8],
    keys: &[&str; N],
    multi: Option<usize>,
) -> Result<Table<'a, N>, SaslError> {
    let mut table = Table {
        values: std::array::from_fn(|_| None),
        realm_choices: Vec::new(),
    };
    for d in directives(buf) {
        let d = d?;
        let Some(i) = keys.iter().position(|k| d.is(k)) else {
            continue;
        };
        match &table.values[i] {
            None => table.values[i] = Some(d.value),
            Some(first) if multi == Some(i) => {
                if table.realm_choices.is_empty() {
                    table.realm_choices.push(first.clone());
                }
                table.realm_choices.push(d.value);
            }
            Some(_) => {
                return Err(err(format!(
                    "DIGEST-MD5: peer sent more than one {} directive: {}",
                    lossy(d.name),
                    lossy(&d.value)
                )))
            }
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(buf: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
        directives(buf)
            .map(|d| {
                d.map(|d| (lossy(d.name).into_owned(), d.value.into_owned()))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn jdk_challenge_parses_in_order() {
        let c = br#"realm="default",nonce="s8nE6N/4aX1r+INbbvNEl5g9lTopELbMHF+UcSs+",qop="auth-conf,auth-int,auth",charset=utf-8,cipher="3des,rc4,des,rc4-56,rc4-40",algorithm=md5-sess"#;
        assert_eq!(
            all(c).unwrap(),
            pairs(&[
                ("realm", "default"),
                ("nonce", "s8nE6N/4aX1r+INbbvNEl5g9lTopELbMHF+UcSs+"),
                ("qop", "auth-conf,auth-int,auth"),
                ("charset", "utf-8"),
                ("cipher", "3des,rc4,des,rc4-56,rc4-40"),
                ("algorithm", "md5-sess"),
            ])
        );
    }

    #[test]
    fn lws_escapes_empty_elements_and_trailing_names() {
        assert_eq!(
            all(b"  a = \"x\\\"y\\\\z\" ,, b=1\tc=\"\"\r\n, d").unwrap(),
            pairs(&[("a", "x\"y\\z"), ("b", "1"), ("c", ""), ("d", "")])
        );
        assert_eq!(all(b"a=,b=2").unwrap(), pairs(&[("a", ""), ("b", "2")]));
        assert_eq!(all(b"").unwrap(), pairs(&[]));
        assert_eq!(all(b" , ,").unwrap(), pairs(&[]));
        // A quote inside an unquoted value is just a byte.
        assert_eq!(all(b"a=b\"c").unwrap(), pairs(&[("a", "b\"c")]));
    }

    #[test]
    fn escaped_value_is_owned_plain_value_borrowed() {
        let mut it = directives(b"a=\"plain\",b=\"e\\scaped\"");
        assert!(matches!(
            it.next(),
            Some(Ok(Directive {
                value: Cow::Borrowed(b"plain"),
                ..
            }))
        ));
        match it.next() {
            Some(Ok(Directive {
                value: Cow::Owned(v),
                ..
            })) => assert_eq!(v, b"escaped"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jdk_error_texts() {
        let e = |b: &[u8]| all(b).unwrap_err();
        assert_eq!(e(b"ab,c=1"), "Directive key contains a ',':ab");
        assert_eq!(e(b"=1"), "Empty directive key");
        assert_eq!(e(b"a="), "Valueless directive found: a");
        assert_eq!(e(b"a=  "), "Valueless directive found: a");
        assert_eq!(e(b"a b=1"), "'=' expected after key: a");
        assert_eq!(e(b"a "), "'=' expected after key: a");
        assert_eq!(
            e(b"a=\"xy"),
            "Unmatched quote found for directive: a with value: xy"
        );
        assert_eq!(
            e(b"a=\"x\\y\\"),
            "Unmatched quote found for directive: a with value: xy"
        );
        assert_eq!(
            e(b"a=\"xy\"z"),
            "Expecting comma or linear whitespace after quoted string: \"xy\""
        );
    }

    #[test]
    fn table_rejects_duplicates_but_collects_realms() {
        const KEYS: [&str; 2] = ["realm", "nonce"];
        let t = parse_table(b"REALM=a,x=1,x=2,realm=\"b\",Nonce=n", &KEYS, Some(0)).unwrap();
        assert_eq!(t.get(0), Some(&b"a"[..]));
        assert_eq!(t.get(1), Some(&b"n"[..]));
        assert_eq!(
            t.realm_choices,
            vec![Cow::Borrowed(&b"a"[..]), Cow::Borrowed(&b"b"[..])]
        );
        let e = parse_table(b"nonce=1,NONCE=2", &KEYS, Some(0))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "DIGEST-MD5: peer sent more than one NONCE directive: 2"
        );
        let e = parse_table(b"realm=1,realm=2", &KEYS, None).err().unwrap();
        assert_eq!(
            e.to_string(),
            "DIGEST-MD5: peer sent more than one realm directive: 2"
        );
    }

    #[test]
    fn names_match_as_java_equals_ignore_case() {
        assert!(name_matches(b"UserName", "username"));
        // U+017F LATIN SMALL LETTER LONG S upper-cases to 'S' in Java.
        assert!(name_matches("u\u{17f}ername".as_bytes(), "username"));
        assert!(!name_matches(b"user", "username"));
        assert!(!name_matches(b"\xff", "realm"));
    }
}
