#!/usr/bin/env bash
# Builds the published library crates the way a controller author gets them: as dependencies of a scratch crate
# outside the repository, once with k8s-openapi's `latest` API version and once with `earliest`. k8s-openapi's
# version features exclude each other, so a library that selected a version itself fails one of the two builds.
# Offline (scripts/check-crates.sh fetched every crate), with the workspace's Cargo.lock (same versions as the
# tests) and its target directory. `cargo check`: what is checked is that each library compiles with each version
# selected by the consumer, and check mode shares its dependencies' metadata with `cargo doc`'s instead of building.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
. "$here/lib.sh"
no_arguments "$0" "$@"

libs=("${LIBRARY_CRATES[@]}")
k8s_openapi_version="$(sed -n 's/^k8s-openapi = "\(.*\)"$/\1/p' "$repo/Cargo.toml")"
[ -n "$k8s_openapi_version" ] || die "consumer-check: no plain k8s-openapi version in the workspace manifest"

# The workspace's target directory (the scratch crate's own would rebuild everything, the AWS SDK included).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src"
# Naming each crate makes the build fail if one stops being a library.
for lib in "${libs[@]}"; do printf 'extern crate %s as _;\n' "${lib//-/_}"; done >"$scratch/src/lib.rs"
cp "$repo/Cargo.lock" "$scratch/Cargo.lock"
# The repository's toolchain, as in the workspace: outside it rustup would pick its default one.
cp "$repo/rust-toolchain.toml" "$scratch/rust-toolchain.toml"

for version in latest earliest; do
  {
    printf '[package]\nname = "scratch-consumer"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
    printf '[workspace]\n\n[dependencies]\n'
    printf 'k8s-openapi = { version = "%s", features = ["%s"] }\n' "$k8s_openapi_version" "$version"
    for lib in "${libs[@]}"; do printf '%s = { path = "%s/crates/%s" }\n' "$lib" "$repo" "$lib"; done
  } >"$scratch/Cargo.toml"
  log "consumer-check: the library crates in a scratch crate with k8s-openapi \"$version\""
  # K8S_OPENAPI_ENABLED_VERSION would select a version beside the feature: the check is of the features alone.
  (cd "$scratch" && env -u K8S_OPENAPI_ENABLED_VERSION cargo check --offline --quiet --lib)
done
# ccm-aws-sdk with one AWS service's feature alone (docs/using-the-crates.md): its SDK crate and no other, as the
# resolved tree says, and it compiles.
service_alone() {
  local feature="$1" want="$2" got
  {
    printf '[package]\nname = "scratch-consumer"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
    printf '[workspace]\n\n[dependencies]\n'
    printf 'ccm-aws-sdk = { path = "%s/crates/ccm-aws-sdk", default-features = false, features = ["%s"] }\n' \
      "$repo" "$feature"
  } >"$scratch/Cargo.toml"
  printf '' >"$scratch/src/lib.rs"
  # The workspace's lock each time: cargo prunes the scratch copy to the packages the last build used.
  cp "$repo/Cargo.lock" "$scratch/Cargo.lock"
  got="$(cd "$scratch" && cargo tree --offline -e normal,build --prefix none --format '{p}' \
    | sed 's/ .*//' | grep '^aws-sdk-' | sort -u | tr '\n' ' ')"
  [ "$got" = "$want " ] || die "consumer-check: ccm-aws-sdk with \"$feature\" alone compiles the SDK crates '$got', not '$want'"
  log "consumer-check: ccm-aws-sdk with \"$feature\" alone: $want only ($(cd "$scratch" && cargo tree --offline \
    -e normal,build --prefix none --format '{p}' | sed 's/ (.*//' | sort -u | wc -l) packages)"
  (cd "$scratch" && cargo check --offline --quiet --lib)
}
service_alone ecr aws-sdk-ecr
service_alone ec2 aws-sdk-ec2
log "consumer-check: passed"
