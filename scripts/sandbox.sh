#!/usr/bin/env bash
# The project's main job on an embedded default: sets up and starts the local environment (moto for AWS, a real
# kube-apiserver), runs the sandbox against it and prints what happened, then stops everything.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
. "$here/lib.sh"

start_testenv
cargo run --quiet -p ccm-examples --bin testenv-smoke
