#!/usr/bin/env bash
# The project's main job: sets up and starts the local environment (moto for AWS, a real kube-apiserver), then
# runs the sandbox: EC2 instances in moto, their Nodes registered with the uninitialized taint and pod CIDRs, and
# aws-cloud-controller-manager initializing them, routing their pod CIDRs, giving one Service a Classic ELB and
# another an NLB; then the lb-plan dry run of a change, the clean-up and doctor. Each step is printed before and
# after, then the CCM's peak memory and AWS calls by operation. Arguments go to the sandbox: `[NODES] [--pause]`
# (more than 10 NODES is the scale run, Nodes only). Stops everything on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"

start_testenv
cargo build --quiet -p ccm-examples --bin sandbox --bin aws-cloud-controller-manager --bin lb-plan --bin doctor
"${CARGO_TARGET_DIR:-target}/debug/sandbox" "$@"
