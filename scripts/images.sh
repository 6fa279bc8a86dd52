#!/usr/bin/env bash
# Builds the two images of deploy/docker without Docker, as OCI archives, and runs them (docs/testing.md):
#
#   scripts/images.sh build          # static binaries: cargo --target x86_64-unknown-linux-gnu, crt-static
#   scripts/images.sh assemble       # FROM scratch with buildah: the binaries, CA certificates, the Dockerfiles'
#                                    # ENTRYPOINT and USER -> $OUT/{aws-cloud-controller-manager,ecr-credential-provider}.oci.tar
#   scripts/images.sh prove          # unpack each archive (skopeo, umoci) and run it with runc: the CCM image
#                                    # prints --help, the ECR image answers a CredentialProviderRequest from moto
#   scripts/images.sh all            # the three, starting moto when CCM_TEST_AWS_ENDPOINT is not set
#   scripts/images.sh config FILE    # the final stage's ENTRYPOINT and USER of a Dockerfile, as this script reads them
#
# The Dockerfiles build the same thing with Docker BuildKit (cross-compiling from $BUILDPLATFORM); no Docker daemon
# or registry is reachable here, so the base images cannot be pulled and the builds are reproduced step by step.
# Output under $CCM_CACHE_DIR/images (OUT overrides); the static build uses its own target directory
# ($CCM_CACHE_DIR/target-static), since another RUSTFLAGS would rebuild the shared one. PROFILE=release builds
# release binaries (default: dev, stripped of debug info in the images).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
. "$here/lib.sh"

OUT="${OUT:-$CCM_CACHE_DIR/images}"
PROFILE="${PROFILE:-dev}"
TARGET=x86_64-unknown-linux-gnu
IMAGES=(aws-cloud-controller-manager ecr-credential-provider)

say() { printf '[images] %s\n' "$*" >&2; }
fail() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

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

# `config FILE`: ENTRYPOINT's JSON array and USER of the last stage.
dockerfile_config() {
  local file="$1" entrypoint user
  entrypoint=$(awk '/^FROM /{e=""} /^ENTRYPOINT /{sub(/^ENTRYPOINT /,""); e=$0} END{print e}' "$file")
  user=$(awk '/^FROM /{u=""} /^USER /{u=$2} END{print u}' "$file")
  [ -n "$entrypoint" ] || fail "$file: no ENTRYPOINT in its last stage"
  [ -n "$user" ] || fail "$file: no USER in its last stage"
  printf 'entrypoint=%s\nuser=%s\n' "$entrypoint" "$user"
}

build() {
  local dir="$CCM_CACHE_DIR/target-static"
  say "building static binaries ($PROFILE, $TARGET, crt-static) in $dir"
  (cd "$repo" && CARGO_TARGET_DIR="$dir" RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --locked --profile "$PROFILE" --target "$TARGET" -p ccm-examples \
      --bin aws-cloud-controller-manager --bin ecr-credential-provider) || fail "cargo build of the static binaries failed"
  local sub="$PROFILE"; [ "$PROFILE" = dev ] && sub=debug
  mkdir -p "$OUT/bin"
  for name in "${IMAGES[@]}"; do
    local bin="$dir/$TARGET/$sub/$name"
    file "$bin" | grep -q 'static' || fail "$bin is not statically linked: $(file -b "$bin")"
    objcopy --strip-debug "$bin" "$OUT/bin/$name"
  done
  say "static binaries in $OUT/bin"
}

assemble() {
  need_tools
  local ca=/etc/ssl/certs/ca-certificates.crt
  [ -f "$ca" ] || fail "$ca is missing (Debian's ca-certificates): the images need it for TLS to AWS"
  for name in "${IMAGES[@]}"; do
    local bin="$OUT/bin/$name" conf entrypoint user ctr
    [ -x "$bin" ] || fail "$bin is missing: run '$0 build' first"
    conf=$(dockerfile_config "$repo/deploy/docker/$name.Dockerfile")
    entrypoint=$(sed -n 's/^entrypoint=//p' <<<"$conf")
    user=$(sed -n 's/^user=//p' <<<"$conf")
    ctr=$(buildah from --name "images-$name-$$" scratch 2>&1) \
      || fail "buildah cannot create a container from scratch here: $ctr"
    buildah copy --quiet --chmod 0755 "$ctr" "$bin" "/bin/$name" >/dev/null
    buildah copy --quiet --chmod 0644 "$ctr" "$ca" /etc/ssl/certs/ca-certificates.crt >/dev/null
    buildah config --entrypoint "$entrypoint" --user "$user" --os linux --arch amd64 "$ctr"
    rm -f "$OUT/$name.oci.tar"
    buildah commit --quiet --rm "$ctr" "oci-archive:$OUT/$name.oci.tar:latest" >/dev/null \
      || fail "buildah commit of $name failed"
    say "$OUT/$name.oci.tar: $(du -h "$OUT/$name.oci.tar" | cut -f1), entrypoint $entrypoint, user $user"
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

prove() {
  need_tools
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  [ "$(id -u)" -eq 0 ] || fail "runc needs root here (rootless runc needs a user-namespaced bundle; not set up)"

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

case "${1:-}" in
  build) build ;;
  assemble) assemble ;;
  prove) prove ;;
  all)
    build
    assemble
    if [ -z "${CCM_TEST_AWS_ENDPOINT:-}" ]; then start_testenv; fi
    prove
    ;;
  config) dockerfile_config "${2:?usage: $0 config DOCKERFILE}" ;;
  *) fail "usage: $0 build|assemble|prove|all|config DOCKERFILE" ;;
esac
