//! What a MapReduce task or AM container needs from the agent beyond DistributedShell
//! (shuffle.md 8.3), through the real ContainerManagementProtocol of a running agent: `job.jar`
//! as a PATTERN resource with MR's own pattern (the matching entries unpacked into the directory
//! `job.jar/`, the jar itself kept as `job.jar/job.jar`), a resource named
//! `jobSubmitDir/job.split`, the environment MR reads (`LOCAL_DIRS`, `PWD`, `JVM_PID`, `USER`,
//! `CONTAINER_ID`, `NM_HOST`, `NM_PORT`, `NM_HTTP_PORT`, `{{VAR}}` expanded), a
//! `signalToContainer(OUTPUT_THREAD_DUMP)` that succeeds and reaches the process as SIGQUIT, and
//! the map output under `$LOCAL_DIRS/output/` outliving the container's stop (the MR AM stops
//! each map's container as soon as it succeeds, long before the reducers fetch).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use agent::demo::{Cluster, DemoConfig};
use hadoop_wire::pb::hadoop::yarn::{
    LocalResourceProto, LocalResourceTypeProto as T, LocalResourceVisibilityProto as V,
    SignalContainerCommandProto, SignalContainerRequestProto, SignalContainerResponseProto,
    StartContainersRequestProto, StartContainersResponseProto, StopContainersRequestProto,
    StopContainersResponseProto, StringLocalResourceMapProto, StringStringMapProto, UrlProto,
};
use hadoop_wire::yarn::{cmp, exit_status};
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::table::ContainerState;
use nm_core::wire::container_id_proto;
use nm_runtime::{Agent, AgentConfig};

use crate::cmp as cmp_support;
use cmp_support::{call, now_ms, wait_for, Minter};

/// MapReduce's pattern for `job.jar` (`JobConf.DEFAULT_JAR_UNPACK_PATTERN`).
const MR_JAR_PATTERN: &str = "(?:classes/|lib/).*";

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

fn mtime_ms(p: &Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(p).unwrap();
    m.mtime() * 1000 + m.mtime_nsec() / 1_000_000
}

/// A `file:` resource as the MR AM's `YARNRunner` sends it.
fn resource(link: &str, path: &Path, t: T, pattern: Option<&str>) -> StringLocalResourceMapProto {
    StringLocalResourceMapProto {
        key: Some(link.into()),
        value: Some(LocalResourceProto {
            resource: Some(UrlProto {
                scheme: Some("file".into()),
                host: None,
                port: Some(-1),
                file: Some(path.display().to_string()),
                user_info: None,
            }),
            size: Some(fs::metadata(path).unwrap().len() as i64),
            timestamp: Some(mtime_ms(path)),
            r#type: Some(t as i32),
            visibility: Some(V::Application as i32),
            pattern: pattern.map(Into::into),
            should_be_uploaded_to_shared_cache: None,
        }),
    }
}

fn write_jar(path: &Path, files: &[(&str, &[u8])]) {
    let mut z = zip::ZipWriter::new(fs::File::create(path).unwrap());
    let o = zip::write::SimpleFileOptions::default();
    for (name, body) in files {
        z.start_file(*name, o).unwrap();
        z.write_all(body).unwrap();
    }
    z.finish().unwrap();
}

