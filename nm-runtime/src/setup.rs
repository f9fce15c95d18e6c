//! The parts of `launch_container.sh` the agent does itself before the container's first
//! process starts (`hotpath.agent.launch.setup-in-agent`, on by default): the links of the
//! localized resources (the script's `ln -sf` lines) and, with
//! `yarn.nodemanager.log-container-debug-info.enabled`, the debugging information: the copy of
//! the launch script in the log dir (mode 0640) and `directory.info` with the work dir as
//! `ls -l`, `find -L . -maxdepth 5 -ls` and `find -L . -maxdepth 5 -type l -ls` print it.
//!
//! Why: in Java's script these are one `ln` per resource plus `cp`, `chmod`, `ls` and two
//! `find`s, each a fork and exec between the start call and the container's own command. On
//! this project's 2-vCPU machines under load those five processes took 20–28 ms of every
//! launch (34 ms for the script with them against 6.6–12.6 ms without, 50 runs each), more
//! than all the rest of the agent's work. Done here they take a `readdir` and a `stat` per
//! entry. The files are the ones Java's script leaves, listed in the same formats (GNU
//! coreutils `ls -l` and findutils `-ls` columns, C-locale name order for `ls`, directory
//! order for `find`), taken at the same point: after the links, before the command.

use std::collections::HashMap;
use std::ffi::{CStr, OsStr};
use std::fmt::Write as _;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use nm_core::launch::{Link, DIRECTORY_INFO, LAUNCH_SCRIPT};

/// `find -L . -maxdepth 5`.
const MAX_DEPTH: usize = 5;
/// Entries listed at most (a work dir linking a huge tree is cut, with a line saying so).
const MAX_ENTRIES: usize = 100_000;

/// Makes each link in `work_dir` as `mkdir -p <parent>` and `ln -sf -- <source> <name>` do:
/// an existing file or link of that name is replaced; an existing directory gets the link
/// inside it, under the source's own name.
pub fn make_links(work_dir: &Path, links: &[Link]) -> io::Result<()> {
    for l in links {
        let mut dest = work_dir.join(&l.name);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(|e| at(e, parent))?;
        }
        if fs::metadata(&dest).is_ok_and(|m| m.is_dir()) {
            if let Some(base) = l.source.file_name() {
                dest = dest.join(base);
            }
        }
        match fs::symlink_metadata(&dest) {
            Ok(m) if !m.is_dir() => fs::remove_file(&dest).map_err(|e| at(e, &dest))?,
            _ => {}
        }
        symlink(&l.source, &dest).map_err(|e| at(e, &dest))?;
    }
    Ok(())
}

/// Writes the launch script's copy (0640) and `directory.info` into `log_dir`.
pub fn write_debug_info(work_dir: &Path, log_dir: &Path, script: &[u8]) -> io::Result<()> {
    let copy = log_dir.join(LAUNCH_SCRIPT);
    fs::write(&copy, script).map_err(|e| at(e, &copy))?;
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o640)).map_err(|e| at(e, &copy))?;
    let info = directory_info(work_dir, SystemTime::now())?;
    let path = log_dir.join(DIRECTORY_INFO);
    fs::write(&path, info).map_err(|e| at(e, &path))
}

