#!/usr/bin/env bash
# Starts and stops the real test environment on free 127.0.0.1 ports:
#   etcd + kube-apiserver (token authentication, RBAC), moto in server mode and ministack (the second AWS
#   emulator: EC2, ELBv2, ECR and STS; docs/testing.md, "Two emulators").
#
#   scripts/testenv.sh up      start everything; prints the state directory, whose `env` file exports
#                              CCM_TEST_* variables for the tests (source it)
#   scripts/testenv.sh down DIR  stop what `up` started in DIR
#   scripts/testenv.sh reset-aws DIR  wipe all moto and ministack state (about 0.3 s)
#
# Run scripts/setup.sh first (scripts/test.sh does both).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/lib.sh"

wait_http() { # name url timeout_s pidfile logfile [curl args...]
  local name=$1 url=$2 timeout=$3 pidfile=$4 logfile=$5; shift 5
  local deadline=$((SECONDS + timeout)) code
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" "$url" || true)
    [ "$code" = 200 ] && return 0
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      tail -n 30 "$logfile" >&2 || true
      die "$name exited during start-up (log above, full log: $logfile)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 30 "$logfile" >&2 || true
      die "$name not ready at $url after ${timeout}s (last HTTP status '$code', log: $logfile)"
    fi
    sleep 0.2
  done
}

start() { # name logfile cmd...: runs cmd in its own session, records its pid
  local name=$1 logfile=$2; shift 2
  setsid "$@" >"$logfile" 2>&1 < /dev/null &
  echo $! >"$dir/$name.pid"
}

up() {
  [ -x "$KUBE_APISERVER_BIN" ] || die "kube-apiserver missing at $KUBE_APISERVER_BIN: run scripts/setup.sh"
  [ -f "$MOTO_VENV/.complete" ] || die "moto missing in $MOTO_VENV: run scripts/setup.sh"
  [ -f "$MINISTACK_VENV/.complete" ] || die "ministack missing in $MINISTACK_VENV: run scripts/setup.sh"
  command -v etcd >/dev/null 2>&1 || die "etcd missing: run scripts/setup.sh"
  dir="${CCM_TESTENV_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ccm-testenv.XXXXXX")}"
  mkdir -p "$dir/certs"
  # If anything below fails (die exits), stop what was started so that no server outlives a failed start.
  trap 'rc=$?; if [ $rc -ne 0 ]; then down_dir "$dir" >/dev/null 2>&1 || true; fi; exit $rc' EXIT

  local etcd_port etcd_peer api_port moto_port ministack_port token
  etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port); moto_port=$(free_port)
  ministack_port=$(free_port)
  token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')

  start etcd "$dir/etcd.log" etcd --name testenv --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "testenv=http://127.0.0.1:$etcd_peer" --listen-metrics-urls "" \
    --quota-backend-bytes 4294967296
  # moto-server.py: moto's server with AWS's answer to an ELBv2 resource created twice and AWS's paging of
  # DescribeInstances listings (see the file).
  start moto "$dir/moto.log" env MOTO_ALLOW_NONEXISTENT_REGION=false "$MOTO_VENV/bin/python3" "$here/moto-server.py" \
    -H 127.0.0.1 -p "$moto_port"
  # ministack as shipped (no patch: it is the emulator nobody here tuned), only the services the tests use, on
  # 127.0.0.1; its PID file goes to the state directory (TMPDIR).
  start ministack "$dir/ministack.log" env BIND_HOST=127.0.0.1 GATEWAY_PORT="$ministack_port" TMPDIR="$dir" \
    SERVICES=ec2,elasticloadbalancing,ecr,sts LOG_LEVEL=WARNING "$MINISTACK_VENV/bin/ministack"
  wait_http etcd "http://127.0.0.1:$etcd_port/health" 30 "$dir/etcd.pid" "$dir/etcd.log"

  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null || die "openssl could not make the service-account key"
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  printf '%s,ccm-test-admin,ccm-test-admin,"system:masters"\n' "$token" >"$dir/tokens.csv"
  # Priority and fairness is off and in-flight limits are high so that scale tests measure the CCM, not the
  # test apiserver's defaults. --insecure-port=0: 1.20 otherwise opens an unauthenticated port 8080. The alpha
  # gates let 1.20 validate and keep the newer Service fields the controller reads and writes (mixed protocols,
  # allocateLoadBalancerNodePorts, ipFamilies/ipFamilyPolicy with a dual-stack service range, EndpointSlices'
  # serving and terminating conditions): docs/compatibility.md.
  # shellcheck disable=SC2086
  start kube-apiserver "$dir/kube-apiserver.log" "$KUBE_APISERVER_BIN" \
    --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --secure-port "$api_port" --insecure-port 0 --cert-dir "$dir/certs" --endpoint-reconciler-type none \
    --service-cluster-ip-range 10.96.0.0/16,fd00:10:96::/112 \
    --feature-gates MixedProtocolLBService=true,ServiceLBNodePortControl=true,IPv6DualStack=true,EndpointSliceTerminatingCondition=true \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
    --api-audiences https://kubernetes.default.svc \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
    --enable-priority-and-fairness=false --max-requests-inflight 2000 --max-mutating-requests-inflight 1000 \
    ${CCM_TESTENV_APISERVER_FLAGS:-}
  wait_http moto "http://127.0.0.1:$moto_port/moto-api/reset" 30 "$dir/moto.pid" "$dir/moto.log" -X POST
  wait_http ministack "http://127.0.0.1:$ministack_port/_ministack/health" 30 "$dir/ministack.pid" \
    "$dir/ministack.log"
  wait_http kube-apiserver "https://127.0.0.1:$api_port/readyz" 90 "$dir/kube-apiserver.pid" \
    "$dir/kube-apiserver.log" -k -H "Authorization: Bearer $token"

  cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: https://127.0.0.1:$api_port
    insecure-skip-tls-verify: true
