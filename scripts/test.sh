#!/usr/bin/env bash
# The whole test suite, from nothing: installs and starts the real test environment (moto, etcd,
# kube-apiserver), then runs every test of the workspace against it, integration and end-to-end tests included.
# Integration tests fail (never skip) when the environment is missing, so a green run means they ran. Takes no
# arguments (--help prints this); Debian 12 (bookworm) only: the set-up installs from its archive.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"
no_arguments "$0" "$@"
check_os

# The set-up (the first time: apt, moto, kube-apiserver's Go build, the test tools) runs beside the build of every
# test; the test groups below then find everything built.
setup_in_background
log "building every test (cargo test --no-run; the first build on a machine takes about 15 minutes)"
cargo test --locked --workspace --lib --bins --tests --no-run
start_testenv
command -v cargo-nextest >/dev/null 2>&1 || die "cargo-nextest is missing (scripts/setup.sh installs it)"
# The fuzz targets' nightly build (a target directory of its own) runs beside the test groups, which mostly wait on
# moto and the apiserver; niced, so that the tests keep the cores they need. The smoke run at the end uses it.
log "building the fuzz targets in the background (nightly; the fuzz smoke run at the end runs them)"
fuzz_log="$(mktemp)"
FUZZ_BUILD_ONLY=1 nice -n 10 "$here/fuzz-smoke.sh" >"$fuzz_log" 2>&1 &
fuzz_build=$!

