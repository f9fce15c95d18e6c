//! `${name}` expansion in property values, Hadoop style.
//!
//! A reference is `${name}` where `name` has no `$`, `{`, `}` or whitespace; nested forms
//! such as `${a.${b}}` resolve the inner one first. `name` is looked up as:
//! 1. `env.VAR` → environment variable `VAR`; `env.VAR:-fallback` gives `fallback` when `VAR`
//!    is unset or empty, `env.VAR-fallback` when it is unset (as Hadoop 3);
//! 2. the Java system properties Hadoop configs lean on, emulated: `user.name` (`$USER`, else
//!    `$LOGNAME`), `user.home` (`$HOME`), `java.io.tmpdir` (`/tmp`). As in Java, these win
//!    over a configuration key of the same name;
//! 3. another configuration key (its raw value; that value's own references are expanded in
//!    the next pass).
//!
//! A reference nothing answers stays in the text verbatim. Each pass replaces every
//! reference it can; after [`MAX_DEPTH`] passes with references still being replaced (a
//! loop such as `a = ${b}`, `b = ${a}`), expansion fails, as Hadoop's "Variable substitution
//! depth too large: 20". Differences from Hadoop, both in the lenient direction: Hadoop counts
//! one substitution per pass (so a value with more than 20 references fails there) and stops
//! at the first unbound reference; we expand all bound references. An expansion longer than
//! [`MAX_LEN`] fails too, so that `a = ${b}${b}`, `b = ${c}${c}`, … cannot eat the memory.

/// The pass limit (Hadoop's `MAX_SUBST`).
pub const MAX_DEPTH: usize = 20;

/// The longest value an expansion may produce.
pub const MAX_LEN: usize = 1 << 20;

/// Why an expansion failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Still expanding after [`MAX_DEPTH`] passes.
    Depth,
    /// Longer than [`MAX_LEN`].
    TooLong,
}

/// Looks up `name` per the module docs, with `config` for step 3 and `env` for the
/// environment.
pub(crate) fn lookup(
    name: &str,
    config: &dyn Fn(&str) -> Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    if let Some(var) = name.strip_prefix("env.") {
        if let Some((var, fallback)) = var.split_once(":-") {
            return match env(var) {
                Some(v) if !v.is_empty() => Some(v),
                _ => Some(fallback.to_string()),
            };
        }
        if let Some((var, fallback)) = var.split_once('-') {
            return Some(env(var).unwrap_or_else(|| fallback.to_string()));
        }
        return env(var);
    }
    match name {
        "user.name" => env("USER").or_else(|| env("LOGNAME")),
        "user.home" => env("HOME"),
        "java.io.tmpdir" => Some("/tmp".to_string()),
        _ => None,
    }
    .or_else(|| config(name))
}

/// Expands `value`, resolving names with `resolve`.
pub fn expand(value: &str, resolve: &dyn Fn(&str) -> Option<String>) -> Result<String, Failure> {
    let mut cur = value.to_string();
    for _ in 0..=MAX_DEPTH {
        let (next, replaced) = one_pass(&cur, resolve)?;
        if !replaced {
            return Ok(next);
        }
        cur = next;
    }
    Err(Failure::Depth)
}

