//! Container localization with real files (`file:` URLs): where each visibility lands and
//! with which modes, Java's timestamp and public checks, archives (tar.gz, zip, jar, PATTERN
//! jar) built here with the same crates, hostile archives, one download per cache key and
//! application cleanup.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    LocalResourceProto, LocalResourceTypeProto as T, LocalResourceVisibilityProto as V,
    StringLocalResourceMapProto, UrlProto,
};
use nm_core::ids::{AppId, ContainerId};
use nm_core::localization::{ResourceRequest, DEFAULT_MAX_FILES_PER_DIRECTORY};
use nm_runtime::localizer::{LocalizedResource, ResourceError, ResourceLocalizer};

const USER: &str = "alice";

fn app() -> AppId {
    AppId {
        cluster_timestamp: 1_700_000_000_000,
        id: 3,
    }
}

fn cid(n: i64) -> ContainerId {
    ContainerId {
        app: app(),
        attempt: 1,
        id: n,
    }
}

struct Node {
    _tmp: tempfile::TempDir,
    src: PathBuf,
    local: PathBuf,
    loc: ResourceLocalizer,
}

fn node() -> Node {
    let tmp = tempfile::tempdir().unwrap();
    // sources must be reachable by others for the PUBLIC cases
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let src = tmp.path().join("src");
    let local = tmp.path().join("nm-local");
    fs::create_dir(&src).unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir(&local).unwrap();
    let loc = ResourceLocalizer::new(
        vec![local.clone()],
        "file:///",
        None,
        DEFAULT_MAX_FILES_PER_DIRECTORY,
    )
    .unwrap();
    Node {
        _tmp: tmp,
        src,
        local,
        loc,
    }
}

