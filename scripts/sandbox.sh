#!/usr/bin/env bash
# The project's main job: sets up and starts the local environment (moto for AWS, a real kube-apiserver), then
# runs the sandbox: EC2 instances in moto, their Nodes registered with the uninitialized taint, and
# aws-cloud-controller-manager initializing them; it prints every Node before and after. Stops everything on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"

start_testenv
cargo build --quiet -p ccm-examples --bin sandbox --bin aws-cloud-controller-manager
"${CARGO_TARGET_DIR:-target}/debug/sandbox"
