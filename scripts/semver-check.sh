#!/usr/bin/env bash
# Checks each library's public API against the last landing of main with cargo-semver-checks: a removed item, a
# changed signature or a newly required trait method fails unless the crate is named in `breaking` (below), the
# acknowledgement that its CHANGELOG entry lists the break. The baseline and that list live in the workspace
# manifest's `[workspace.metadata.semver]`; SEMVER_BASELINE=<rev> checks against another revision (on a branch:
# SEMVER_BASELINE=main). Default features only, as a consumer gets the crates (the `mock` features are not API,
# docs/compatibility.md). Offline; the rustdoc builds share one target directory (CARGO_TARGET_DIR, else the
# workspace's). scripts/check-crates.sh runs it. Environment: SEMVER_BASELINE (above); SEMVER_CHECK_INSTALL=0
# skips the check, with a warning, where cargo-semver-checks is not installed, instead of installing it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
. "$here/lib.sh"
no_arguments "$0" "$@"
cd "$repo"

# Installed on a machine's first run (about 15 minutes on 2 cores), unless SEMVER_CHECK_INSTALL=0 (the test
# command's: that install would take it past its budget on a fresh machine), which skips the check loudly instead.
if [ "${SEMVER_CHECK_INSTALL:-1}" = 0 ] && ! command -v cargo-semver-checks >/dev/null 2>&1; then
  log "semver-check: WARNING: NOT CHECKED: cargo-semver-checks is not installed (scripts/semver-check.sh installs and runs it)"
  exit 0
fi
install_tool cargo-semver-checks cargo-semver-checks "scripts/semver-check.sh checks the libraries' API with it"

# A canary first proves that the tool, as installed and called here, fails a removed function: a check that cannot
# fail would pass every break below.
canary="$(mktemp -d)"
trap 'rm -rf "$canary"' EXIT
for side in old new; do
  mkdir -p "$canary/$side/src"
  printf '[package]\nname = "semver-canary"\nversion = "0.1.0"\nedition = "2024"\n\n[workspace]\n' \
    >"$canary/$side/Cargo.toml"
done
printf 'pub fn kept() {}\npub fn removed() {}\n' >"$canary/old/src/lib.rs"
printf 'pub fn kept() {}\n' >"$canary/new/src/lib.rs"
if cargo semver-checks check-release --manifest-path "$canary/new/Cargo.toml" --baseline-root "$canary/old" \
  >"$canary/out" 2>&1; then
  die "semver-check: cargo-semver-checks passed a removed public function: breaks would not be caught"
fi
grep -q "function_missing" "$canary/out" || { cat "$canary/out" >&2; die "semver-check: the canary failed otherwise"; }

# `baseline` and `breaking` from the manifest, through cargo's own TOML parser.
read -r manifest_baseline breaking < <(cargo metadata --offline --no-deps --format-version 1 | python3 -c '
import json, sys
semver = (json.load(sys.stdin).get("metadata") or {}).get("semver") or {}
print(semver.get("baseline", ""), " ".join(semver.get("breaking", [])))
')
baseline="${SEMVER_BASELINE:-$manifest_baseline}"
[ -n "$baseline" ] || die "semver-check: no [workspace.metadata.semver] baseline in Cargo.toml"
if ! git rev-parse --quiet --verify "$baseline^{commit}" >/dev/null 2>&1; then
  # Without history there is nothing to compare with: said loudly, and only there. In a full clone a missing
  # baseline is a wrong manifest entry.
  if [ "$(git rev-parse --is-shallow-repository 2>/dev/null || echo none)" != false ]; then
    log "semver-check: WARNING: NOT CHECKED: this is not a full git clone, so the baseline $baseline cannot be read"
    exit 0
  fi
  die "semver-check: the baseline $baseline is not a commit of this repository: set it to the last landing of main"
fi
git merge-base --is-ancestor "$baseline" HEAD \
  || die "semver-check: the baseline $baseline is not an ancestor of HEAD: set it to the last landing of main"

for lib in $breaking; do
  printf '%s\n' "${LIBRARY_CRATES[@]}" | grep -qx "$lib" \
    || die "semver-check: \`breaking\` names $lib, which is not a library (${LIBRARY_CRATES[*]})"
done
checked=()
for lib in "${LIBRARY_CRATES[@]}"; do
  [[ " $breaking " == *" $lib "* ]] || checked+=(-p "$lib")
done

# The libraries select no Kubernetes API version themselves (docs/using-the-crates.md); their rustdoc builds here
# are the lone-library builds that need one.
export K8S_OPENAPI_ENABLED_VERSION="${K8S_OPENAPI_ENABLED_VERSION:-1.33}" CARGO_NET_OFFLINE=true
# One target directory for every library's rustdoc build, current and baseline: without CARGO_TARGET_DIR,
# cargo-semver-checks gives each package a directory of its own and compiles the dependencies (the AWS SDK
# included) once per library.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
log "semver-check: the libraries' public API against $(git rev-parse --short "$baseline")"
cargo semver-checks check-release --default-features --baseline-rev "$baseline" "${checked[@]}" \
  || die "semver-check: a library's API broke against $baseline; if that is intended, list the break in \
CHANGELOG.md and name the crate in [workspace.metadata.semver] breaking"
# An acknowledgement that outlives its break would hide the next one: each named crate must still break.
for lib in $breaking; do
  if cargo semver-checks check-release --default-features --baseline-rev "$baseline" -p "$lib" \
    >"$canary/$lib.out" 2>&1; then
    die "semver-check: [workspace.metadata.semver] breaking names $lib, whose API did not break against \
$baseline: remove it (after a landing, the baseline moves and the list empties)"
  fi
  # Failing to build is not breaking on purpose.
  grep -q "semver requires new major version" "$canary/$lib.out" \
    || { cat "$canary/$lib.out" >&2; die "semver-check: checking $lib failed otherwise"; }
  log "semver-check: $lib breaks its API against the baseline, acknowledged in Cargo.toml"
done
