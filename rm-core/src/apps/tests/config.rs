//! `AppsConfig::from_conf`.

use super::*;

#[test]
fn immediate_placement_is_a_config_key_on_by_default() {
    let on = AppsConfig::from_conf(&conf::Configuration::new()).unwrap();
    assert!(on.immediate_placement);
    assert_eq!(on, AppsConfig::default());
    let mut c = conf::Configuration::new();
    c.set(crate::config::IMMEDIATE_PLACEMENT, "false");
    assert!(!AppsConfig::from_conf(&c).unwrap().immediate_placement);
    c.set(crate::config::IMMEDIATE_PLACEMENT, "sometimes");
    assert!(AppsConfig::from_conf(&c).is_err());
}

#[test]
fn io_backends_per_server() {
    let d = AppsConfig::from_conf(&conf::Configuration::new()).unwrap();
    assert_eq!(
        (d.client_io, d.scheduler_io),
        (BackendChoice::Auto, BackendChoice::Auto)
    );
    let mut c = conf::Configuration::new();
    c.set(crate::config::CLIENT_IO_BACKEND, "epoll");
    c.set(crate::config::SCHEDULER_IO_BACKEND, "io_uring");
    let got = AppsConfig::from_conf(&c).unwrap();
    assert_eq!(
        (got.client_io, got.scheduler_io),
        (BackendChoice::Epoll, BackendChoice::Uring)
    );
    c.set(crate::config::SCHEDULER_IO_BACKEND, "kqueue");
    let e = AppsConfig::from_conf(&c).unwrap_err().to_string();
    assert!(e.contains("hotpath.rm.scheduler.io-backend"), "{e}");
}
