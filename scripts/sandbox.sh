#!/usr/bin/env bash
# The project's main job: sets up and starts the local environment (moto for AWS, a real kube-apiserver), then
# runs the sandbox: EC2 instances in moto, their Nodes registered with the uninitialized taint and pod CIDRs, and
# aws-cloud-controller-manager initializing them, routing their pod CIDRs, giving one Service a Classic ELB and
# another an NLB; then the lb-plan dry run of a change, the clean-up and doctor. Each step is printed before and
# after, then the CCM's peak memory and AWS calls by operation. Arguments go to the sandbox: `[NODES] [--pause |
# --compare]` (more than 10 NODES is the scale run, Nodes only; --compare runs the Go controller beside it, and
# ours as the release build).
# Stops everything on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"

# The environment's set-up (the first time: apt, moto, kube-apiserver's Go build) runs beside the Rust build, which
# shows cargo's own progress. The sandbox needs neither the test tools nor every platform's crates.
setup_in_background --environment
# The sandbox is a harness (package ccm-harness); the binaries it runs are the shipped ones (ccm-examples).
if [[ " $* " == *" --compare "* ]]; then
  # The comparison sets peak memory and CPU time beside the Go controller's optimised build: ours runs as users
  # get it, the release build (the packages as the scale harness builds them, so that one build serves both).
  log "building the release binaries for --compare (the first release build takes about 25 minutes: fat LTO)"
  profile=release
  cargo build --release -p ccm-harness -p ccm-examples --bin sandbox --bin aws-cloud-controller-manager
else
  log "building the sandbox's binaries (the first build on a machine takes several minutes: the AWS SDK)"
  profile=debug
  cargo build -p ccm-harness -p ccm-examples --bin sandbox --bin aws-cloud-controller-manager --bin lb-plan \
    --bin doctor
fi
start_testenv
"${CARGO_TARGET_DIR:-target}/$profile/sandbox" "$@"