/// Replaces every innermost reference once. Returns the new text and whether anything was
/// replaced.
fn one_pass(s: &str, resolve: &dyn Fn(&str) -> Option<String>) -> Result<(String, bool), Failure> {
    let mut out = String::with_capacity(s.len());
    let mut replaced = false;
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let name_len = after
            .find(|c: char| c == '}' || c == '$' || c == '{' || c.is_whitespace())
            .unwrap_or(after.len());
        let closes = after[name_len..].starts_with('}');
        if name_len > 0 && closes {
            let name = &after[..name_len];
            match resolve(name) {
                Some(v) => {
                    out.push_str(&v);
                    replaced = true;
                }
                None => {
                    out.push_str("${");
                    out.push_str(name);
                    out.push('}');
                }
            }
            rest = &after[name_len + 1..];
        } else {
            // Not a reference here (e.g. the outer part of `${a${b}}`): keep the `$` and
            // look again from the next character.
            out.push('$');
            rest = &rest[start + 1..];
        }
        if out.len() > MAX_LEN {
            return Err(Failure::TooLong);
        }
    }
    out.push_str(rest);
    if out.len() > MAX_LEN {
        return Err(Failure::TooLong);
    }
    Ok((out, replaced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(map: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = map
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn simple_and_chained() {
        let r = with(&[("h", "rm1"), ("a", "${h}:8031"), ("b", "x${a}y")]);
        assert_eq!(expand("${h}:8031", &r).unwrap(), "rm1:8031");
        assert_eq!(expand("${b}", &r).unwrap(), "xrm1:8031y");
        assert_eq!(expand("no refs $ {x} $", &r).unwrap(), "no refs $ {x} $");
    }

    #[test]
    fn unbound_stays_and_others_expand() {
        let r = with(&[("h", "rm1")]);
        assert_eq!(expand("${nope}/${h}", &r).unwrap(), "${nope}/rm1");
        assert_eq!(expand("${ h}", &r).unwrap(), "${ h}");
        assert_eq!(expand("${}", &r).unwrap(), "${}");
        assert_eq!(expand("${h", &r).unwrap(), "${h");
    }

    #[test]
    fn nested_resolves_inner_first() {
        let r = with(&[("which", "b"), ("a.b", "found")]);
        assert_eq!(expand("${a.${which}}", &r).unwrap(), "found");
    }

    #[test]
    fn more_than_twenty_references_are_fine() {
        let r = with(&[("u", "me")]);
        let v = (0..36)
            .map(|i| format!("/d/{i}/${{u}}"))
            .collect::<Vec<_>>()
            .join(",");
        let out = expand(&v, &r).unwrap();
        assert_eq!(out.matches("/me").count(), 36);
    }

    #[test]
    fn loops_and_blowups_fail() {
        let r = with(&[("a", "${b}"), ("b", "${a}")]);
        assert_eq!(expand("${a}", &r), Err(Failure::Depth));
        let r = with(&[("s", "x${s}")]);
        assert_eq!(expand("${s}", &r), Err(Failure::Depth));
        // 2^20 doubling: too long long before the depth limit.
        let mut pairs: Vec<(String, String)> = (0..30)
            .map(|i| (format!("v{i}"), format!("${{v{}}}${{v{}}}", i + 1, i + 1)))
            .collect();
        pairs.push(("v30".into(), "0123456789".into()));
        let m: HashMap<String, String> = pairs.into_iter().collect();
        let r = move |k: &str| m.get(k).cloned();
        assert_eq!(expand("${v0}", &r), Err(Failure::TooLong));
        // A chain of exactly MAX_DEPTH references expands; one more does not.
        let chain = |n: usize| {
            let m: HashMap<String, String> = (0..n - 1)
                .map(|i| (format!("c{i}"), format!("${{c{}}}", i + 1)))
                .chain([(format!("c{}", n - 1), "end".to_string())])
                .collect();
            move |k: &str| m.get(k).cloned()
        };
        assert_eq!(expand("${c0}", &chain(MAX_DEPTH)).unwrap(), "end");
        assert_eq!(expand("${c0}", &chain(MAX_DEPTH + 1)), Err(Failure::Depth));
    }

    #[test]
    fn env_and_system_property_lookups() {
        let env = with(&[("USER", "hdfs"), ("EMPTY", ""), ("HOME", "/home/h")]);
        let conf = with(&[("user.name", "ignored"), ("k", "v")]);
        let l = |n: &str| lookup(n, &conf, &env);
        assert_eq!(l("env.USER").as_deref(), Some("hdfs"));
        assert_eq!(l("env.MISSING"), None);
        assert_eq!(l("env.MISSING:-fb").as_deref(), Some("fb"));
        assert_eq!(l("env.EMPTY:-fb").as_deref(), Some("fb"));
        assert_eq!(l("env.EMPTY-fb").as_deref(), Some(""));
        assert_eq!(l("env.MISSING-fb").as_deref(), Some("fb"));
        assert_eq!(
            l("user.name").as_deref(),
            Some("hdfs"),
            "system property wins"
        );
        assert_eq!(l("user.home").as_deref(), Some("/home/h"));
        assert_eq!(l("java.io.tmpdir").as_deref(), Some("/tmp"));
        assert_eq!(l("k").as_deref(), Some("v"));
        assert_eq!(l("nope"), None);
    }
}
