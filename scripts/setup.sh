#!/usr/bin/env bash
# Installs everything the test command needs, idempotently; cheap after the first run on a machine:
#   - the environment: moto and ministack (pinned) in virtualenvs under the cache directory, etcd and the Go toolchain from
#     Debian, kube-apiserver 1.20.2 and the Go cloud controller manager 1.20.2 (the peer), both built from
#     Debian's kubernetes source package (see build-kubernetes.sh);
#   - the test tools (skipped with --environment, which is all the sandbox needs): cargo-nextest, cargo-deny
#     and cargo-fuzz from crates.io (cargo-semver-checks: scripts/semver-check.sh installs it when missing).
#
#   scripts/setup.sh                  # what scripts/test.sh needs
#   scripts/setup.sh --environment    # what scripts/sandbox.sh needs
#
# Debian 12 (bookworm) only: it installs with apt-get from its archive and builds from its source packages.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/lib.sh"
tools=1
case "${1:-}" in
  "") ;;
  --environment) tools=0 ;;
  -h | --help) script_help "$0"; exit 0 ;;
  *) die "setup.sh: unknown argument ${1} (accepted: --environment, or none; --help prints the usage)" ;;
esac
[ $# -le 1 ] || die "setup.sh: one argument at most (got $*)"
check_os
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

if [ ! -f "$MINISTACK_VENV/.complete" ]; then
  log "installing ministack==$MINISTACK_VERSION into $MINISTACK_VENV"
  rm -rf "$MINISTACK_VENV"
  python3 -m venv "$MINISTACK_VENV" || die "python3 -m venv failed (is python3-venv installed?)"
  "$MINISTACK_VENV/bin/pip" install -q --disable-pip-version-check "ministack==$MINISTACK_VERSION" \
    || { rm -rf "$MINISTACK_VENV"; die "pip install ministack==$MINISTACK_VERSION failed"; }
  touch "$MINISTACK_VENV/.complete"
fi

# The Kubernetes build is the longest step and needs nothing else here: it starts first, in the background.
"$here/build-kubernetes.sh" &
kube_build=$!

# The test tools, from crates.io, compiled once per machine (install_tool, lib.sh), beside the workspace's build.
# cargo-semver-checks is not among them: scripts/test.sh installs it beside the test groups, which leave a core idle
# (installed here it held the set-up, and so every test, back by 16 minutes on a fresh machine).
if [ "$tools" -eq 1 ]; then
  install_tool cargo-nextest cargo-nextest "scripts/test.sh runs every test with it"
  install_tool cargo-deny cargo-deny "scripts/check-crates.sh checks licenses, bans and sources with it"
  # The nightly toolchain the fuzz smoke run builds with comes with this machine kind (rustup cannot download
  # toolchains here); scripts/fuzz-smoke.sh fails, naming it, where it is missing.
  install_tool cargo-fuzz cargo-fuzz "scripts/fuzz-smoke.sh runs the fuzz targets with it"
fi

wait "$kube_build" || die "building Kubernetes failed (see the messages above)"
log "setup complete: moto $MOTO_VERSION, ministack $MINISTACK_VERSION, $(etcd --version | head -n1), kube-apiserver $("$KUBE_APISERVER_BIN" --version), the Go cloud controller manager $("$GO_CCM_BIN" --version)"
