#!/usr/bin/env bash
# The project's main job: sets up and starts the local environment (moto for AWS, a real kube-apiserver), then
# runs the sandbox: EC2 instances in moto, their Nodes registered with the uninitialized taint and pod CIDRs, and
# aws-cloud-controller-manager initializing them, routing their pod CIDRs, giving one Service a Classic ELB and
# another an NLB; then the lb-plan dry run of a change, the clean-up and doctor. Each step is printed before and
# after, then the CCM's peak memory and AWS calls by operation. Stops everything on exit. Debian 12 (bookworm)
# only: the set-up installs from its archive.
#
#   scripts/sandbox.sh [NODES] [--pause | --compare]
#
#   NODES      how many EC2 instances and Nodes (default 4); more than 10 is the scale run, Nodes only
#   --pause    wait for a line on stdin before the clean-up, to look around in moto
#   --compare  run the workload through the Go controller (Kubernetes 1.20.2's in-tree provider) and then
#              through ours as the release build, and compare peak memory and CPU time
#   --help     this text
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"

# The arguments and the system, before anything is installed or built: a typo or --help costs nothing.
nodes="" mode=""
for arg in "$@"; do
  case "$arg" in
    -h | --help) script_help "$0"; exit 0 ;;
    --pause | --compare)
      [ -z "$mode" ] || [ "$mode" = "$arg" ] || die "sandbox.sh: --pause and --compare exclude each other"
      mode="$arg" ;;
    -*) die "sandbox.sh: unknown flag $arg (accepted: NODES, --pause, --compare; --help prints the usage)" ;;
    *)
      [ -z "$nodes" ] || die "sandbox.sh: one NODES only (got $nodes and $arg)"
      [[ "$arg" =~ ^[1-9][0-9]*$ ]] || die "sandbox.sh: NODES must be a positive number, not '$arg'"
      nodes="$arg" ;;
  esac
done
check_os

# The environment's set-up (the first time: apt, moto, kube-apiserver's Go build) runs beside the Rust build, which
# shows cargo's own progress. The sandbox needs neither the test tools nor every platform's crates.
setup_in_background --environment
# The sandbox is a harness (package ccm-harness); the binaries it runs are the shipped ones (ccm-examples).
if [ "$mode" = --compare ]; then
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
