#!/usr/bin/env bash
# Builds the two images of deploy/docker without Docker, as OCI archives, and runs them (docs/testing.md).
# As the Dockerfiles: release binaries (`release` for the CCM, `release-small` for the ECR provider) for amd64 and
# arm64, one multi-architecture archive per image (the CCM's with lb-plan and doctor beside it); `--quick` builds
# debug binaries for this machine only. The commands and options are in usage() below (`scripts/images.sh --help`).
#
# The Dockerfiles build the same thing with Docker BuildKit (cross-compiling from $BUILDPLATFORM); no Docker daemon
# or registry is reachable here, so the base images cannot be pulled and the builds are reproduced step by step.
# The static build uses its own target directory ($CCM_CACHE_DIR/target-static), since another RUSTFLAGS would
# rebuild the shared one.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
. "$here/lib.sh"

OUT="${OUT:-$CCM_CACHE_DIR/images}"
IMAGES=(aws-cloud-controller-manager ecr-credential-provider)
# The operator's tools, beside the binary in the aws-cloud-controller-manager image (as its Dockerfile puts them).
TOOLS=(lb-plan doctor)

usage() {
  cat <<EOF
usage: scripts/images.sh [--quick] [--arch amd64|arm64|amd64,arm64] COMMAND

Builds the images of deploy/docker without Docker, as OCI archives in $OUT, and runs them.

Commands:
  build        static binaries (crt-static) for each architecture: release for the CCM, release-small for the
               ECR provider, as the Dockerfiles; arm64 is cross-compiled with Debian's aarch64 cross gcc
  assemble     FROM scratch images with buildah (the binary, CA certificates, the Dockerfile's ENTRYPOINT and
               USER), one OCI archive per image with an index of every architecture built
  prove        runs each archive's image for this machine's architecture with runc: the CCM prints --help, the
               ECR provider answers a CredentialProviderRequest from moto (CCM_TEST_AWS_ENDPOINT)
  all          build, assemble and prove, starting moto when CCM_TEST_AWS_ENDPOINT is not set
  config FILE  the ENTRYPOINT and USER of a Dockerfile's last stage, as this script reads them

Options:
  --quick      a debug build (dev profile) for this machine's architecture only: minutes instead of the release
               builds' cold link-time optimisation, to try the script, not to ship
  --arch LIST  the architectures, comma-separated: amd64, arm64 (default: amd64,arm64, as the Dockerfiles)
  -h, --help   this text

Environment: OUT (where the archives go), PROFILE (one cargo profile for both binaries, overriding the above).
EOF
}

say() { printf '[images] %s\n' "$*" >&2; }
fail() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }
usage_error() { printf '[images] ERROR: %s\n\n' "$*" >&2; usage >&2; exit 2; }

# This machine's architecture, in Docker's names.
host_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) fail "unsupported build machine $(uname -m) (accepted: x86_64, aarch64)" ;;
  esac
}

# Docker's architecture name -> the Rust/GNU one.
gnu_arch() {
  case "$1" in
    amd64) echo x86_64 ;;
    arm64) echo aarch64 ;;
  esac
}

# The arguments, all read before any work: a typo costs nothing.
QUICK=0
ARCHS="amd64,arm64"
COMMAND=""
CONFIG_FILE=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --quick) QUICK=1 ;;
    --arch) [ $# -ge 2 ] || usage_error "--arch needs a value (amd64, arm64 or amd64,arm64)"; ARCHS="$2"; shift ;;
    --arch=*) ARCHS="${1#--arch=}" ;;
    -*) usage_error "unknown option $1" ;;
    build | assemble | prove | all)
      [ -z "$COMMAND" ] || usage_error "one command at a time (got $COMMAND and $1)"
      COMMAND="$1" ;;
    config)
      [ -z "$COMMAND" ] || usage_error "one command at a time (got $COMMAND and $1)"
      [ $# -ge 2 ] || usage_error "config needs a Dockerfile"
      COMMAND=config CONFIG_FILE="$2"; shift ;;
    *) usage_error "unknown command $1 (accepted: build, assemble, prove, all, config FILE)" ;;
  esac
  shift
done
[ -n "$COMMAND" ] || usage_error "no command given"
if [ "$QUICK" = 1 ]; then
  ARCHS="$(host_arch)"
  CCM_PROFILE=dev ECR_PROFILE=dev
else
  CCM_PROFILE=release ECR_PROFILE=release-small
