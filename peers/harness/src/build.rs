//! Building `peers/hadoop` (and `peers/hadoop-mr`, the unshaded MapReduce peer) once: Maven
//! under a file lock, skipped when a stamp matches.

use std::collections::hash_map::DefaultHasher;
use std::ffi::OsString;
use std::fs::{self, File};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use crate::error::PeerError;

/// JVM flags for every peer and driver JVM. JDK 17 runs Hadoop 3.5 without them today; they are
/// the module opens Hadoop's own scripts pass on JDK 17, kept here in one place.
pub const JVM_FLAGS: &[&str] = &[
    "-Xmx1g",
    "-Djava.net.preferIPv4Stack=true",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-opens=java.base/sun.net.util=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.x509=ALL-UNNAMED",
];

/// A built peer: how to start a JVM with its classes.
#[derive(Debug, Clone)]
pub struct Build {
    /// `peers/hadoop`.
    pub project_dir: PathBuf,
    /// The `java` executable (`$HOTPATH_JAVA`, else `$JAVA_HOME/bin/java`, else `java`).
    pub java: PathBuf,
    /// `target/classes` plus every runtime jar.
    pub classpath: OsString,
    /// Whether this process ran Maven (false when the stamp matched).
    pub ran_maven: bool,
}

impl Build {
    /// A `java` command for `main_class`: JVM flags, `$HOTPATH_PEER_JAVA_OPTS`, classpath.
    pub fn java_command(&self, main_class: &str) -> Command {
        let mut c = Command::new(&self.java);
        c.args(JVM_FLAGS);
        if let Ok(extra) = std::env::var("HOTPATH_PEER_JAVA_OPTS") {
            c.args(extra.split_whitespace());
        }
        c.arg("-cp").arg(&self.classpath).arg(main_class);
        c
    }
}

/// The `peers/hadoop` directory next to this crate.
pub fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("hadoop")
}

/// Builds the peer unless an up-to-date build exists; once per process, and under a file lock
/// across processes. The outcome (success or failure) is kept for the life of the process.
pub fn ensure_built() -> Result<Build, PeerError> {
    static OUTCOME: OnceLock<Result<Build, String>> = OnceLock::new();
    static GATE: Mutex<()> = Mutex::new(());
    let _g = GATE.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = OUTCOME.get_or_init(|| {
        build_locked(&project_dir(), "hotpath/peer/Launcher.class").map_err(|e| e.to_string())
    });
    outcome.clone().map_err(|output| PeerError::Build {
        command: "peer build (first attempt in this process)".into(),
        output,
    })
}

/// The `peers/hadoop-mr` directory next to this crate: Hadoop 3.5.0's unshaded MapReduce
/// runtime and a Java RM for it (launcher `hotpath.mr.MrLauncher`, mode `mr-rm`). A Maven
/// project of its own, since `peers/hadoop`'s shaded client jars cannot run MapReduce.
pub fn mr_project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("hadoop-mr")
}

/// [`ensure_built`] for `peers/hadoop-mr`.
pub fn ensure_built_mr() -> Result<Build, PeerError> {
    static OUTCOME: OnceLock<Result<Build, String>> = OnceLock::new();
    static GATE: Mutex<()> = Mutex::new(());
    let _g = GATE.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = OUTCOME.get_or_init(|| {
        build_locked(&mr_project_dir(), "hotpath/mr/MrLauncher.class").map_err(|e| e.to_string())
    });
    outcome.clone().map_err(|output| PeerError::Build {
        command: "MapReduce peer build (first attempt in this process)".into(),
        output,
    })
}