fn mtime_ms(p: &Path) -> i64 {
    let m = fs::metadata(p).unwrap();
    m.mtime() * 1000 + m.mtime_nsec() / 1_000_000
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// A request as the AM sends it: `file:` URL without host, port −1.
fn request(link: &str, path: &Path, ts: i64, t: T, v: V, pattern: Option<&str>) -> ResourceRequest {
    ResourceRequest::from_proto(&StringLocalResourceMapProto {
        key: Some(link.into()),
        value: Some(LocalResourceProto {
            resource: Some(UrlProto {
                scheme: Some("file".into()),
                host: None,
                port: Some(-1),
                file: Some(path.display().to_string()),
                user_info: None,
            }),
            size: Some(fs::metadata(path).map_or(0, |m| m.len() as i64)),
            timestamp: Some(ts),
            r#type: Some(t as i32),
            visibility: Some(v as i32),
            pattern: pattern.map(Into::into),
            should_be_uploaded_to_shared_cache: None,
        }),
    })
    .unwrap()
}

fn file_req(n: &Node, name: &str, body: &[u8], v: V) -> ResourceRequest {
    let p = n.src.join(name);
    fs::write(&p, body).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    request(name, &p, mtime_ms(&p), T::File, v, None)
}

fn one(n: &Node, c: i64, r: &ResourceRequest) -> Result<LocalizedResource, ResourceError> {
    n.loc
        .localize(USER, &app(), &cid(c), std::slice::from_ref(r))
        .map(|mut v| v.remove(0))
}

#[test]
fn a_file_of_each_visibility_lands_in_its_cache_with_its_modes() {
    let n = node();
    let reqs = [
        file_req(&n, "pub.txt", b"public", V::Public),
        file_req(&n, "priv.txt", b"private", V::Private),
        file_req(&n, "app.txt", b"application", V::Application),
    ];
    let got = n.loc.localize(USER, &app(), &cid(2), &reqs).unwrap();
    let l = &n.local;
    let app_cache = l.join("usercache/alice/appcache/application_1700000000000_0003/filecache");
    let expect = [
        (
            l.join("filecache/10/pub.txt"),
            "pub.txt",
            &b"public"[..],
            0o555,
        ),
        (
            l.join("usercache/alice/filecache/10/priv.txt"),
            "priv.txt",
            b"private",
            0o500,
        ),
        (
            app_cache.join("10/app.txt"),
            "app.txt",
            b"application",
            0o500,
        ),
    ];
    assert_eq!(got.len(), 3);
    for (g, (path, link, body, m)) in got.iter().zip(expect) {
        assert_eq!(g.path, path);
        assert_eq!(g.link, link);
        assert_eq!(fs::read(&g.path).unwrap(), body);
        assert_eq!(mode(&g.path), m, "{}", g.path.display());
        // the numbered directory is 0755, and no _tmp is left
        assert_eq!(mode(g.path.parent().unwrap()), 0o755);
        let tmp = format!("{}_tmp", g.path.parent().unwrap().display());
        assert!(!Path::new(&tmp).exists(), "{tmp}");
    }
    assert_eq!(mode(&l.join("usercache/alice")), 0o750);
    assert_eq!(mode(&l.join("usercache/alice/appcache")), 0o710);
    // the next download of the same cache root takes the next number
    let r = file_req(&n, "pub2.txt", b"2", V::Public);
    assert_eq!(
        one(&n, 2, &r).unwrap().path,
        l.join("filecache/11/pub2.txt")
    );
    assert_eq!(n.loc.downloads(), 4);
}

#[test]
fn a_wrong_timestamp_fails_with_javas_message_and_leaves_nothing() {
    let n = node();
    let p = n.src.join("f.txt");
    fs::write(&p, b"x").unwrap();
    let real = mtime_ms(&p);
    let r = request("f.txt", &p, real + 1, T::File, V::Application, None);
    let e = one(&n, 2, &r).unwrap_err().diagnostics();
    let want = format!(
        "Resource file:{} changed on src filesystem - expected: \"{}\", was: \"{}\", current time: \"",
        p.display(),
        nm_core::localization::format_iso8601(real + 1),
        nm_core::localization::format_iso8601(real)
    );
    assert!(e.starts_with(&want), "{e}\nwanted {want}");
    assert!(e.ends_with("+0000\""), "{e}");
    let cache = n
        .local
        .join("usercache/alice/appcache/application_1700000000000_0003/filecache");
    assert_eq!(
        fs::read_dir(&cache).unwrap().count(),
        0,
        "nothing left in {}",
        cache.display()
    );
    // a missing source
    let gone = request("f.txt", &p, real, T::File, V::Application, None);
    fs::remove_file(&p).unwrap();
    let e = one(&n, 2, &gone).unwrap_err().diagnostics();
    assert_eq!(e, format!("File file:{} does not exist", p.display()));
}

#[test]
fn a_public_resource_others_cannot_read_is_refused() {
    let n = node();
    let p = n.src.join("secret.txt");
    fs::write(&p, b"s").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
    let r = request("secret.txt", &p, mtime_ms(&p), T::File, V::Public, None);
    let e = one(&n, 2, &r).unwrap_err().diagnostics();
    assert_eq!(
        e,
        format!(
            "Resource file:{} is not publicly accessible and as such cannot be part of the public cache.",
            p.display()
        )
    );
    // readable, but a directory above it is not traversable by others
    let d = n.src.join("closed");
    fs::create_dir(&d).unwrap();
    let q = d.join("f.txt");
    fs::write(&q, b"q").unwrap();
    fs::set_permissions(&q, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o750)).unwrap();
    let r = request("f.txt", &q, mtime_ms(&q), T::File, V::Public, None);
    assert!(one(&n, 2, &r)
        .unwrap_err()
        .diagnostics()
        .contains("is not publicly accessible"));
    // the same file as PRIVATE is fine
    let r = request("f.txt", &q, mtime_ms(&q), T::File, V::Private, None);
    one(&n, 2, &r).unwrap();
}

fn write_tar_gz(path: &Path, files: &[(&str, &[u8])]) {
    let f = fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (name, body) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, *body).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

fn write_zip(path: &Path, files: &[(&str, &[u8])]) {
    let f = fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in files {
        if name.ends_with('/') {
            z.add_directory(*name, o).unwrap();
        } else {
            z.start_file(*name, o).unwrap();
            z.write_all(body).unwrap();
        }
    }
    z.finish().unwrap();
}

