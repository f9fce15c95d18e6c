//! `Configuration::from_env` reads `$HADOOP_CONF_DIR`. Alone in its test binary because it
//! changes the process environment.

use std::fs;

#[test]
fn reads_hadoop_conf_dir() {
    let dir = std::env::temp_dir().join(format!("conf-test-env-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("yarn-site.xml"),
        "<configuration><property><name>yarn.resourcemanager.hostname</name>\
         <value>rm-env</value></property></configuration>",
    )
    .unwrap();
    std::env::set_var("HADOOP_CONF_DIR", &dir);
    let c = conf::Configuration::from_env().unwrap();
    assert_eq!(
        c.get("yarn.resourcemanager.resource-tracker.address"),
        Some("rm-env:8031")
    );
    assert_eq!(c.conf_dir(), Some(dir.as_path()));

    std::env::set_var("HADOOP_CONF_DIR", dir.join("missing"));
    assert!(conf::Configuration::from_env().is_err());

    std::env::remove_var("HADOOP_CONF_DIR");
    std::env::set_var("HADOOP_HOME", dir.join("no-hadoop-here"));
    let c = conf::Configuration::from_env().unwrap();
    assert!(c.resources().is_empty());
    assert_eq!(c.get("fs.defaultFS"), Some("file:///"));
    fs::remove_dir_all(&dir).unwrap();
}