/// Builds `project` under its lock unless its stamp matches and `marker` (a class file under
/// `target/classes`) and every jar of `target/classpath.txt` exist.
fn build_locked(project: &Path, marker: &str) -> Result<Build, PeerError> {
    let project = project
        .canonicalize()
        .map_err(|e| PeerError::io(format!("peer project {project:?}"), e))?;
    let target = project.join("target");
    fs::create_dir_all(&target).map_err(|e| PeerError::io(format!("mkdir {target:?}"), e))?;
    let lock_path = target.join(".hotpath-build.lock");
    let lock =
        File::create(&lock_path).map_err(|e| PeerError::io(format!("create {lock_path:?}"), e))?;
    fs4::FileExt::lock(&lock).map_err(|e| PeerError::io(format!("lock {lock_path:?}"), e))?;

    let stamp_path = target.join(".hotpath-build.stamp");
    let classpath_file = target.join("classpath.txt");
    let classes = target.join("classes");
    let stamp = source_stamp(&project)?;
    let jars_present = fs::read_to_string(&classpath_file).is_ok_and(|cp| {
        cp.trim()
            .split(':')
            .all(|jar| !jar.is_empty() && Path::new(jar).is_file())
    });
    let fresh = fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str())
        && jars_present
        && classes.join(marker).is_file();
    let mut ran_maven = false;
    if !fresh {
        run_maven(&project)?;
        ran_maven = true;
        fs::write(&stamp_path, &stamp)
            .map_err(|e| PeerError::io(format!("write {stamp_path:?}"), e))?;
    }
    let jars = fs::read_to_string(&classpath_file)
        .map_err(|e| PeerError::io(format!("read {classpath_file:?}"), e))?;
    let mut classpath = OsString::from(classes.as_os_str());
    classpath.push(":");
    classpath.push(jars.trim());
    // the lock is released when `lock` is dropped (closing the file)
    drop(lock);
    Ok(Build {
        project_dir: project,
        java: java_path(),
        classpath,
        ran_maven,
    })
}

/// Maven offline first (the usual case once ~/.m2 holds the jars), online if that fails.
fn run_maven(project: &Path) -> Result<(), PeerError> {
    let mvn = std::env::var_os("HOTPATH_MVN").unwrap_or_else(|| "mvn".into());
    let mut last = String::new();
    for offline in [true, false] {
        let mut c = Command::new(&mvn);
        c.current_dir(project).args(["-B", "-q"]);
        if offline {
            c.arg("-o");
        }
        c.args(["package", "-DskipTests"]);
        let shown = format!(
            "{} -B -q{} package -DskipTests (in {})",
            mvn.to_string_lossy(),
            if offline { " -o" } else { "" },
            project.display()
        );
        let out = c
            .output()
            .map_err(|e| PeerError::io(format!("run {shown} (is Maven installed?)"), e))?;
        if out.status.success() {
            return Ok(());
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        last = format!(
            "{shown}: {}\n{}",
            out.status,
            lines[lines.len().saturating_sub(60)..].join("\n")
        );
    }
    Err(PeerError::Build {
        command: "mvn package".into(),
        output: last,
    })
}

/// A hash of everything the build depends on: pom.xml and every file under src/.
fn source_stamp(project: &Path) -> Result<String, PeerError> {
    let mut files = vec![project.join("pom.xml")];
    collect(&project.join("src"), &mut files)?;
    files.sort();
    let mut h = DefaultHasher::new();
    for f in &files {
        let bytes = fs::read(f).map_err(|e| PeerError::io(format!("read {f:?}"), e))?;
        h.write(
            f.strip_prefix(project)
                .unwrap_or(f)
                .as_os_str()
                .as_encoded_bytes(),
        );
        h.write_usize(bytes.len());
        h.write(&bytes);
    }
    Ok(format!("{:016x} {}\n", h.finish(), files.len()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PeerError> {
    let rd = fs::read_dir(dir).map_err(|e| PeerError::io(format!("read dir {dir:?}"), e))?;
    for entry in rd {
        let entry = entry.map_err(|e| PeerError::io(format!("read dir {dir:?}"), e))?;
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn java_path() -> PathBuf {
    if let Some(j) = std::env::var_os("HOTPATH_JAVA") {
        return j.into();
    }
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let j = Path::new(&home).join("bin").join("java");
        if j.is_file() {
            return j;
        }
    }
    "java".into()
}
