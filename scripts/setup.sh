#!/usr/bin/env bash
# Installs everything the test environment needs, idempotently; cheap after the first run on a machine:
#   - moto (pinned) in a virtualenv under the cache directory,
#   - etcd from Debian's etcd-server,
#   - kube-apiserver 1.20.2 built from Debian's kubernetes source package (see build-kube-apiserver.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/lib.sh"
mkdir -p "$CCM_CACHE_DIR"

missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)  # `kubectl kustomize` for the deploy manifests test
# Go text/template with Sprig and Helm's YAML: the deploy tests render the Helm chart with them (no Helm package).
command -v go >/dev/null 2>&1 || missing+=(golang-go)
[ -d /usr/share/gocode/src/github.com/Masterminds/sprig ] || missing+=(golang-github-masterminds-sprig-dev)
[ -d /usr/share/gocode/src/github.com/ghodss/yaml ] || missing+=(golang-github-ghodss-yaml-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]} from Debian"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed: the test environment needs them"
fi
# Debian's package starts a system etcd where systemd runs; ours runs on its own ports, so that one is harmless.

# The stamp file marks a complete install, so an interrupted pip run is redone rather than trusted.
if [ ! -f "$MOTO_VENV/.complete" ]; then
  log "installing moto[server]==$MOTO_VERSION into $MOTO_VENV"
  rm -rf "$MOTO_VENV"
  python3 -m venv "$MOTO_VENV" || die "python3 -m venv failed (is python3-venv installed?)"
  "$MOTO_VENV/bin/pip" install -q --disable-pip-version-check "moto[server]==$MOTO_VERSION" \
    || { rm -rf "$MOTO_VENV"; die "pip install moto[server]==$MOTO_VERSION failed"; }
  touch "$MOTO_VENV/.complete"
fi

# The fuzz smoke run (scripts/fuzz-smoke.sh, the test command's last step) needs cargo-fuzz; the nightly toolchain it
# runs on comes with this machine kind (rustup cannot download toolchains here), and the script fails, naming it,
# where it is missing.
if ! cargo fuzz --version >/dev/null 2>&1; then
  log "installing cargo-fuzz from crates.io"
  cargo install cargo-fuzz --locked --quiet || die "cargo install cargo-fuzz failed: the fuzz smoke run needs it"
fi

# scripts/check-crates.sh checks licenses, bans and sources with cargo-deny (deny.toml).
if ! cargo deny --version >/dev/null 2>&1; then
  log "installing cargo-deny from crates.io"
  cargo install cargo-deny --locked --quiet || die "cargo install cargo-deny failed: scripts/check-crates.sh needs it"
fi

"$here/build-kube-apiserver.sh"
log "setup complete: moto $MOTO_VERSION, $(etcd --version | head -n1), kube-apiserver $("$KUBE_APISERVER_BIN" --version)"
