//! [`Configuration`]: site files layered over the defaults table, flags over both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::defaults::{self, DefaultValue, DEFAULTS};
use crate::substitution::{self, Failure};
use crate::value::{self, HostPort, TimeUnit};
use crate::Error;

/// The site files, in load order: a later file overrides an earlier one (unless the earlier
/// one marked the key `<final>`).
pub const SITE_FILES: [&str; 3] = ["core-site.xml", "hdfs-site.xml", "yarn-site.xml"];

/// Largest site file we read.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Where a key's current value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The defaults table ([`crate::defaults::DEFAULTS`]).
    Default,
    /// A site file (or a named XML string given to [`Configuration::add_resource_str`]).
    Resource(PathBuf),
    /// [`Configuration::set`] (command-line flags).
    Set,
}

#[derive(Debug, Clone)]
struct Prop {
    value: String,
    source: Source,
    is_final: bool,
}

/// Hadoop configuration: the site files under `HADOOP_CONF_DIR` (core → hdfs → yarn), then
/// flags via [`set`](Configuration::set), with the defaults table underneath.
///
/// Values are expanded (`${…}`, see [`crate::substitution`]) whenever the configuration
/// changes, so [`get`](Configuration::get) can hand out `&str`. A value whose expansion fails
/// (a reference loop) reads as `None` from `get`, and as the error from
/// [`try_get`](Configuration::try_get) and the typed getters.
#[derive(Debug, Clone)]
pub struct Configuration {
    props: BTreeMap<String, Prop>,
    resolved: BTreeMap<String, Result<String, Failure>>,
    resources: Vec<PathBuf>,
    conf_dir: Option<PathBuf>,
    env: fn(&str) -> Option<String>,
}

fn real_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Default for Configuration {
    fn default() -> Self {
        Self::new()
    }
}

impl Configuration {
    /// Defaults only.
    pub fn new() -> Configuration {
        Self::with_env(real_env)
    }

    /// Defaults only, with `env` answering `${env.X}`, `${user.name}` and `${user.home}`
    /// instead of the process environment (tests, embedding).
    pub fn with_env(env: fn(&str) -> Option<String>) -> Configuration {
        let mut c = Configuration {
            props: BTreeMap::new(),
            resolved: BTreeMap::new(),
            resources: Vec::new(),
            conf_dir: None,
            env,
        };
        c.rebuild();
        c
    }

    /// The site files of `$HADOOP_CONF_DIR`; without it, of `$HADOOP_HOME/etc/hadoop` if that
    /// directory exists; otherwise defaults only.
    pub fn from_env() -> Result<Configuration, Error> {
        if let Some(dir) = std::env::var_os("HADOOP_CONF_DIR").filter(|d| !d.is_empty()) {
            return Self::load_dir(Path::new(&dir));
        }
        if let Some(home) = std::env::var_os("HADOOP_HOME").filter(|d| !d.is_empty()) {
            let dir = Path::new(&home).join("etc/hadoop");
            if dir.is_dir() {
                return Self::load_dir(&dir);
            }
        }
        Ok(Self::new())
    }

    /// What every `hotpath` command does with its flags: the site files of `dir` when given
    /// (`--conf-dir`), else [`from_env`](Self::from_env); then each `KEY=VALUE` of `overrides`
    /// (`--set`, repeatable) set on top, overriding even `<final>` values as flags do.
    pub fn from_flags(dir: Option<&Path>, overrides: &[String]) -> Result<Configuration, Error> {
        let mut c = match dir {
            Some(d) => Self::load_dir(d)?,
            None => Self::from_env()?,
        };
        for kv in overrides {
            let (k, v) = kv.split_once('=').ok_or_else(|| Error::Invalid {
                key: "--set".into(),
                value: kv.clone(),
                expected: "KEY=VALUE",
            })?;
            c.set(k.trim(), v.trim());
        }
        Ok(c)
    }

    /// The site files of `dir`, in [`SITE_FILES`] order. A missing file is skipped (as Hadoop
    /// does); a missing directory is an error.
    pub fn load_dir(dir: &Path) -> Result<Configuration, Error> {
        let mut c = Self::new();
        c.add_dir(dir)?;
        Ok(c)
    }