fi
if [ -n "${PROFILE:-}" ]; then CCM_PROFILE="$PROFILE" ECR_PROFILE="$PROFILE"; fi
IFS=, read -r -a ARCH_LIST <<<"$ARCHS"
[ "${#ARCH_LIST[@]}" -gt 0 ] || usage_error "--arch is empty (accepted: amd64, arm64 or amd64,arm64)"
for arch in "${ARCH_LIST[@]}"; do
  case "$arch" in
    amd64 | arm64) ;;
    *) usage_error "--arch: unknown architecture '$arch' (accepted: amd64, arm64)" ;;
  esac
done

# Building and assembling install from Debian's archive (the cross compiler, buildah and the rest).
[ "$COMMAND" = config ] || check_os

# The profile a binary is built with, and the target directory's subdirectory it lands in.
profile_of() { if [ "$1" = ecr-credential-provider ]; then echo "$ECR_PROFILE"; else echo "$CCM_PROFILE"; fi; }
profile_dir() { if [ "$1" = dev ]; then echo debug; else echo "$1"; fi; }

# The tools, from Debian; each failure names the tool.
need_tools() {
  local missing=() tool
  for tool in buildah skopeo umoci runc; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} from Debian"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
      || fail "apt-get install ${missing[*]} failed: these tools build (buildah), convert (skopeo, umoci) and run (runc) the images"
  fi
}

# What building for `arch` on this machine takes: the Rust target, and for another architecture Debian's cross
# compiler and C library (as the Dockerfiles install them); sets LINKER_ENV for cargo.
need_target() {
  local arch="$1" gnu deb target
  gnu=$(gnu_arch "$arch") deb="$arch" target="$(gnu_arch "$arch")-unknown-linux-gnu"
  # In the repository, so that rustup acts on the toolchain rust-toolchain.toml pins.
  (cd "$repo" && { rustup target list --installed 2>/dev/null | grep -qx "$target" \
    || rustup target add "$target" >/dev/null; }) || fail "rustup target add $target failed"
  LINKER_ENV=()
  [ "$arch" != "$(host_arch)" ] || return 0
  local gcc="$gnu-linux-gnu-gcc"
  if ! command -v "$gcc" >/dev/null 2>&1 || [ ! -d "/usr/$gnu-linux-gnu/lib" ]; then
    say "installing the $arch cross compiler from Debian"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "gcc-${gnu//_/-}-linux-gnu" "libc6-dev-$deb-cross" >/dev/null \
      || fail "apt-get install gcc-${gnu//_/-}-linux-gnu libc6-dev-$deb-cross failed: $arch is cross-compiled with them"
  fi
  local env_target; env_target=$(tr 'a-z-' 'A-Z_' <<<"$target")
  LINKER_ENV=("CARGO_TARGET_${env_target}_LINKER=$gcc" "CC_${target//-/_}=$gcc")
}

# `config FILE`: ENTRYPOINT's JSON array and USER of the last stage.
dockerfile_config() {
  local file="$1" entrypoint user
  entrypoint=$(awk '/^FROM /{e=""} /^ENTRYPOINT /{sub(/^ENTRYPOINT /,""); e=$0} END{print e}' "$file")
  user=$(awk '/^FROM /{u=""} /^USER /{u=$2} END{print u}' "$file")
  [ -n "$entrypoint" ] || fail "$file: no ENTRYPOINT in its last stage"
  [ -n "$user" ] || fail "$file: no USER in its last stage"
  printf 'entrypoint=%s\nuser=%s\n' "$entrypoint" "$user"
}

# Static binaries for every architecture, stripped of debug info, in $OUT/bin/<arch>/. One cargo build per
# profile and architecture: the binaries of a profile share its compiled dependencies, and their link-time
# optimised links run side by side instead of one cargo run after another.
build() {
  local dir="$CCM_CACHE_DIR/target-static" arch name profile
  # The tools ship in the CCM image, built as the CCM is.
  local names=("${IMAGES[@]}" "${TOOLS[@]}")
  for arch in "${ARCH_LIST[@]}"; do
    local gnu target machine objcopy
    gnu=$(gnu_arch "$arch") target="$(gnu_arch "$arch")-unknown-linux-gnu"
    need_target "$arch"
    machine=$([ "$arch" = amd64 ] && echo x86-64 || echo aarch64)
    objcopy=objcopy; [ "$arch" = "$(host_arch)" ] || objcopy="$gnu-linux-gnu-objcopy"
    mkdir -p "$OUT/bin/$arch"
    for profile in $(for name in "${names[@]}"; do profile_of "$name"; done | sort -u); do
      local bins=()
      for name in "${names[@]}"; do
        if [ "$(profile_of "$name")" = "$profile" ]; then bins+=(--bin "$name"); fi
      done
      say "building ${bins[*]} ($profile, $target, crt-static) in $dir"
      (cd "$repo" && env "${LINKER_ENV[@]}" CARGO_TARGET_DIR="$dir" RUSTFLAGS='-C target-feature=+crt-static' \
        cargo build --locked --profile "$profile" --target "$target" -p ccm-examples "${bins[@]}") \
        || fail "cargo build of ${bins[*]} ($profile) for $target failed"
    done
    for name in "${names[@]}"; do
      local bin; bin="$dir/$target/$(profile_dir "$(profile_of "$name")")/$name"
      file "$bin" | grep -q 'static' || fail "$bin is not statically linked: $(file -b "$bin")"
      file "$bin" | grep -q "$machine" || fail "$bin is not a $arch binary: $(file -b "$bin")"
      "$objcopy" --strip-debug "$bin" "$OUT/bin/$arch/$name"
    done
  done
  say "static binaries in $OUT/bin/{${ARCHS}}"
}

