#!/usr/bin/env bash
# The library crates as their users get them: API docs build with warnings denied, every library packages, the
# libraries build inside a scratch consumer with each Kubernetes API version (consumer-check.sh), and the
# public API of each library keeps its promise against the last landing (semver-check.sh), and the dependency
# graph passes cargo-deny (licenses, bans, sources; deny.toml says why advisories are not here).
# Offline after one `cargo fetch`. scripts/test.sh runs it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"
no_arguments "$0" "$@"

# The builds before this fetched only this platform's crates; cargo-deny's metadata and the consumer check resolve
# the graph for every platform (windows-sys and the like), so fetch all of Cargo.lock once (nothing when it is all
# in the cache already). Everything after it runs offline: a step that needs the network fails here.
log "check-crates: cargo fetch --locked (every platform's crates)"
cargo fetch --locked --quiet || die "cargo fetch --locked failed: the registry must be reachable once"

packages=()
for lib in "${LIBRARY_CRATES[@]}"; do packages+=(-p "$lib"); done

log "check-crates: cargo doc --no-deps, warnings denied"
# ccm-testing (unpublished) selects the Kubernetes API version the libraries need to build (see Cargo.toml).
RUSTDOCFLAGS="-D warnings" cargo doc --offline --no-deps --quiet "${packages[@]}" -p ccm-testing

log "check-crates: cargo package of every library"
# --no-verify: building each package alone is what consumer-check.sh does below, once for all of them.
cargo package --offline --no-verify --allow-dirty --quiet "${packages[@]}"

"$here/consumer-check.sh"

"$here/semver-check.sh"

log "check-crates: cargo deny (licenses, bans, sources)"
command -v cargo-deny >/dev/null 2>&1 || die "cargo-deny is missing (cargo install --locked cargo-deny)"
cargo deny --offline --log-level error check licenses bans sources
log "check-crates: passed"
