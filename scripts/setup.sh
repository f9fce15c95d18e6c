#!/usr/bin/env bash
# Installs what hotpath needs on a fresh Debian/Ubuntu machine, and only what is missing:
#   - libhwloc-dev + pkg-config (the `hw` crate links libhwloc by default)
#   - a JDK and Maven (the real-Hadoop peers in peers/hadoop and peers/hadoop-mr)
#   - libkrb5-dev + libclang-dev (the `libgssapi` crate behind ipc's Kerberos client: bindgen over
#     MIT krb5's gssapi headers, found with pkg-config) and krb5-user (kinit/klist, used by the
#     Kerberos interop tests to fill a ticket cache from the MiniKdc keytab)
#   - krb5-kdc + krb5-admin-server (MIT's own KDC, kdb5_util and kadmin.local: the RFC 8009
#     enctype tests start one on loopback, since the peers' MiniKdc cannot issue those enctypes)
# Rust itself is expected from rustup (Debian's rustc is too old for this workspace).
# Sourced by scripts/demo and scripts/test; safe to run again.
set -euo pipefail

need_apt=()
dpkg -s libhwloc-dev >/dev/null 2>&1 || need_apt+=(libhwloc-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
dpkg -s libclang-dev >/dev/null 2>&1 || need_apt+=(libclang-dev)
command -v kinit >/dev/null 2>&1 || need_apt+=(krb5-user)
dpkg -s krb5-kdc >/dev/null 2>&1 || need_apt+=(krb5-kdc)
dpkg -s krb5-admin-server >/dev/null 2>&1 || need_apt+=(krb5-admin-server)
# scripts/test runs rustfmt and clippy before the tests; a rustup toolchain may lack them.
if command -v rustup >/dev/null 2>&1; then
  for comp in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$comp" || rustup component add "$comp"
  done
fi
if [ "${HOTPATH_NEED_JAVA:-1}" = 1 ]; then
  command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
  command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || {
  echo "setup: cargo not found; install Rust with rustup (https://rustup.rs), Rust >= 1.86" >&2
  exit 1
}
pkg-config --exists mit-krb5-gssapi || { echo "setup: mit-krb5-gssapi.pc missing after install (libkrb5-dev)" >&2; exit 1; }
command -v kinit >/dev/null 2>&1 || { echo "setup: kinit missing after install (krb5-user)" >&2; exit 1; }
[ -x /usr/sbin/krb5kdc ] && [ -x /usr/sbin/kadmin.local ] || { echo "setup: MIT's KDC missing after install (krb5-kdc, krb5-admin-server)" >&2; exit 1; }
if [ "${HOTPATH_NEED_JAVA:-1}" = 1 ]; then
  command -v java >/dev/null 2>&1 || { echo "setup: java missing after install" >&2; exit 1; }
  command -v mvn >/dev/null 2>&1 || { echo "setup: mvn missing after install" >&2; exit 1; }
fi