# One image per architecture, then an OCI archive whose index lists them all (as `docker buildx --push` would).
assemble() {
  need_tools
  local ca=/etc/ssl/certs/ca-certificates.crt name arch
  [ -f "$ca" ] || fail "$ca is missing (Debian's ca-certificates): the images need it for TLS to AWS"
  for name in "${IMAGES[@]}"; do
    local conf entrypoint user list="localhost/images-$name-list:$$" out images=()
    conf=$(dockerfile_config "$repo/deploy/docker/$name.Dockerfile")
    entrypoint=$(sed -n 's/^entrypoint=//p' <<<"$conf")
    user=$(sed -n 's/^user=//p' <<<"$conf")
    out=$(buildah manifest create "$list" 2>&1) || fail "buildah manifest create failed: $out"
    for arch in "${ARCH_LIST[@]}"; do
      local bin="$OUT/bin/$arch/$name" ctr image="localhost/images-$name:$arch-$$"
      [ -x "$bin" ] || fail "$bin is missing: run '$0 build' with the same options first"
      ctr=$(buildah from --name "images-$name-$arch-$$" scratch 2>&1) \
        || fail "buildah cannot create a container from scratch here: $ctr"
      buildah copy --quiet --chmod 0755 "$ctr" "$bin" "/bin/$name" >/dev/null
      if [ "$name" = aws-cloud-controller-manager ]; then
        local tool
        for tool in "${TOOLS[@]}"; do
          [ -x "$OUT/bin/$arch/$tool" ] || fail "$OUT/bin/$arch/$tool is missing: run '$0 build' with the same options first"
          buildah copy --quiet --chmod 0755 "$ctr" "$OUT/bin/$arch/$tool" "/bin/$tool" >/dev/null
        done
      fi
      buildah copy --quiet --chmod 0644 "$ctr" "$ca" /etc/ssl/certs/ca-certificates.crt >/dev/null
      buildah config --entrypoint "$entrypoint" --user "$user" --os linux --arch "$arch" "$ctr"
      buildah commit --quiet --rm "$ctr" "$image" >/dev/null || fail "buildah commit of $name ($arch) failed"
      out=$(buildah manifest add "$list" "containers-storage:$image" 2>&1) \
        || fail "buildah manifest add of $name ($arch) failed: $out"
      images+=("$image")
    done
    rm -f "$OUT/$name.oci.tar"
    out=$(buildah manifest push --quiet --all "$list" "oci-archive:$OUT/$name.oci.tar:latest" 2>&1) \
      || fail "buildah manifest push of $name failed: $out"
    # The list and the per-architecture images were only the way to the archive.
    buildah manifest rm "$list" >/dev/null 2>&1 || true
    buildah rmi "${images[@]}" >/dev/null 2>&1 || true
    say "$OUT/$name.oci.tar: $(du -h "$OUT/$name.oci.tar" | cut -f1), ${ARCHS}, entrypoint $entrypoint, user $user"
  done
}

# Unpacks an archive into a runtime bundle: the image's own entrypoint and user, the host's network (moto listens
# on 127.0.0.1) and /etc/hosts, no terminal.
bundle() {
  local name="$1" work="$2" out
  rm -rf "$work/layout" "$work/bundle"
  out=$(skopeo copy --quiet "oci-archive:$OUT/$name.oci.tar:latest" "oci:$work/layout:latest" 2>&1) \
    || fail "skopeo cannot read $OUT/$name.oci.tar: $out"
  out=$(umoci unpack --image "$work/layout:latest" "$work/bundle" 2>&1) || fail "umoci cannot unpack $name: $out"
  python3 - "$work/bundle/config.json" <<'EOF'
import json, sys
path = sys.argv[1]
c = json.load(open(path))
c["process"]["terminal"] = False
c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
# As the kubelet does: the host's /etc/hosts, so that the static binary's resolver is exercised (localhost below).
c["mounts"].append({"destination": "/etc/hosts", "type": "bind", "source": "/etc/hosts", "options": ["rbind", "ro"]})
json.dump(c, open(path, "w"))
EOF
}