fn at(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The text Java's debug steps write into `directory.info` for `dir`.
pub fn directory_info(dir: &Path, now: SystemTime) -> io::Result<String> {
    let now = secs(now);
    let mut names = Names::default();
    let mut out = String::with_capacity(4096);
    out.push_str("ls -l:\n");
    ls_l(dir, now, &mut names, &mut out)?;
    out.push_str("find -L . -maxdepth 5 -ls:\n");
    let mut all = Vec::new();
    walk(dir, &mut all);
    for e in &all {
        find_ls(e, now, &mut names, &mut out);
    }
    out.push_str("broken symlinks(find -L . -maxdepth 5 -type l -ls):\n");
    for e in all.iter().filter(|e| e.broken) {
        find_ls(e, now, &mut names, &mut out);
    }
    Ok(out)
}

/// `ls -l` of `dir`: hidden names skipped, C-locale order, `total` in 1 KiB blocks.
fn ls_l(dir: &Path, now: i64, names: &mut Names, out: &mut String) -> io::Result<()> {
    let mut rows = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        if name.as_bytes().first() == Some(&b'.') {
            continue;
        }
        let path = e.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let target = meta
            .file_type()
            .is_symlink()
            .then(|| fs::read_link(&path).ok())
            .flatten();
        rows.push((name, meta, target));
    }
    rows.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let total: u64 = rows.iter().map(|r| r.1.blocks().div_ceil(2)).sum();
    let _ = writeln!(out, "total {total}");
    let (mut wl, mut wu, mut wg, mut ws) = (1, 1, 1, 1);
    let cols: Vec<_> = rows
        .iter()
        .map(|(_, m, _)| {
            let c = (
                m.nlink().to_string(),
                names.user(m.uid()),
                names.group(m.gid()),
                m.size().to_string(),
            );
            wl = wl.max(c.0.len());
            wu = wu.max(c.1.len());
            wg = wg.max(c.2.len());
            ws = ws.max(c.3.len());
            c
        })
        .collect();
    for ((name, m, target), (l, u, g, s)) in rows.iter().zip(&cols) {
        let _ = write!(
            out,
            "{} {l:>wl$} {u:<wu$} {g:<wg$} {s:>ws$} {} {}",
            mode_string(m),
            ls_time(m.mtime(), now),
            name.to_string_lossy()
        );
        if let Some(t) = target {
            let _ = write!(out, " -> {}", t.display());
        }
        out.push('\n');
    }
    Ok(())
}

/// One entry of `find -L`: what `stat` gives (the link's own `lstat` when it is broken).
struct Found {
    /// `.`-relative path.
    rel: PathBuf,
    meta: Metadata,
    /// A link whose target does not resolve (or loops): `-type l` under `-L`.
    broken: bool,
    target: Option<PathBuf>,
}

/// `find -L . -maxdepth 5` in directory order, with findutils' loop check (a directory
/// already on the current path is neither listed nor entered again).
fn walk(dir: &Path, out: &mut Vec<Found>) {
    let Ok(meta) = fs::metadata(dir) else {
        return;
    };
    let mut stack = vec![(meta.dev(), meta.ino())];
    out.push(Found {
        rel: PathBuf::from("."),
        meta,
        broken: false,
        target: None,
    });
    descend(dir, Path::new("."), 1, &mut stack, out);
}

fn descend(
    abs: &Path,
    rel: &Path,
    depth: usize,
    stack: &mut Vec<(u64, u64)>,
    out: &mut Vec<Found>,
) {
    if depth > MAX_DEPTH || out.len() >= MAX_ENTRIES {
        return;
    }
    let Ok(rd) = fs::read_dir(abs) else {
        return;
    };
    for e in rd.flatten() {
        if out.len() >= MAX_ENTRIES {
            return;
        }
        let path = e.path();
        let rel = rel.join(e.file_name());
        let (meta, broken, target) = match fs::metadata(&path) {
            Ok(m) => (m, false, None),
            Err(_) => match fs::symlink_metadata(&path) {
                Ok(m) => {
                    let t = fs::read_link(&path).ok();
                    (m, true, t)
                }
                Err(_) => continue,
            },
        };
        let dir = meta.is_dir();
        let key = (meta.dev(), meta.ino());
        if dir && stack.contains(&key) {
            // findutils reports the loop on stderr and neither lists nor enters it.
            continue;
        }
        out.push(Found {
            rel: rel.clone(),
            meta,
            broken,
            target,
        });
        if dir {
            stack.push(key);
            descend(&path, &rel, depth + 1, stack, out);
            stack.pop();
        }
    }
}

/// findutils' `-ls` line: inode, 1 KiB blocks, mode, links, user, group, size, time, path.
fn find_ls(e: &Found, now: i64, names: &mut Names, out: &mut String) {
    let m = &e.meta;
    let _ = write!(
        out,
        "{:>9} {:>6} {} {:>3} {:<8} {:<8} {:>8} {} {}",
        m.ino(),
        m.blocks().div_ceil(2),
        mode_string(m),
        m.nlink(),
        names.user(m.uid()),
        names.group(m.gid()),
        m.size(),
        ls_time(m.mtime(), now),
        e.rel.display()
    );
    if let Some(t) = &e.target {
        let _ = write!(out, " -> {}", t.display());
    }
    out.push('\n');
}

