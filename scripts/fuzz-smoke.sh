#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded time on its committed corpus (fuzz/corpus/<target>), one
# target at a time on one core. Needs the nightly toolchain and cargo-fuzz (scripts/setup.sh installs
# cargo-fuzz); scripts/test.sh runs it last. The targets are every bin of fuzz/Cargo.toml (`cargo fuzz list`):
# the Service spec and annotations, provider IDs, ECR images and requests, the cloud config, IMDS documents, AWS
# error messages, Go durations, the leader-migration configuration and the command line. None builds the AWS SDK
# (the layering test keeps it so); the controller-manager targets build kube and rustls under the sanitizers.
#
#   scripts/fuzz-smoke.sh               # 20 s per target, new inputs kept in a scratch directory
#   FUZZ_SECONDS=300 scripts/fuzz-smoke.sh service_spec    # one target, longer
#
# Environment: FUZZ_SECONDS (per target, default 20); FUZZ_BUILD_ONLY (build the targets, run none); FUZZ_WORK (where new inputs go; default a temporary
# directory, removed at the end); CARGO_TARGET_DIR_FUZZ (default target-fuzz in the cache directory: nightly
# builds with sanitizer flags never share the stable target directory). A crash or hang fails the script and
# leaves the input under fuzz/artifacts/<target>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/../fuzz"
. "$here/lib.sh"
# Options before any work: --help prints this header, anything else starting with a dash is refused.
for arg in "$@"; do
    case "$arg" in
        -h | --help) script_help "$here/fuzz-smoke.sh"; exit 0 ;;
        -*) die "fuzz-smoke: unknown option $arg (it takes target names; --help prints the usage)" ;;
    esac
done

seconds="${FUZZ_SECONDS:-20}"
if [ -n "${FUZZ_WORK:-}" ]; then
    work="$FUZZ_WORK"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_FUZZ:-$CCM_CACHE_DIR/target-fuzz}"
# .ci/run lints the workspace through the stable clippy-driver; it cannot drive the nightly compiler.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz-smoke: the nightly toolchain is not installed; nothing fuzzed" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: cargo-fuzz is missing (cargo install cargo-fuzz --locked)" >&2
    exit 1
fi

mapfile -t known < <(cargo +nightly fuzz list)
if [ "$#" -gt 0 ]; then
    targets=("$@")
    # A misspelt target fails here, before the build.
    for target in "${targets[@]}"; do
        printf '%s\n' "${known[@]}" | grep -qx -- "$target" \
            || die "fuzz-smoke: no fuzz target $target (the targets: ${known[*]})"
    done
else
    targets=("${known[@]}")
fi

cargo +nightly fuzz build -O
# scripts/test.sh builds the targets early, beside its test groups, and runs them at the end.
if [ -n "${FUZZ_BUILD_ONLY:-}" ]; then
    echo "fuzz-smoke: built every target (FUZZ_BUILD_ONLY)"
    exit 0
fi
for target in "${targets[@]}"; do
    mkdir -p "$work/$target"
    echo "fuzz-smoke: $target for ${seconds}s (corpus fuzz/corpus/$target, new inputs in $work/$target)"
    # One process on one core; -timeout turns a hang (an input taking over 10 s) into a failure.
    log="$work/$target.log"
    status=0
    cargo +nightly fuzz run -O "$target" "$work/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -40 "$log" >&2
        echo "fuzz-smoke: $target failed (status $status); the input is under fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
echo "fuzz-smoke: every target ran ${seconds}s without a crash"
