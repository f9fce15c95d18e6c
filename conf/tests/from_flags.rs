//! `Configuration::from_flags`: `--conf-dir` then `--set` overrides, as every command uses it.

use conf::Configuration;

#[test]
fn dir_then_overrides_and_a_bad_override_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("yarn-site.xml"),
        "<configuration><property><name>yarn.nodemanager.resource.memory-mb</name><value>4096</value><final>true</final></property>\
         <property><name>a.b</name><value>1</value></property></configuration>",
    )
    .unwrap();
    let c = Configuration::from_flags(Some(d.path()), &[]).unwrap();
    assert_eq!(c.get("a.b"), Some("1"));
    assert_eq!(c.get("yarn.nodemanager.resource.memory-mb"), Some("4096"));
    let c = Configuration::from_flags(
        Some(d.path()),
        &[
            "a.b = 2".into(),
            "yarn.nodemanager.resource.memory-mb=1024".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.get("a.b"), Some("2"));
    assert_eq!(c.get("yarn.nodemanager.resource.memory-mb"), Some("1024"));
    let e = Configuration::from_flags(Some(d.path()), &["no-equals-sign".into()]).unwrap_err();
    assert!(e.to_string().contains("KEY=VALUE"), "{e}");
    assert!(Configuration::from_flags(Some(&d.path().join("missing")), &[]).is_err());
}
