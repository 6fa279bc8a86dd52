#!/usr/bin/env bash
# Builds two binaries of Kubernetes 1.20.2 from Debian bookworm's `kubernetes` source package, offline, with
# Debian's Go, in one build that shares every common package:
#   - kube-apiserver, the test environment's apiserver: $KUBE_APISERVER_BIN (about 110 MB);
#   - the Go cloud controller manager with its in-tree AWS provider, the peer our controller is compared with,
#     takes over from and rolls back to: $GO_CCM_BIN. Its main is scripts/go-ccm/main.go (1.20.2's own is a
#     sample that ignores --cloud-provider, see that file); nothing else of the tree is changed.
# No registry ships these binaries; this source package carries the whole tree with its dependencies. The
# system's apt sources are left untouched: a private apt configuration derives deb-src entries from them. The
# ~1.5 GB of build output is deleted.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/lib.sh"
no_arguments "$0" "$@"
check_os

if [ -x "$KUBE_APISERVER_BIN" ] && [ -x "$GO_CCM_BIN" ]; then
  log "kube-apiserver and the Go cloud controller manager already built in $KUBE_BIN_DIR"
  exit 0
fi

# Kubernetes' make needs rsync besides Go.
missing=()
command -v go >/dev/null 2>&1 || missing+=(golang-go)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]} from Debian"
  as_root apt-get install -y -q "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi

work="$CCM_CACHE_DIR/kube-build"
rm -rf "$work"
mkdir -p "$work/apt/lists/partial" "$work/src"

# Derive deb-src lines from the machine's Debian sources (deb822 .sources files and one-line .list files).
python3 - "$work/apt/sources.list" <<'PY'
import glob, re, sys
out = []
def add(uri, suite, comps, signed):
    opt = f"[signed-by={signed}] " if signed else ""
    line = f"deb-src {opt}{uri} {suite} {' '.join(comps)}"
    if "debian" in uri and line not in out:
        out.append(line)
for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for raw in stanza.splitlines():
            if raw.startswith("#") or ":" not in raw:
                continue
            k, v = raw.split(":", 1)
            fields[k.strip().lower()] = v.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                add(uri, suite, fields.get("components", "main").split(), fields.get("signed-by"))
for path in ["/etc/apt/sources.list"] + glob.glob("/etc/apt/sources.list.d/*.list"):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for raw in lines:
        m = re.match(r"^\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$", raw)
        if m:
            opts = m.group(1) or ""
            sb = re.search(r"signed-by=(\S+?)[\]\s]", opts)
            add(m.group(2), m.group(3), m.group(4).split(), sb.group(1) if sb else None)
if not out:
    sys.exit("no Debian apt source found under /etc/apt to derive a deb-src entry from")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
log "deb-src entries: $(tr '\n' ';' < "$work/apt/sources.list")"

apt_private=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "APT::Sandbox::User=root")
mkdir -p "$work/apt/cache/archives/partial"
apt-get "${apt_private[@]}" update -q >/dev/null || die "private apt-get update (deb-src) failed"
(cd "$work/src" && apt-get "${apt_private[@]}" source --download-only -q "kubernetes=$KUBE_DEB_VERSION" >/dev/null) \
  || die "apt-get source kubernetes=$KUBE_DEB_VERSION failed"

orig="$work/src/kubernetes_${KUBE_ORIG_VERSION}.orig.tar.gz"
[ -f "$orig" ] || die "missing $orig after apt-get source"
mkdir -p "$work/gopath/src/k8s.io/kubernetes"
tar -xzf "$orig" -C "$work/gopath/src/k8s.io/kubernetes" --strip-components=1

tree="$work/gopath/src/k8s.io/kubernetes"
mkdir -p "$tree/cmd/aws-ccm-peer"
cp "$here/go-ccm/main.go" "$tree/cmd/aws-ccm-peer/main.go"

log "building kube-apiserver and the Go cloud controller manager (about 10 minutes on 2 cores; only the first run on a machine pays this)"
(
  cd "$tree"
  unset GOFLAGS
  export GOPATH="$work/gopath" GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GO111MODULE=auto GOCACHE="$work/gocache"
  make WHAT="cmd/kube-apiserver cmd/aws-ccm-peer" >"$work/build.log" 2>&1
) || { tail -n 40 "$work/build.log" >&2; die "the Kubernetes build failed (log: $work/build.log)"; }

# Copies the built binary $1 to $2 (through a temporary name, so that an interrupted copy is never trusted).
install_built() {
  local built="$tree/_output/bin/$1"
  [ -x "$built" ] || built="$(find "$tree/_output" -type f -name "$1" | head -n1)"
  [ -x "$built" ] || die "the build finished but no $1 binary was found"
  cp "$built" "$2.tmp" && mv "$2.tmp" "$2"
}
mkdir -p "$KUBE_BIN_DIR"
install_built kube-apiserver "$KUBE_APISERVER_BIN"
install_built aws-ccm-peer "$GO_CCM_BIN"
rm -rf "$work"
log "kube-apiserver ready: $KUBE_APISERVER_BIN ($("$KUBE_APISERVER_BIN" --version 2>/dev/null))"
log "the Go cloud controller manager ready: $GO_CCM_BIN ($("$GO_CCM_BIN" --version 2>/dev/null))"