# Runs the bundle with extra arguments after the entrypoint and extra environment; stdin passes through.
run_bundle() {
  local work="$1"; shift
  local args="$1" env="$2"
  python3 - "$work/bundle/config.json" "$args" "$env" <<'EOF'
import json, sys
path, args, env = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
c = json.load(open(path))
c["process"]["args"] = c["process"]["args"][:1] + args
c["process"]["env"] = [e for e in c["process"].get("env", []) if e.startswith("PATH=")] + env
json.dump(c, open(path, "w"))
EOF
  runc run --bundle "$work/bundle" "images-$$-$RANDOM"
}

# Each archive's index lists exactly the architectures built.
check_index() {
  local name="$1" raw
  raw=$(skopeo inspect --raw "oci-archive:$OUT/$name.oci.tar:latest" 2>&1) || fail "skopeo cannot read $OUT/$name.oci.tar: $raw"
  python3 - "$raw" "$ARCHS" "$name" <<'EOF' || fail "$OUT/$name.oci.tar does not index the architectures $ARCHS"
import json, sys
index, wanted, name = json.loads(sys.argv[1]), sorted(sys.argv[2].split(",")), sys.argv[3]
found = sorted(m["platform"]["architecture"] for m in index.get("manifests", []))
if found != wanted:
    sys.exit(f"{name}: the index lists {found}, built {wanted}")
EOF
}

prove() {
  need_tools
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  [ "$(id -u)" -eq 0 ] || fail "runc needs root here (rootless runc needs a user-namespaced bundle; not set up)"
  local name
  for name in "${IMAGES[@]}"; do check_index "$name"; done
  [[ ",$ARCHS," == *",$(host_arch),"* ]] \
    || fail "the archives hold no $(host_arch) image to run on this machine (--arch $ARCHS)"

  bundle aws-cloud-controller-manager "$work"
  local help
  help=$(run_bundle "$work" '["--help"]' '[]' 2>&1) || fail "runc could not run the CCM image (--help): $help"
  grep -q -- '--cloud-provider' <<<"$help" || fail "the CCM image's --help does not list --cloud-provider:\n$help"
  say "aws-cloud-controller-manager image: --help ok ($(grep -c -- '--' <<<"$help") flag lines), as user $(python3 -c "import json;u=json.load(open('$work/bundle/config.json'))['process']['user'];print(u['uid'])")"

  [ -n "${CCM_TEST_AWS_ENDPOINT:-}" ] || fail "CCM_TEST_AWS_ENDPOINT is not set: source a test environment (docs/testing.md) or use '$0 all'"
  bundle ecr-credential-provider "$work"
  local request='{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1"}'
  local env response
  # moto by name (localhost), so that the statically linked resolver reads /etc/hosts as it will on a node.
  local endpoint="${CCM_TEST_AWS_ENDPOINT/127.0.0.1/localhost}"
  env=$(printf '["AWS_ENDPOINT_URL=%s","AWS_ACCESS_KEY_ID=testing","AWS_SECRET_ACCESS_KEY=testing","AWS_EC2_METADATA_DISABLED=true","HOME=/"]' "$endpoint")
  response=$(run_bundle "$work" '["get-credentials"]' "$env" <<<"$request" 2>"$work/ecr.err") \
    || fail "the ECR image refused the request: $(cat "$work/ecr.err")"
  python3 - "$response" <<'EOF' || fail "the ECR image's answer is not a credential response: $response"
import json, sys
r = json.loads(sys.argv[1])
assert r["kind"] == "CredentialProviderResponse", r
auth = r["auth"]["123456789012.dkr.ecr.us-east-1.amazonaws.com"]
assert auth["username"] == "AWS" and auth["password"], r
EOF
  say "ecr-credential-provider image: answered a CredentialProviderRequest with a token from moto at $endpoint"
  printf '%s\n' "$response"
}

case "$COMMAND" in
  build) build ;;
  assemble) assemble ;;
  prove) prove ;;
  all)
    build
    assemble
    if [ -z "${CCM_TEST_AWS_ENDPOINT:-}" ]; then start_testenv; fi
    prove
    ;;
  config) dockerfile_config "$CONFIG_FILE" ;;
esac