users:
- name: ccm-test-admin
  user:
    token: $token
contexts:
- name: testenv
  context: {cluster: testenv, user: ccm-test-admin}
current-context: testenv
KUBECONFIG
  cat >"$dir/env" <<ENV
export CCM_TESTENV_DIR='$dir'
export CCM_TEST_KUBECONFIG='$dir/kubeconfig'
export CCM_TEST_KUBE_APISERVER='https://127.0.0.1:$api_port'
export CCM_TEST_AWS_ENDPOINT='http://127.0.0.1:$moto_port'
export CCM_TEST_AWS_REGION='us-east-1'
# The second emulator: a test group runs with CCM_TEST_AWS_ENDPOINT set to it and CCM_TEST_AWS_EMULATOR=ministack.
export CCM_TEST_MINISTACK_ENDPOINT='http://127.0.0.1:$ministack_port'
# Nothing in a test may reach the real instance metadata service.
export AWS_EC2_METADATA_DISABLED=true
ENV
  # The Go controller (ccm_testing::GoCcm), when setup.sh built it: a test that needs it and finds the variable
  # unset fails naming it.
  if [ -x "$GO_CCM_BIN" ]; then
    printf "export CCM_TEST_GO_CCM='%s'\n" "$GO_CCM_BIN" >>"$dir/env"
  fi
  trap - EXIT
  log "up: kube-apiserver https://127.0.0.1:$api_port (etcd :$etcd_port), moto http://127.0.0.1:$moto_port," \
    "ministack http://127.0.0.1:$ministack_port; state in $dir"
  echo "$dir"
}

down_dir() {
  local d=$1 name pid
  for name in kube-apiserver moto ministack etcd; do
    [ -f "$d/$name.pid" ] || continue
    pid=$(cat "$d/$name.pid")
    # setsid made each server a session leader: signal its whole process group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  for name in kube-apiserver moto ministack etcd; do
    [ -f "$d/$name.pid" ] || continue
    pid=$(cat "$d/$name.pid")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$d/$name.pid"
  done
  rm -rf "$d/etcd"
}

case "${1:-}" in
  up) up ;;
  down) [ -n "${2:-}" ] || die "usage: testenv.sh down DIR"; down_dir "$2"; log "down: $2" ;;
  reset-aws)
    [ -n "${2:-}" ] || die "usage: testenv.sh reset-aws DIR"
    # shellcheck disable=SC1091
    . "$2/env"
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$CCM_TEST_AWS_ENDPOINT/moto-api/reset")
    [ "$code" = 200 ] || die "moto reset at $CCM_TEST_AWS_ENDPOINT answered HTTP $code"
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$CCM_TEST_MINISTACK_ENDPOINT/_ministack/reset")
    [ "$code" = 200 ] || die "ministack reset at $CCM_TEST_MINISTACK_ENDPOINT answered HTTP $code"
    ;;
  -h | --help) script_help "$0" ;;
  "") die "usage: testenv.sh up | down DIR | reset-aws DIR (--help prints more)" ;;
  *) die "testenv.sh: unknown command $1 (accepted: up, down DIR, reset-aws DIR; --help prints more)" ;;
esac
