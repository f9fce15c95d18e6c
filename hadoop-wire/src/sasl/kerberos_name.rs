//! Kerberos principal names and `hadoop.security.auth_to_local`: how a server turns the principal
//! a client authenticated as (`nm/host@REALM`) into the short user name the rest of Hadoop sees
//! (`nm`), as Java's `KerberosName` does with `hadoop.security.auth_to_local.mechanism = hadoop`
//! (the default).
//!
//! A principal is `service[/host][@realm]`; more than one `/`, or a `/` in the realm, is malformed.
//! The rules are a whitespace-separated list, tried in order; the first that applies wins:
//!
//! - `DEFAULT`: a principal of the default realm maps to its first component
//!   (`joe@EXAMPLE.COM` → `joe`, `nn/host@EXAMPLE.COM` → `nn`).
//! - `RULE:[n:format](match)s/from/to/g/L`: applies to principals of exactly `n` components
//!   (realm not counted). `format` builds a string with `$0` = realm, `$1` = first component,
//!   `$2` = host; if `(match)` is given the whole string must match it; `s/from/to/` then
//!   replaces the first match of `from` (all with `g`), `$1` in `to` naming a group. `/L` lower-cases
//!   the result. Regexes are Rust `regex` syntax, which agrees with Java's on the
//!   patterns these rules use (no look-around or back-references).
//!
//! A name without a realm (`joe`) is returned unchanged. No rule applying is an error ("No rules
//! applied to …"), as is a result that still holds `/` or `@` ("Non-simple name …").

use regex::Regex;

/// A parsed principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosName {
    pub service: String,
    pub host: Option<String>,
    pub realm: Option<String>,
}

/// Why a name or rule was refused (Java: `IllegalArgumentException`, `NoMatchingRule`,
/// `BadFormatString`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("Malformed Kerberos name: {0}")]
    Malformed(String),
    #[error("Invalid rule: {0}")]
    InvalidRule(String),
    #[error("{0}")]
    NoMatchingRule(String),
    #[error("{0}")]
    BadFormat(String),
}

impl KerberosName {
    /// Parses `service[/host]@realm`, or a bare name without `@`.
    pub fn parse(name: &str) -> Result<KerberosName, NameError> {
        let bad = || NameError::Malformed(name.to_string());
        let Some((principal, realm)) = name.split_once('@') else {
            // Java: no match and no '@' → the whole text is the service name.
            return Ok(KerberosName {
                service: name.to_string(),
                host: None,
                realm: None,
            });
        };
        if realm.contains(['/', '@']) {
            return Err(bad());
        }
        let (service, host) = match principal.split_once('/') {
            Some((s, h)) if !h.contains('/') => (s, Some(h.to_string())),
            Some(_) => return Err(bad()),
            None => (principal, None),
        };
        Ok(KerberosName {
            service: service.to_string(),
            host,
            realm: Some(realm.to_string()),
        })
    }
}

impl std::fmt::Display for KerberosName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.service)?;
        if let Some(h) = &self.host {
            write!(f, "/{h}")?;
        }
        if let Some(r) = &self.realm {
            write!(f, "@{r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Rule {
    Default {
        lower: bool,
    },
    Rule {
        text: String,
        components: usize,
        format: String,
        matcher: Option<Regex>,
        /// `(from, to in Rust replacement syntax, global)`.
        subst: Option<(Regex, String, bool)>,
        lower: bool,
    },
}

/// `hadoop.security.auth_to_local` with the default realm it is evaluated against.
#[derive(Debug, Clone)]
pub struct AuthToLocal {
    rules: Vec<Rule>,
    default_realm: String,
}

/// Java's replacement syntax (`$1`, `\$`) in Rust's (`${1}`, `$$`).
fn java_replacement(to: &str) -> String {
    let mut out = String::with_capacity(to.len() + 8);
    let mut chars = to.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(o) => out.push(o),
                None => {}
            },
            '$' => {
                let mut n = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(*d);
                    chars.next();
                }
                if n.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{n}}}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

fn regex(text: &str, pat: &str, anchored: bool) -> Result<Regex, NameError> {
    let p = if anchored {
        format!("^(?:{pat})$")
    } else {
        pat.to_string()
    };
    Regex::new(&p).map_err(|e| NameError::InvalidRule(format!("{text}: {e}")))
}