/// `drwxr-x---` with setuid/setgid/sticky letters as `ls` shows them.
fn mode_string(m: &Metadata) -> String {
    let mode = m.mode();
    let kind = match mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        libc::S_IFIFO => 'p',
        libc::S_IFSOCK => 's',
        _ => '-',
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    let bit = |b: u32, c: char| if mode & b != 0 { c } else { '-' };
    let special = |x: bool, set: bool, on: char, off: char| match (x, set) {
        (true, true) => on,
        (false, true) => off,
        (true, false) => 'x',
        (false, false) => '-',
    };
    s.push(bit(0o400, 'r'));
    s.push(bit(0o200, 'w'));
    s.push(special(mode & 0o100 != 0, mode & 0o4000 != 0, 's', 'S'));
    s.push(bit(0o040, 'r'));
    s.push(bit(0o020, 'w'));
    s.push(special(mode & 0o010 != 0, mode & 0o2000 != 0, 's', 'S'));
    s.push(bit(0o004, 'r'));
    s.push(bit(0o002, 'w'));
    s.push(special(mode & 0o001 != 0, mode & 0o1000 != 0, 't', 'T'));
    s
}

fn secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

/// `ls`'s time column in local time: `Dec  5 14:11` within the last six months, else
/// `Dec  5  2025`.
fn ls_time(t: i64, now: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // Half of the mean Gregorian year, as coreutils.
    const SIX_MONTHS: i64 = 31_556_952 / 2;
    let Some(tm) = local_time(t) else {
        return t.to_string();
    };
    let month = MONTHS
        .get(usize::try_from(tm.tm_mon).unwrap_or(0))
        .copied()
        .unwrap_or("???");
    if now - SIX_MONTHS < t && t <= now {
        format!(
            "{month} {:>2} {:02}:{:02}",
            tm.tm_mday, tm.tm_hour, tm.tm_min
        )
    } else {
        format!("{month} {:>2}  {}", tm.tm_mday, tm.tm_year + 1900)
    }
}

fn local_time(t: i64) -> Option<libc::tm> {
    let t = libc::time_t::try_from(t).ok()?;
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals; localtime_r writes only `tm`.
    let r = unsafe { libc::localtime_r(&t, &mut tm) };
    (!r.is_null()).then_some(tm)
}

/// User and group names by id, looked up once each (`getpwuid_r`, `getgrgid_r`, as `ls` does
/// through the name service); an id without a name prints as the number.
#[derive(Default)]
struct Names {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl Names {
    fn user(&mut self, uid: u32) -> String {
        self.users
            .entry(uid)
            .or_insert_with(|| lookup(uid, true).unwrap_or_else(|| uid.to_string()))
            .clone()
    }