#[test]
fn tar_gz_zip_and_jar_archives_are_unpacked() {
    let n = node();
    let tgz = n.src.join("data.tar.gz");
    write_tar_gz(&tgz, &[("top.txt", b"top"), ("dir/sub/deep.txt", b"deep")]);
    let zipf = n.src.join("bundle.zip");
    write_zip(&zipf, &[("d/", b""), ("d/z.txt", b"zz"), ("r.txt", b"r")]);
    let jar = n.src.join("app.jar");
    write_zip(
        &jar,
        &[
            ("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\n"),
            ("a/B.class", b"cafe"),
        ],
    );
    let reqs = [
        request(
            "data",
            &tgz,
            mtime_ms(&tgz),
            T::Archive,
            V::Application,
            None,
        ),
        request(
            "bundle",
            &zipf,
            mtime_ms(&zipf),
            T::Archive,
            V::Private,
            None,
        ),
        request("app", &jar, mtime_ms(&jar), T::Archive, V::Public, None),
    ];
    let got = n.loc.localize(USER, &app(), &cid(2), &reqs).unwrap();
    let (t, z, j) = (&got[0].path, &got[1].path, &got[2].path);
    assert!(
        t.ends_with("filecache/10/data.tar.gz") && t.is_dir(),
        "{}",
        t.display()
    );
    assert_eq!(fs::read(t.join("top.txt")).unwrap(), b"top");
    assert_eq!(fs::read(t.join("dir/sub/deep.txt")).unwrap(), b"deep");
    assert_eq!(mode(t), 0o700);
    assert_eq!(mode(&t.join("dir/sub")), 0o700);
    assert_eq!(mode(&t.join("dir/sub/deep.txt")), 0o500);
    assert_eq!(fs::read(z.join("d/z.txt")).unwrap(), b"zz");
    assert_eq!(fs::read(z.join("r.txt")).unwrap(), b"r");
    assert_eq!(fs::read(j.join("a/B.class")).unwrap(), b"cafe");
    assert_eq!(mode(j), 0o755);
    assert_eq!(mode(&j.join("a/B.class")), 0o555);
    assert!(!j.join("app.jar").exists(), "ARCHIVE does not keep the jar");

    // PATTERN: only matching entries, the jar kept beside them
    let r = request(
        "pat",
        &jar,
        mtime_ms(&jar),
        T::Pattern,
        V::Application,
        Some("a/.*"),
    );
    let p = one(&n, 2, &r).unwrap().path;
    assert!(p.join("a/B.class").is_file());
    assert!(!p.join("META-INF").exists());
    assert_eq!(
        fs::read(p.join("app.jar")).unwrap(),
        fs::read(&jar).unwrap()
    );

    // ARCHIVE with a name that is no archive: copied as is
    let odd = n.src.join("notes.txt");
    fs::write(&odd, b"plain").unwrap();
    let r = request(
        "odd",
        &odd,
        mtime_ms(&odd),
        T::Archive,
        V::Application,
        None,
    );
    assert_eq!(fs::read(one(&n, 2, &r).unwrap().path).unwrap(), b"plain");
}

/// A tar whose one entry is named `name` verbatim (the tar crate's builder refuses `..`).
fn raw_tar(path: &Path, name: &str, kind: tar::EntryType, link: Option<&str>) {
    let mut h = tar::Header::new_old();
    {
        let old = h.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            old.linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
    }
    h.set_mode(0o644);
    h.set_entry_type(kind);
    let body: &[u8] = if kind == tar::EntryType::Regular {
        b"evil"
    } else {
        b""
    };
    h.set_size(body.len() as u64);
    h.set_cksum();
    let mut b = tar::Builder::new(fs::File::create(path).unwrap());
    b.append(&h, body).unwrap();
    b.finish().unwrap();
}

#[test]
fn hostile_archives_are_refused() {
    let n = node();
    let outside = n
        .local
        .join("usercache/alice/appcache/application_1700000000000_0003/filecache/x");
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make, &str)> = vec![
        (
            "up.tar",
            Box::new(|p: &Path| raw_tar(p, "../x", tar::EntryType::Regular, None)),
            "entry \"../x\" climbs out with '..'",
        ),
        (
            "abs.tar",
            Box::new(|p: &Path| raw_tar(p, "/tmp/hotpath-evil", tar::EntryType::Regular, None)),
            "is an absolute path",
        ),
        (
            "link.tar",
            Box::new(|p: &Path| raw_tar(p, "l", tar::EntryType::Symlink, Some("../../x"))),
            "is a symlink pointing outside the destination",
        ),
        (
            "up.zip",
            Box::new(|p: &Path| write_zip(p, &[("ok.txt", b"ok"), ("../x", b"evil")])),
            "entry \"../x\" climbs out with '..'",
        ),
    ];
    for (name, make, why) in cases {
        let p = n.src.join(name);
        make(&p);
        let r = request(name, &p, mtime_ms(&p), T::Archive, V::Application, None);
        let e = one(&n, 2, &r).unwrap_err().diagnostics();
        assert!(
            e.starts_with(&format!("Refusing to unpack {name}: ")),
            "{e}"
        );
        assert!(e.contains(why), "{name}: {e}");
        assert!(!outside.exists());
        assert!(!Path::new("/tmp/hotpath-evil").exists());
    }
    // nothing half-unpacked stays behind
    let cache = n
        .local
        .join("usercache/alice/appcache/application_1700000000000_0003/filecache");
    assert_eq!(fs::read_dir(&cache).unwrap().count(), 0);
}

