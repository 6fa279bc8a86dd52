# Shared settings for the test-environment scripts. Sourced, never run.
# Everything heavy (virtualenv, the kube-apiserver binary, cargo output) lives under a cache directory outside
# the clone, so that only the first run on a machine pays for it.

CCM_CACHE_DIR="${CCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/aws-ccm-rs}"
# Pinned versions: bump deliberately, the cache paths include them.
MOTO_VERSION="5.2.5"
# The second AWS emulator (EC2, ELBv2, ECR, STS; no Classic ELB): see docs/testing.md, "Two emulators".
MINISTACK_VERSION="1.5.33"
KUBE_DEB_VERSION="1.20.5+really1.20.2-1.1+deb12u1"
KUBE_ORIG_VERSION="1.20.5+really1.20.2"

MOTO_VENV="$CCM_CACHE_DIR/moto-$MOTO_VERSION"
MINISTACK_VENV="$CCM_CACHE_DIR/ministack-$MINISTACK_VERSION"
# Both built by build-kubernetes.sh from one source download.
KUBE_BIN_DIR="$CCM_CACHE_DIR/kubernetes-$KUBE_ORIG_VERSION"
KUBE_APISERVER_BIN="$KUBE_BIN_DIR/kube-apiserver"
GO_CCM_BIN="$KUBE_BIN_DIR/aws-cloud-controller-manager-go"

# Each line carries the time of day, so that a long first run shows where its minutes went.
# The library crates, in dependency order: what a controller may depend on and what check-crates.sh packages,
# builds in a scratch consumer and semver-checks. ccm-testing, examples, harness and benches are internal.
LIBRARY_CRATES=(
  ccm-cloud-provider ccm-controllers ccm-tagging ccm-aws-api ccm-aws-sdk ccm-instances ccm-load-balancers
  ccm-routes ccm-ecr-credentials ccm-cloud-config ccm-aws ccm-controller-manager
)

log() { printf '[testenv %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf '[testenv %s] ERROR: %s\n' "$(date +%T)" "$*" >&2; exit 1; }

# The comment block at the top of script $1 (after the shebang, up to the first line that is not a comment), as
# its usage: every script documents its arguments there, and prints it on --help.
script_help() {
  sed -n '2,/^[^#]/{/^#/{s/^# \{0,1\}//;p}}' "$1"
}

# A script that takes no arguments: --help prints its usage, anything else is refused before any work.
no_arguments() {
  local script="$1"; shift
  case "${1:-}" in
    "") ;;
    -h | --help) script_help "$script"; exit 0 ;;
    *) die "$(basename "$script"): unknown argument $1 (it takes none; --help prints its usage)" ;;
  esac
}

# The machines these scripts install onto: Debian 12 (bookworm). setup.sh installs etcd, Go and kubectl with
# apt-get from Debian's archive, and build-kubernetes.sh builds kube-apiserver and the Go controller from
# bookworm's `kubernetes` source package (1.20.2), which no other release carries. Checked before any work, so
# that another system fails at once with this message rather than midway through an install. CCM_OS_RELEASE
# names another os-release file (tests); CCM_SKIP_OS_CHECK=1 tries anyway (for a derivative that carries
# bookworm's packages).
check_os() {
  [ "${CCM_SKIP_OS_CHECK:-}" = 1 ] && return 0
  local file="${CCM_OS_RELEASE:-/etc/os-release}" id version name
  [ -r "$file" ] || die "cannot read $file to check the system: these scripts support Debian 12 (bookworm) only (CCM_SKIP_OS_CHECK=1 tries anyway)"
  id=$(. "$file" && echo "${ID:-}")
  version=$(. "$file" && echo "${VERSION_ID:-}")
  name=$(. "$file" && echo "${PRETTY_NAME:-${ID:-an unnamed system} ${VERSION_ID:-}}")
  [ "$id" = debian ] && [ "$version" = 12 ] \
    || die "this machine runs $name; these scripts support Debian 12 (bookworm) only: they install with apt-get from its archive and build Kubernetes 1.20.2 from its kubernetes source package (CCM_SKIP_OS_CHECK=1 tries anyway)"
}

# Runs apt-get as root, through sudo when needed.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Stops a background job and everything it started (a script's cargo and its rustc), children first.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# Installs cargo tool NAME (its command BINARY) from crates.io unless it is on PATH; WHY names its user. Each
# `cargo install` builds in a scratch target directory of its own (never a CARGO_TARGET_DIR the caller set, whose
# lock the workspace's builds hold), so it runs beside them. Unoptimised builds without debug information: release
# builds took long on a fresh machine (cargo-nextest alone 12 minutes beside the workspace's first build), and the
# tools' own speed does not matter here.
install_tool() {
  local name="$1" binary="$2" why="$3" dir status=0
  command -v "$binary" >/dev/null 2>&1 && return 0
  log "installing $name from crates.io ($why)"
  dir="$(mktemp -d)"
  CARGO_PROFILE_DEV_DEBUG=0 cargo install "$name" --locked --debug --quiet --target-dir "$dir" || status=$?
  rm -rf "$dir"
  [ "$status" -eq 0 ] || die "cargo install $name failed: $why"
}

# A free TCP port on 127.0.0.1, chosen by the kernel.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Runs scripts/setup.sh with the given arguments in the background, its messages going to stderr as they come,
# so that the caller's cargo build runs beside it: the Go build of kube-apiserver and the downloads fill the
# core that rustc leaves idle while one huge SDK crate compiles alone. wait_setup waits for it.
setup_in_background() {
  local scripts
  scripts="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  "$scripts/setup.sh" "$@" &
  SETUP_PID=$!
}

wait_setup() {
  wait "$SETUP_PID" || die "scripts/setup.sh failed (its messages are above)"
}

# Installs (cached; skipped when setup_in_background ran) and starts the environment for the rest of the calling
# script, stops it when that script exits, and exports the CCM_TEST_* variables. Sets TESTENV_DIR.
start_testenv() {
  local scripts
  scripts="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  if [ -n "${SETUP_PID:-}" ]; then wait_setup; else "$scripts/setup.sh" "$@"; fi
  TESTENV_DIR=$("$scripts/testenv.sh" up) || die "the test environment did not start (see the messages above)"
  # shellcheck disable=SC2064 # expand now: the trap must stop this very environment
  trap "'$scripts/testenv.sh' down '$TESTENV_DIR'" EXIT
  set -a
  # shellcheck disable=SC1091
  . "$TESTENV_DIR/env"
  set +a
}

# The nextest filter of the ministack group: the moto-test binaries (`*_moto`, and `paging`) less the tests
# listed in FILE (`binary` or `binary::test` first on each line; `#` starts a comment line).
ministack_filter() {
  local expr='(binary(/_moto$/) | binary(=paging))' entry name
  while read -r entry _; do
    case "$entry" in '' | '#'*) continue ;; esac
    name=${entry%%::*}
    if [ "$entry" = "$name" ]; then
      expr+=" - binary(=$name)"
    else
      expr+=" - (binary(=$name) & test(=${entry#*::}))"
    fi
  done <"$1"
  printf '%s' "$expr"
}