    fn group(&mut self, gid: u32) -> String {
        self.groups
            .entry(gid)
            .or_insert_with(|| lookup(gid, false).unwrap_or_else(|| gid.to_string()))
            .clone()
    }
}

/// Largest buffer tried for one passwd or group record.
const MAX_RECORD: usize = 1 << 20;

fn lookup(id: u32, user: bool) -> Option<String> {
    let mut len = 1024;
    loop {
        let mut buf = vec![0u8; len];
        let rc;
        let name;
        if user {
            // SAFETY: an all-zero passwd is a valid value of this plain C struct.
            let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let buf_p = buf.as_mut_ptr().cast();
            // SAFETY: every pointer is to a live local; `buf` is `len` bytes long.
            rc = unsafe { libc::getpwuid_r(id, &mut pw, buf_p, len, &mut result) };
            name = (rc == 0 && !result.is_null() && !pw.pw_name.is_null()).then(|| {
                // SAFETY: on success pw_name points at a NUL-terminated string inside `buf`.
                let c = unsafe { CStr::from_ptr(pw.pw_name) };
                OsStr::from_bytes(c.to_bytes())
                    .to_string_lossy()
                    .into_owned()
            });
        } else {
            // SAFETY: an all-zero group is a valid value of this plain C struct.
            let mut gr: libc::group = unsafe { std::mem::zeroed() };
            let mut result: *mut libc::group = std::ptr::null_mut();
            let buf_p = buf.as_mut_ptr().cast();
            // SAFETY: every pointer is to a live local; `buf` is `len` bytes long.
            rc = unsafe { libc::getgrgid_r(id, &mut gr, buf_p, len, &mut result) };
            name = (rc == 0 && !result.is_null() && !gr.gr_name.is_null()).then(|| {
                // SAFETY: on success gr_name points at a NUL-terminated string inside `buf`.
                let c = unsafe { CStr::from_ptr(gr.gr_name) };
                OsStr::from_bytes(c.to_bytes())
                    .to_string_lossy()
                    .into_owned()
            });
        }
        if rc == libc::ERANGE && len < MAX_RECORD {
            len *= 4;
            continue;
        }
        return name;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// What the real tools print for the same directory, run the way Java's script runs them.
    fn tools(dir: &Path) -> String {
        let script = "echo \"ls -l:\"; ls -l; echo \"find -L . -maxdepth 5 -ls:\"; \
find -L . -maxdepth 5 -ls; echo \"broken symlinks(find -L . -maxdepth 5 -type l -ls):\"; \
find -L . -maxdepth 5 -type l -ls";
        let out = Command::new("/bin/bash")
            .args(["-c", script])
            .current_dir(dir)
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn directory_info_is_what_ls_and_find_print() {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("work");
        fs::create_dir(&w).unwrap();
        fs::write(w.join("launch_container.sh"), "#!/bin/bash\necho hi\n").unwrap();
        fs::write(w.join(".hidden"), "x").unwrap();
        fs::write(w.join("container_tokens"), vec![7u8; 9000]).unwrap();
        fs::set_permissions(
            w.join("container_tokens"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let res = d.path().join("filecache/10/job.jar");
        fs::create_dir_all(res.join("lib/a/b/c/d/e")).unwrap();
        fs::write(res.join("lib/x.jar"), "jar").unwrap();
        fs::write(res.join("lib/a/b/c/d/e/deep"), "deep").unwrap();
        make_links(
            &w,
            &[
                Link {
                    source: res.clone(),
                    name: "job.jar".into(),
                },
                Link {
                    source: d.path().join("missing"),
                    name: "sub/dir/gone".into(),
                },
                // A loop back to the work dir: listed once, not entered again.
                Link {
                    source: w.clone(),
                    name: "self".into(),
                },
            ],
        )
        .unwrap();
        let ours = directory_info(&w, SystemTime::now()).unwrap();
        let theirs = tools(&w);
        // findutils reports the loop on stderr and skips the link, as we do.
        assert_eq!(ours, theirs, "ours:\n{ours}\ntools:\n{theirs}");
    }

    #[test]
    fn links_replace_files_and_go_inside_directories() {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("w");
        fs::create_dir_all(w.join("dir")).unwrap();
        fs::write(w.join("old"), "x").unwrap();
        let src = d.path().join("src.txt");
        fs::write(&src, "s").unwrap();
        let link = |name: &str| Link {
            source: src.clone(),
            name: name.into(),
        };
        make_links(&w, &[link("old"), link("dir"), link("a/b/c")]).unwrap();
        assert_eq!(fs::read_link(w.join("old")).unwrap(), src);
        assert_eq!(fs::read_link(w.join("dir/src.txt")).unwrap(), src);
        assert_eq!(fs::read_link(w.join("a/b/c")).unwrap(), src);
        // Again: the existing links are replaced, as `ln -sf` does.
        make_links(&w, &[link("old"), link("a/b/c")]).unwrap();
        assert_eq!(fs::read_link(w.join("old")).unwrap(), src);
    }

    #[test]
    fn old_times_show_the_year() {
        let now = 1_800_000_000;
        let old = ls_time(now - 200 * 86_400, now);
        let recent = ls_time(now - 86_400, now);
        assert!(old.ends_with(&format!(
            " {}",
            local_time(now - 200 * 86_400).unwrap().tm_year + 1900
        )));
        assert!(recent.contains(':'), "{recent}");
    }
}