    /// Loads the site files of `dir` on top of what is there.
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), Error> {
        if !dir.is_dir() {
            return Err(Error::Io {
                path: dir.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            });
        }
        self.conf_dir = Some(dir.to_owned());
        for name in SITE_FILES {
            let path = dir.join(name);
            match read_capped(&path) {
                Ok(text) => self.merge(&path, &text)?,
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Loads one site file (it must exist) on top of what is there.
    pub fn add_resource(&mut self, path: &Path) -> Result<(), Error> {
        let text = read_capped(path)?;
        self.merge(path, &text)
    }

    /// Loads site-file XML given as text; `name` identifies it in errors and [`Source`].
    pub fn add_resource_str(&mut self, name: &str, xml: &str) -> Result<(), Error> {
        self.merge(Path::new(name), xml)
    }

    fn merge(&mut self, path: &Path, text: &str) -> Result<(), Error> {
        // Parse fully before changing anything: a bad file leaves the configuration as it was.
        let props = crate::resource::parse(path, text)?;
        for p in props {
            if let Some(old) = self.props.get(&p.name) {
                if old.is_final && old.source != Source::Resource(path.to_owned()) {
                    // Hadoop logs "Attempt to override final parameter" and keeps the old one.
                    continue;
                }
            }
            let was_final = self.props.get(&p.name).is_some_and(|o| o.is_final);
            self.props.insert(
                p.name,
                Prop {
                    value: p.value,
                    source: Source::Resource(path.to_owned()),
                    is_final: p.is_final || was_final,
                },
            );
        }
        self.resources.push(path.to_owned());
        self.rebuild();
        Ok(())
    }

    /// Sets `key` (a command-line flag). Overrides site files and defaults, `<final>`
    /// included: an operator's flag is the last word.
    pub fn set(&mut self, key: &str, value: &str) {
        let is_final = self.props.get(key).is_some_and(|p| p.is_final);
        self.props.insert(
            key.to_string(),
            Prop {
                value: value.to_string(),
                source: Source::Set,
                is_final,
            },
        );
        self.rebuild();
    }

    /// Removes `key` from files and flags: the default applies again.
    pub fn unset(&mut self, key: &str) {
        if self.props.remove(key).is_some() {
            self.rebuild();
        }
    }

    /// Recomputes every expanded value (after any change).
    fn rebuild(&mut self) {
        let props = &self.props;
        let env = self.env;
        let raw = |name: &str| -> Option<String> {
            props
                .get(name)
                .map(|p| p.value.clone())
                .or_else(|| defaults::literal(name).map(str::to_string))
        };
        let resolve = |name: &str| substitution::lookup(name, &raw, &|v| env(v));
        let mut resolved = BTreeMap::new();
        for (k, p) in props {
            resolved.insert(k.clone(), substitution::expand(&p.value, &resolve));
        }
        for row in DEFAULTS {
            if let DefaultValue::Literal(v) = row.value {
                resolved
                    .entry(row.key.to_string())
                    .or_insert_with(|| substitution::expand(v, &resolve));
            }
        }
        // Computed defaults read the values above.
        for row in DEFAULTS {
            if let DefaultValue::TimesBlocksize(n) = row.value {
                if resolved.contains_key(row.key) {
                    continue;
                }
                let bs = resolved
                    .get("dfs.blocksize")
                    .and_then(|r| r.as_ref().ok())
                    .and_then(|s| value::parse_bytes(s));
                if let Some(v) = bs.and_then(|b| b.checked_mul(n)) {
                    resolved.insert(row.key.to_string(), Ok(v.to_string()));
                }
            }
        }
        self.resolved = resolved;
    }

    /// The expanded value of `key`: site files and flags, else the defaults table. `None` if
    /// neither has it, or if its expansion failed (see [`try_get`](Self::try_get)).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.resolved
            .get(key)
            .and_then(|r| r.as_ref().ok())
            .map(String::as_str)
    }

    /// As [`get`](Self::get), but a failed expansion is an error.
    pub fn try_get(&self, key: &str) -> Result<Option<&str>, Error> {
        match self.resolved.get(key) {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(v)),
            Some(Err(f)) => Err(self.subst_error(key, *f)),
        }
    }

    fn subst_error(&self, key: &str, f: Failure) -> Error {
        let raw: String = self.get_raw(key).unwrap_or("").chars().take(200).collect();
        match f {
            Failure::Depth => Error::SubstitutionDepth {
                key: key.to_string(),
                value: raw,
                max: substitution::MAX_DEPTH,
            },
            Failure::TooLong => Error::SubstitutionTooLong {
                key: key.to_string(),
                max: substitution::MAX_LEN,
            },
        }
    }

    /// The value of `key` as written (no `${…}` expansion), else the literal default.
    pub fn get_raw(&self, key: &str) -> Option<&str> {
        self.props
            .get(key)
            .map(|p| p.value.as_str())
            .or_else(|| defaults::literal(key))
    }

    /// Where the value of `key` comes from, if it has one.
    pub fn source(&self, key: &str) -> Option<Source> {
        match self.props.get(key) {
            Some(p) => Some(p.source.clone()),
            None if self.resolved.contains_key(key) => Some(Source::Default),
            None => None,
        }
    }

    /// Whether a site file marked `key` final.
    pub fn is_final(&self, key: &str) -> bool {
        self.props.get(key).is_some_and(|p| p.is_final)
    }

    /// The site files loaded, in order.
    pub fn resources(&self) -> &[PathBuf] {
        &self.resources
    }

    /// The directory the site files came from, if any.
    pub fn conf_dir(&self) -> Option<&Path> {
        self.conf_dir.as_deref()
    }

    /// Every key with a value (set or default) and its expanded value, by key. Keys whose
    /// expansion failed are left out.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.resolved
            .iter()
            .filter_map(|(k, v)| v.as_ref().ok().map(|v| (k.as_str(), v.as_str())))
    }

    /// The keys starting with `prefix`, e.g. `dfs.namenode.rpc-address.` for the per-NameNode
    /// addresses of HA nameservices.
    pub fn keys_with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> {
        self.resolved
            .keys()
            .filter(move |k| k.starts_with(prefix))
            .map(String::as_str)
    }

    fn required(&self, key: &str) -> Result<&str, Error> {
        self.try_get(key)?.ok_or_else(|| Error::Missing {
            key: key.to_string(),
        })
    }

    fn invalid(key: &str, value: &str, expected: &'static str) -> Error {
        Error::Invalid {
            key: key.to_string(),
            value: value.chars().take(200).collect(),
            expected,
        }
    }

    /// A non-negative integer (decimal or `0x` hex).
    pub fn get_u64(&self, key: &str) -> Result<u64, Error> {
        let v = self.required(key)?;
        value::parse_u64(v).ok_or_else(|| Self::invalid(key, v, "a non-negative integer"))
    }

    /// A signed integer (for keys where Hadoop uses -1 as "unset/auto").
    pub fn get_i64(&self, key: &str) -> Result<i64, Error> {
        let v = self.required(key)?;
        let t = v.trim();
        let parsed = match t.strip_prefix('-') {
            Some(rest) => value::parse_u64(rest)
                .and_then(|n| i64::try_from(n).ok())
                .map(|n| -n),
            None => value::parse_u64(t).and_then(|n| i64::try_from(n).ok()),
        };
        parsed.ok_or_else(|| Self::invalid(key, v, "an integer"))
    }

    /// A size in bytes, with optional binary suffix k, m, g, t, p, e (`128m`).
    pub fn get_bytes(&self, key: &str) -> Result<u64, Error> {
        let v = self.required(key)?;
        value::parse_bytes(v)
            .ok_or_else(|| Self::invalid(key, v, "a size such as 134217728 or 128m"))
    }

    /// A duration: an integer in `default_unit`, or with a suffix ns, us, ms, s, m, h, d.
    pub fn get_duration(&self, key: &str, default_unit: TimeUnit) -> Result<Duration, Error> {
        let v = self.required(key)?;
        value::parse_duration(v, default_unit)
            .ok_or_else(|| Self::invalid(key, v, "a duration such as 1000, 10s or 5m"))
    }

    /// A duration in milliseconds (plain numbers are milliseconds; suffixes allowed).
    pub fn get_duration_ms(&self, key: &str) -> Result<u64, Error> {
        let d = self.get_duration(key, TimeUnit::Millis)?;
        u64::try_from(d.as_millis()).map_err(|_| {
            Self::invalid(key, self.get(key).unwrap_or(""), "a duration under 2^64 ms")
        })
    }

    /// `true` or `false` (case-insensitive).
    pub fn get_bool(&self, key: &str) -> Result<bool, Error> {
        let v = self.required(key)?;
        value::parse_bool(v).ok_or_else(|| Self::invalid(key, v, "true or false"))
    }

    /// A `host:port` (or `host`, then `default_port`; or a URI's authority).
    pub fn get_socket_addr(&self, key: &str, default_port: u16) -> Result<HostPort, Error> {
        let v = self.required(key)?;
        value::parse_host_port(v, default_port).ok_or_else(|| Self::invalid(key, v, "host:port"))
    }

    /// An address key of the defaults table (`Kind::Address`): as
    /// [`get_socket_addr`](Self::get_socket_addr) with the table's default port, so that the
    /// port is written once. A key the table has no port for is an error.
    pub fn get_address(&self, key: &str) -> Result<HostPort, Error> {
        match defaults::default_port(key) {
            Some(port) => self.get_socket_addr(key, port),
            None => Err(Self::invalid(
                key,
                self.get(key).unwrap_or(""),
                "an address key of the defaults table",
            )),
        }
    }

    /// A comma (or newline) separated list, trimmed, empty elements dropped. An absent key
    /// is an empty list.
    pub fn get_trimmed_strings(&self, key: &str) -> Result<Vec<String>, Error> {
        Ok(self
            .try_get(key)?
            .map(value::trimmed_strings)
            .unwrap_or_default())
    }
}

fn read_capped(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(io)?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            max: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(buf).map_err(|e| Error::NotUtf8 {
        path: path.to_owned(),
        offset: e.utf8_error().valid_up_to(),
    })
}