/// One rule at the start of `s`: `(rule, rest)`.
fn parse_rule(s: &str) -> Result<(Rule, &str), NameError> {
    let invalid = || NameError::InvalidRule(s.to_string());
    let lower_suffix = |rest: &str| -> (bool, usize) {
        // Java's `/?(L)?` after the rule
        let (slash, r) = match rest.strip_prefix('/') {
            Some(r) => (1, r),
            None => (0, rest),
        };
        if r.starts_with('L') {
            (true, slash + 1)
        } else {
            (false, slash)
        }
    };
    if let Some(rest) = s.strip_prefix("DEFAULT") {
        let (lower, n) = lower_suffix(rest);
        return Ok((Rule::Default { lower }, &rest[n..]));
    }
    let Some(rest) = s.strip_prefix("RULE:[") else {
        return Err(invalid());
    };
    let (spec, mut rest) = rest.split_once(']').ok_or_else(invalid)?;
    let (n, format) = spec.split_once(':').ok_or_else(invalid)?;
    let components: usize = if n.is_empty() {
        0
    } else {
        n.parse().map_err(|_| invalid())?
    };
    let mut matcher = None;
    if let Some(r) = rest.strip_prefix('(') {
        let (m, r) = r.split_once(')').ok_or_else(invalid)?;
        matcher = Some(m);
        rest = r;
    }
    let mut subst = None;
    if let Some(r) = rest.strip_prefix("s/") {
        let (from, r) = r.split_once('/').ok_or_else(invalid)?;
        let (to, r) = r.split_once('/').ok_or_else(invalid)?;
        let (global, r) = match r.strip_prefix('g') {
            Some(r) => (true, r),
            None => (false, r),
        };
        subst = Some((from, to, global));
        rest = r;
    }
    let (lower, k) = lower_suffix(rest);
    let text_len = s.len() - rest.len() + k;
    let text = s[..text_len].to_string();
    let matcher = match matcher {
        Some(m) => Some(regex(&text, m, true)?),
        None => None,
    };
    let subst = match subst {
        Some((from, to, g)) => Some((regex(&text, from, false)?, java_replacement(to), g)),
        None => None,
    };
    Ok((
        Rule::Rule {
            text,
            components,
            format: format.to_string(),
            matcher,
            subst,
            lower,
        },
        &rest[k..],
    ))
}