#[test]
fn a_mapreduce_task_container_gets_what_mr_needs_and_its_map_output_outlives_its_stop() {
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg =
        AgentConfig::local(cluster.rm_addr(), "127.0.0.28".parse().unwrap(), dir.path()).unwrap();
    cfg.memory_mb = 4096;
    cfg.vcores = 4;
    let agent = Agent::start(cfg).unwrap();
    wait_for("keys", Duration::from_secs(10), || {
        agent.shared().cm.lock().unwrap().has_keys()
    });

    // The job's submit dir, as YARNRunner uploads it.
    let src = dir.path().join("staging");
    fs::create_dir(&src).unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    let split = src.join("job.split");
    fs::write(&split, b"SPL\x00split bytes").unwrap();
    let jar = src.join("job.jar");
    write_jar(
        &jar,
        &[
            ("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\n"),
            ("org/example/Job.class", b"cafe"),
            ("classes/org/example/Extra.class", b"babe"),
            ("lib/dep.jar", b"PK-not-really"),
        ],
    );
    let probe = dir.path().join("probe");
    fs::create_dir(&probe).unwrap();

    let app = AppId {
        cluster_timestamp: 1_700_000_000_000,
        id: 7,
    };
    let attempt = AttemptId { app, attempt: 1 };
    let c = ContainerId {
        app,
        attempt: 1,
        id: 2,
    };
    let minter = Minter::new(&agent, &whoami());
    let client = minter.client(attempt);
    let me = agent.node_id();
    let p = probe.display();
    // What YarnChild does that matters here: read the environment, write its map output under
    // the first of LOCAL_DIRS; then wait, dumping "threads" on SIGQUIT. (The command lands in
    // `exec /bin/bash -c "..."` unescaped, as Java puts it: no double quotes, and variables are
    // expanded by the launch script's shell.)
    let out = "${LOCAL_DIRS%%,*}/output/attempt_1700000000000_0007_m_000000_0";
    let command = format!(
        "env > {p}/env.tmp && mv {p}/env.tmp {p}/env; \
         mkdir -p {out} && echo map-output > {out}/file.out && echo index > {out}/file.out.index; \
         trap 'echo QUIT >> {p}/signals' QUIT; touch {p}/ready; \
         while true; do sleep 0.1; done"
    );
    let mut req = minter.start_request(c, &me, now_ms() + 600_000, &command);
    let ctx = req.container_launch_context.as_mut().unwrap();
    ctx.local_resources = vec![
        resource("job.jar", &jar, T::Pattern, Some(MR_JAR_PATTERN)),
        resource("jobSubmitDir/job.split", &split, T::File, None),
    ];
    ctx.environment = vec![StringStringMapProto {
        key: Some("MR_LIB".into()),
        value: Some("{{PWD}}/job.jar/lib".into()),
    }];
    let r: StartContainersResponseProto = call(
        &client,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![req],
        },
    )
    .unwrap();
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    wait_for("the container runs", Duration::from_secs(30), || {
        probe.join("ready").exists()
    });

    let env: BTreeMap<String, String> = fs::read_to_string(probe.join("env"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pwd = Path::new(&env["PWD"]).to_path_buf();
    assert!(pwd.ends_with(c.to_string()), "PWD {pwd:?}");
    assert_eq!(env["CONTAINER_ID"], c.to_string());
    assert_eq!(env["USER"], whoami());
    let (host, port) = me.rsplit_once(':').unwrap();
    assert_eq!(env["NM_HOST"], host);
    assert_eq!(env["NM_PORT"], port);
    assert!(env["NM_HTTP_PORT"].parse::<u16>().is_ok(), "{env:?}");
    assert!(env["JVM_PID"].parse::<u32>().is_ok(), "{env:?}");
    assert_eq!(env["MR_LIB"], format!("{}/job.jar/lib", pwd.display()));
    let local_dirs: Vec<&str> = env["LOCAL_DIRS"].split(',').collect();
    let app_dir = format!("appcache/{app}");
    assert!(
        !local_dirs.is_empty() && local_dirs.iter().all(|d| d.ends_with(&app_dir)),
        "LOCAL_DIRS {local_dirs:?}"
    );
    assert!(pwd.starts_with(local_dirs[0]) || local_dirs.iter().any(|d| pwd.starts_with(d)));

    // job.jar: a directory of the matching entries plus the jar itself
    let jdir = pwd.join("job.jar");
    assert!(jdir.is_dir(), "{jdir:?}");
    assert_eq!(
        fs::read(jdir.join("job.jar")).unwrap(),
        fs::read(&jar).unwrap()
    );
    assert_eq!(
        fs::read(jdir.join("classes/org/example/Extra.class")).unwrap(),
        b"babe"
    );
    assert_eq!(
        fs::read(jdir.join("lib/dep.jar")).unwrap(),
        b"PK-not-really"
    );
    assert!(!jdir.join("META-INF").exists() && !jdir.join("org").exists());
    // the split under its directory
    assert_eq!(
        fs::read(pwd.join("jobSubmitDir/job.split")).unwrap(),
        b"SPL\x00split bytes"
    );

    // OUTPUT_THREAD_DUMP: answered, and the process gets SIGQUIT
    let _: SignalContainerResponseProto = call(
        &client,
        cmp::SIGNAL_TO_CONTAINER,
        &SignalContainerRequestProto {
            container_id: container_id_proto(&c),
            command: SignalContainerCommandProto::OutputThreadDump as i32,
        },
    )
    .unwrap();
    wait_for("SIGQUIT", Duration::from_secs(10), || {
        fs::read_to_string(probe.join("signals")).is_ok_and(|s| s.contains("QUIT"))
    });

    // The AM stops the finished map: -105, its work dir goes, its output stays.
    let r: StopContainersResponseProto = call(
        &client,
        cmp::STOP_CONTAINERS,
        &StopContainersRequestProto {
            container_id: vec![container_id_proto(&c)],
        },
    )
    .unwrap();
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    wait_for("-105", Duration::from_secs(20), || {
        agent
            .shared()
            .table
            .lock()
            .unwrap()
            .get(&c)
            .map(|s| (s.state, s.exit_status))
            == Some((ContainerState::Complete, exit_status::KILLED_BY_APPMASTER))
    });
    wait_for("the work dir removed", Duration::from_secs(10), || {
        !pwd.exists()
    });
    let out = Path::new(local_dirs[0]).join("output/attempt_1700000000000_0007_m_000000_0");
    assert_eq!(fs::read(out.join("file.out")).unwrap(), b"map-output\n");
    assert_eq!(fs::read(out.join("file.out.index")).unwrap(), b"index\n");
}