# The library crates as their users get them (docs with warnings denied, packages, scratch consumers with each
# Kubernetes API version, the semver check, cargo deny; advisories need a network database and are left out,
# deny.toml). Compile-bound, while the test groups below mostly wait on moto and the apiserver: they run beside
# them from the start, niced so that the tests keep the cores they need, in a target directory of their own so
# that they never hold the lock the groups' cargo takes (only build scripts and proc macros are built twice:
# everything else they build is a check build the tests never make). Their log is printed when they end.
log "library crates as published (scripts/check-crates.sh), in the background"
crates_log="$(mktemp)"
# The semver check is skipped, loudly, where cargo-semver-checks is not installed: its cold install (about 19
# minutes beside the tests) would take the test command past its budget on a fresh machine. CI's machine has it;
# scripts/semver-check.sh alone installs it (docs/testing.md).
(CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/crate-checks" SEMVER_CHECK_INSTALL=0 \
  nice -n 10 "$here/check-crates.sh") >"$crates_log" 2>&1 &
crates_job=$!
# A failure below stops them and the fuzz build too (and the environment, as start_testenv's trap did).
# shellcheck disable=SC2064 # expand now
trap "kill_tree $crates_job; kill_tree $fuzz_build; '$here/testenv.sh' down '$TESTENV_DIR'" EXIT
# Test groups share one environment; moto is reset before each so that no group sees another's leftovers.
# Tests inside a group isolate themselves with unique names (ccm_testing::unique_name). Benchmarks are not
# tests (they print figures; `cargo bench` runs them) but clippy --all-targets in .ci/run compiles them.
log "group 1: unit and integration tests (every crate, examples and benches)"
"$here/testenv.sh" reset-aws "$TESTENV_DIR"
cargo nextest run --workspace --lib --bins --tests --profile ci -E 'not binary(/^e2e/)'
log "group 2: end-to-end tests (the binaries against moto and the apiserver, one at a time)"
"$here/testenv.sh" reset-aws "$TESTENV_DIR"
# End-to-end tests live in test files named e2e*.rs and drive whole binaries against the shared environment.
cargo nextest run --workspace --lib --bins --tests --profile ci -E 'binary(/^e2e/)' --test-threads 1
# The second emulator (docs/testing.md, "Two emulators"): every test of the moto-test binaries again, against
# ministack as shipped, but those scripts/moto-only.txt lists with their reasons (Classic ELBs, which ministack
# lacks, and answers it gives against AWS's documents); then the end-to-end tests whose AWS it serves.
log "group 3: the EC2, ELBv2, ECR and STS tests against ministack (all but scripts/moto-only.txt)"
"$here/testenv.sh" reset-aws "$TESTENV_DIR"
CCM_TEST_AWS_ENDPOINT="$CCM_TEST_MINISTACK_ENDPOINT" CCM_TEST_AWS_EMULATOR=ministack \
  cargo nextest run --workspace --tests --profile ci -E "$(ministack_filter "$here/moto-only.txt")"
# Those whose AWS ministack serves (EC2, ELBv2, ECR, STS): the others need Classic ELBs or the Go controller (which
# makes them), routes (no ModifyInstanceAttribute), ACM (e2e_nlbs_with_managed_security_groups) or paged
# listings (e2e_node_burst: ministack answers every instance in one page). docs/testing.md, "Two emulators".
ministack_e2e='binary(=e2e_testenv_smoke) | binary(=e2e_ecr_credential_provider) | binary(=e2e_aws_ccm_nodes)
  | binary(=e2e_aws_ccm_leader_fence) | (binary(=e2e_aws_ccm_nlb) - test(=e2e_nlbs_with_managed_security_groups))'
log "group 4: end-to-end tests against ministack, one at a time"
"$here/testenv.sh" reset-aws "$TESTENV_DIR"
CCM_TEST_AWS_ENDPOINT="$CCM_TEST_MINISTACK_ENDPOINT" CCM_TEST_AWS_EMULATOR=ministack \
  cargo nextest run --workspace --tests --profile ci --test-threads 1 -E "$ministack_e2e"
# The scale harness's smoke run (docs/performance.md): 10 Nodes, 2 then 3 Services, a 10 s steady window, this CCM
# and the Go controller one after the other, both throttled as AWS (the default: "AWS's rate limits in the loop");
# fails when a phase never completes, never on a figure (a membership lag longer than 30 s is recorded as such: Go
# may never register a Node that joined uninitialized).
# Both run the binaries the first build made for the end-to-end tests (`cargo test` builds every binary of a
# package with tests: ccm-harness's harnesses and ccm-examples' binaries, which they run from the same directory):
# a `cargo build -p ccm-harness -p ccm-examples` here would resolve features without the dev-dependencies
# and rebuild tokio and everything above it, the AWS SDK included (measured: 6 minutes of a cold run).
bin="${CARGO_TARGET_DIR:-target}/debug"
for b in scale soak doctor aws-cloud-controller-manager custom-provider; do
  [ -x "$bin/$b" ] || die "$bin/$b is missing: the first build (cargo test --no-run) builds it for the e2e tests"
done
log "scale harness smoke run"
# Its chart goes to a scratch file (a full run writes docs/performance.svg): checked to be an SVG of both columns.
chart="$(mktemp --suffix .svg)"
"$bin/scale" --nodes 10 --pool 5 --services 2,3 --steady-secs 10 --settle-secs 2 --quiet-secs 3 --limit-secs 180 \
  --lag-limit-secs 30 --trace --chart "$chart" | tee "$chart.txt"
trace="$(sed -n 's/.*\[this CCM\] tracing AWS calls each second into //p' "$chart.txt" | head -1)"
[ -n "$trace" ] && grep -q ' memory peak ' "$trace" && grep -q 'CreateLoadBalancer+' "$trace" ||
  die "the scale harness's smoke run wrote no trace of this CCM's calls (${trace:-no path printed})"
grep -q '^| Figure (throttled as AWS) |' "$chart.txt" || die "the scale harness's smoke run was not throttled as AWS"
grep -q '^| Deletion: per load balancer deleted: AWS calls' "$chart.txt" ||
  die "the scale harness's smoke run did not table the deletion's costs"
grep -q '^<svg' "$chart" && grep -q 'Go 1.20.2' "$chart" && grep -q 'this CCM' "$chart" ||
  die "the scale harness's smoke run did not draw its chart ($chart)"
rm -f "$chart" "$chart.txt"
# The doc tests, in the workspace's target directory (they link the libraries the first build made), beside the
# soak below, which mostly waits on moto and the apiserver; niced. Nothing after this point takes that directory's
# lock (the soak runs a built binary, the fuzz targets have a target directory of their own).
log "doc tests, in the background"
doc_log="$(mktemp)"
(nice -n 10 cargo test --workspace --doc --quiet) >"$doc_log" 2>&1 &
doc_job=$!
# shellcheck disable=SC2064 # expand now
trap "kill_tree $crates_job; kill_tree $fuzz_build; kill_tree $doc_job; '$here/testenv.sh' down '$TESTENV_DIR'" EXIT
# The chaos soak's smoke run (docs/reliability.md): 25 seeded Service lifecycles under AWS faults, leader kills
# and Node churn; fails on any leak, foreign mutation, stuck finalizer, lost Node or unconverged Service.
log "chaos soak smoke run"
# Its CCM sees every Node and Service of the apiserver (the other groups leave theirs): an environment of its own.
soak_env=$(env -u CCM_TESTENV_DIR "$here/testenv.sh" up)
if ! (set -a; . "$soak_env/env"; set +a
  "$bin/soak" --smoke --limit-secs 600); then
  "$here/testenv.sh" down "$soak_env"
  die "the chaos soak smoke run failed (its log names the seed and every problem)"
fi
"$here/testenv.sh" down "$soak_env"
# Every fuzz target for about 20 s on its committed corpus (nightly, one core; a crash or hang fails the run).
log "fuzz smoke run"
wait "$fuzz_build" || { cat "$fuzz_log" >&2; die "building the fuzz targets failed"; }
"$here/fuzz-smoke.sh"
log "waiting for the library crates' checks and the doc tests"
crates_status=0 doc_status=0
wait "$crates_job" || crates_status=$?
wait "$doc_job" || doc_status=$?
# shellcheck disable=SC2064 # expand now
trap "'$here/testenv.sh' down '$TESTENV_DIR'" EXIT
cat "$crates_log" >&2
[ "$crates_status" -eq 0 ] || die "scripts/check-crates.sh failed (its messages are above)"
[ "$doc_status" -eq 0 ] || { cat "$doc_log" >&2; die "the doc tests failed (their messages are above)"; }
log "all tests passed"