/// `format` with `$n` replaced by `params[n]`.
fn replace_parameters(format: &str, params: &[&str]) -> Result<String, NameError> {
    let mut out = String::new();
    let mut rest = format;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let num = &after[..digits];
        let idx: usize = num.parse().map_err(|_| {
            NameError::BadFormat(format!("bad format in username mapping in {num}"))
        })?;
        let p = params.get(idx).ok_or_else(|| {
            NameError::BadFormat(format!(
                "index {idx} from {format} is outside of the valid range 0 to {}",
                params.len() - 1
            ))
        })?;
        out.push_str(p);
        rest = &after[digits..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Rule {
    fn apply(&self, params: &[&str], default_realm: &str) -> Result<Option<String>, NameError> {
        let (result, lower) = match self {
            Rule::Default { lower } => (
                (params[0] == default_realm).then(|| params[1].to_string()),
                *lower,
            ),
            Rule::Rule {
                components,
                format,
                matcher,
                subst,
                lower,
                ..
            } => {
                if params.len() - 1 != *components {
                    return Ok(None);
                }
                let base = replace_parameters(format, params)?;
                if matcher.as_ref().is_some_and(|m| !m.is_match(&base)) {
                    return Ok(None);
                }
                let r = match subst {
                    None => base,
                    Some((from, to, true)) => from.replace_all(&base, to.as_str()).into_owned(),
                    Some((from, to, false)) => from.replace(&base, to.as_str()).into_owned(),
                };
                (Some(r), *lower)
            }
        };
        if let Some(r) = &result {
            if r.contains(['/', '@']) {
                return Err(NameError::NoMatchingRule(format!(
                    "Non-simple name {r} after auth_to_local rule {self}"
                )));
            }
        }
        Ok(result.map(|r| if lower { r.to_lowercase() } else { r }))
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Default { lower } => write!(f, "DEFAULT{}", if *lower { "/L" } else { "" }),
            Rule::Rule { text, .. } => f.write_str(text),
        }
    }
}

impl AuthToLocal {
    /// Parses the rules (`hadoop.security.auth_to_local`; Java's default when unset is
    /// `DEFAULT`) for principals whose default realm is `default_realm`.
    pub fn new(rules: &str, default_realm: &str) -> Result<AuthToLocal, NameError> {
        let mut out = Vec::new();
        let mut rest = rules.trim_start();
        while !rest.is_empty() {
            let (r, tail) = parse_rule(rest)?;
            if !tail.is_empty() && !tail.starts_with(char::is_whitespace) {
                return Err(NameError::InvalidRule(rest.to_string()));
            }
            out.push(r);
            rest = tail.trim_start();
        }
        Ok(AuthToLocal {
            rules: out,
            default_realm: default_realm.to_string(),
        })
    }

    /// The `DEFAULT` rule alone.
    pub fn default_rules(default_realm: &str) -> AuthToLocal {
        AuthToLocal {
            rules: vec![Rule::Default { lower: false }],
            default_realm: default_realm.to_string(),
        }
    }

    /// Java's `KerberosName.getShortName`.
    pub fn short_name(&self, principal: &str) -> Result<String, NameError> {
        let name = KerberosName::parse(principal)?;
        let Some(realm) = name.realm.as_deref() else {
            return Ok(name.service);
        };
        let mut params = vec![realm, name.service.as_str()];
        if let Some(h) = name.host.as_deref() {
            params.push(h);
        }
        for r in &self.rules {
            if let Some(s) = r.apply(&params, &self.default_realm)? {
                return Ok(s);
            }
        }
        Err(NameError::NoMatchingRule(format!(
            "No rules applied to {name}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The cases of Hadoop's TestKerberosName (default realm EXAMPLE.COM there too).
    const RULES: &str = "RULE:[1:$1@$0](.*@YAHOO\\.COM)s/@.*//\n\
                         RULE:[2:$1](johndoe)s/^.*$/guest/\n\
                         RULE:[2:$1;$2](^.*;admin$)s/;admin$//\n\
                         RULE:[2:$2](root)\n\
                         DEFAULT";

    fn rules() -> AuthToLocal {
        AuthToLocal::new(RULES, "EXAMPLE.COM").unwrap()
    }

    #[test]
    fn rules_translate_as_hadoop_does() {
        let r = rules();
        for (from, to) in [
            ("omalley@EXAMPLE.COM", "omalley"),
            ("hdfs/10.0.0.1@EXAMPLE.COM", "hdfs"),
            ("oom@YAHOO.COM", "oom"),
            ("johndoe/zoo@FOO.COM", "guest"),
            ("joe/admin@FOO.COM", "joe"),
            ("joe/root@FOO.COM", "root"),
        ] {
            assert_eq!(r.short_name(from).unwrap(), to, "{from}");
        }
    }

    #[test]
    fn anti_patterns_are_refused() {
        let r = rules();
        for bad in ["owen/owen/owen@FOO.COM", "owen@foo/bar.com"] {
            assert!(
                matches!(r.short_name(bad), Err(NameError::Malformed(_))),
                "{bad}"
            );
            assert!(KerberosName::parse(bad).is_err());
        }
        for untranslatable in ["foo@ACME.COM", "root/joe@FOO.COM"] {
            let e = r.short_name(untranslatable).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("No rules applied to {untranslatable}")
            );
        }
    }

    #[test]
    fn lower_case_suffix() {
        let r = AuthToLocal::new(
            "RULE:[1:$1]/L\n\
             RULE:[2:$1]/L\n\
             RULE:[2:$1;$2](^.*;admin$)s/;admin$///L\n\
             RULE:[2:$1;$2](^.*;guest$)s/;guest$//g/L\n\
             DEFAULT",
            "EXAMPLE.COM",
        )
        .unwrap();
        for (from, to) in [
            ("Joe@FOO.COM", "joe"),
            ("Joe/root@FOO.COM", "joe"),
            ("Joe/admin@FOO.COM", "joe"),
            ("Joe/guestguest@FOO.COM", "joe"),
        ] {
            assert_eq!(r.short_name(from).unwrap(), to, "{from}");
        }
    }

    #[test]
    fn parsing_names() {
        let n = KerberosName::parse("HTTP/abc.com@EXAMPLE.COM").unwrap();
        assert_eq!(
            (n.service.as_str(), n.host.as_deref(), n.realm.as_deref()),
            ("HTTP", Some("abc.com"), Some("EXAMPLE.COM"))
        );
        assert_eq!(n.to_string(), "HTTP/abc.com@EXAMPLE.COM");
        let n = KerberosName::parse("foo@EXAMPLE.COM").unwrap();
        assert_eq!((n.host, n.realm.as_deref()), (None, Some("EXAMPLE.COM")));
        assert_eq!(rules().short_name("plain").unwrap(), "plain", "no realm");
    }

    #[test]
    fn default_maps_the_default_realm_only() {
        let r = AuthToLocal::default_rules("EXAMPLE.COM");
        assert_eq!(r.short_name("nm/localhost@EXAMPLE.COM").unwrap(), "nm");
        assert_eq!(r.short_name("client@EXAMPLE.COM").unwrap(), "client");
        assert!(r.short_name("client@OTHER.ORG").is_err());
        let parsed = AuthToLocal::new("  DEFAULT  ", "EXAMPLE.COM").unwrap();
        assert_eq!(parsed.short_name("a/b@EXAMPLE.COM").unwrap(), "a");
    }

    #[test]
    fn bad_rules_and_non_simple_results() {
        for bad in [
            "RULE:[1:$1",
            "RULE:[x:$1]",
            "RULE:[1:$1](unclosed",
            "RULE:[1:$1]s/a/b",
            "DEFAULTX",
            "nonsense",
            "RULE:[1:$1]([)",
        ] {
            assert!(
                matches!(AuthToLocal::new(bad, "R"), Err(NameError::InvalidRule(_))),
                "{bad}"
            );
        }
        // a rule whose result is still a principal
        let r = AuthToLocal::new("RULE:[1:$1@$0]", "R").unwrap();
        let e = r.short_name("a@R").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Non-simple name a@R after auth_to_local rule RULE:[1:$1@$0]"
        );
        // $3 of a two-component name
        let r = AuthToLocal::new("RULE:[2:$3]", "R").unwrap();
        assert!(matches!(
            r.short_name("a/b@R"),
            Err(NameError::BadFormat(_))
        ));
        // a replacement naming a group, Java style, followed by a letter
        let r = AuthToLocal::new("RULE:[1:$1](.*)s/(.*)-x/$1y/", "R").unwrap();
        assert_eq!(r.short_name("joe-x@R").unwrap(), "joey");
    }
}