#[test]
fn containers_of_one_app_share_one_download_and_cleanup_forgets_it() {
    let n = node();
    let r = file_req(&n, "shared.txt", b"once", V::Application);
    let a = one(&n, 2, &r).unwrap();
    let b = one(&n, 3, &r).unwrap();
    assert_eq!(a, b);
    assert_eq!(n.loc.downloads(), 1);
    // another application of the same user gets its own copy
    let other = AppId { id: 4, ..app() };
    let c = n
        .loc
        .localize(
            USER,
            &other,
            &ContainerId {
                app: other,
                attempt: 1,
                id: 2,
            },
            std::slice::from_ref(&r),
        )
        .unwrap();
    assert_ne!(c[0].path, a.path);
    assert_eq!(n.loc.downloads(), 2);

    // concurrent containers: one download, every caller the same path
    let loc = Arc::new(n.loc);
    let big = n.src.join("big.bin");
    fs::write(&big, vec![7u8; 8 << 20]).unwrap();
    let rb = request(
        "big.bin",
        &big,
        mtime_ms(&big),
        T::File,
        V::Application,
        None,
    );
    let paths: Vec<PathBuf> = (0..4)
        .map(|i| {
            let (loc, rb) = (loc.clone(), rb.clone());
            std::thread::spawn(move || {
                loc.localize(USER, &app(), &cid(10 + i), &[rb])
                    .unwrap()
                    .remove(0)
                    .path
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert!(paths.iter().all(|p| *p == paths[0]), "{paths:?}");
    assert_eq!(loc.downloads(), 3);

    // the application finishes: its cache is gone, and a new request downloads again
    let app_dir = n
        .local
        .join("usercache/alice/appcache/application_1700000000000_0003");
    assert!(app_dir.is_dir());
    loc.app_finished(USER, &app()).unwrap();
    assert!(!app_dir.exists());
    assert!(c[0].path.exists(), "the other application keeps its copy");
    let again = loc
        .localize(USER, &app(), &cid(5), std::slice::from_ref(&r))
        .unwrap();
    assert_eq!(fs::read(&again[0].path).unwrap(), b"once");
    assert_eq!(loc.downloads(), 4);
}

#[test]
fn unsupported_sources_and_bad_users_fail_clearly() {
    let n = node();
    let mut r = file_req(&n, "f", b"f", V::Private);
    r.url.scheme = Some("s3a".into());
    let e = one(&n, 2, &r).unwrap_err().diagnostics();
    assert!(e.contains("no file system for scheme \"s3a\""), "{e}");
    r.url.scheme = Some("hdfs".into());
    let e = one(&n, 2, &r).unwrap_err().diagnostics();
    assert!(e.contains("HDFS not configured"), "{e}");
    let r = file_req(&n, "g", b"g", V::Private);
    let e = n
        .loc
        .localize("../root", &app(), &cid(2), &[r])
        .unwrap_err();
    assert_eq!(
        e.diagnostics(),
        "Invalid user name \"../root\" for the user cache"
    );
}

#[test]
fn a_failed_download_leaves_no_busy_slot_behind() {
    // the second request for the same resource tries again itself instead of waiting forever
    let n = node();
    let p = n.src.join("missing.txt");
    let r = request("missing.txt", &p, 1, T::File, V::Application, None);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..2 {
            let e = one(&n, 2, &r).unwrap_err().diagnostics();
            tx.send(e).unwrap();
        }
    });
    for _ in 0..2 {
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the attempt ends");
        assert!(e.contains("does not exist"), "{e}");
    }
}
