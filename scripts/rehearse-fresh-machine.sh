#!/usr/bin/env bash
# Rehearses a fresh machine: the README's two commands on a clone of HEAD with an empty CARGO_HOME (no registry
# cache, no installed cargo tools: cargo-nextest, cargo-deny, cargo-semver-checks and cargo-fuzz are hidden from
# PATH) and an empty cache directory (no moto, no kube-apiserver, no build output). Only rustup's toolchains and
# Debian's packages stay, as on a new machine of this kind. Three timed runs, each in a world of its own:
#   1. cold sandbox:       scripts/sandbox.sh on a fresh world;
#   2. cold test command:  scripts/test.sh on another fresh world;
#   3. warm test command:  scripts/test.sh again on that world.
# Prints the figures and, with --write, writes them into docs/testing.md between its markers. Needs the
# registries (crates.io, PyPI, Debian) and about 40 GB of disk under the scratch directory; about 80 minutes on
# 2 cores. Run nothing else meanwhile: the figures are wall times.
#
#   scripts/rehearse-fresh-machine.sh [--write] [--keep] [--only sandbox|test]
#
# Environment: REHEARSAL_DIR (default a new directory under /var/tmp), removed at the end unless --keep or a run
# failed (its logs are there).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
. "$here/lib.sh"

write=0 keep=0 only=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --write) write=1 ;;
    --keep) keep=1 ;;
    --only) [ "$#" -ge 2 ] || die "rehearse: --only takes sandbox or test"; only="$2"; shift ;;
    -h | --help) script_help "$0"; exit 0 ;;
    *) die "rehearse: unknown argument $1 (accepted: --write, --keep, --only sandbox|test; --help prints the usage)" ;;
  esac
  shift
done
case "$only" in ""|sandbox|test) ;; *) die "rehearse: --only takes sandbox or test, not ${only}" ;; esac
check_os
[ -z "$(git -C "$repo" status --porcelain)" ] || log "rehearse: uncommitted changes are not rehearsed (a clone of HEAD is)"
commit="$(git -C "$repo" rev-parse --short HEAD)"
scratch="${REHEARSAL_DIR:-$(mktemp -d /var/tmp/ccm-fresh.XXXXXX)}"
mkdir -p "$scratch"

# A PATH without the cargo tools the set-up must install itself: each directory that holds one of them is
# replaced by a directory of links to everything else in it.
fresh_path() {
  local world="$1" out="$world/cargo-home/bin" dir shadow entry
  mkdir -p "$world/cargo-home/bin"
  IFS=: read -r -a dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    if [ -e "$dir/cargo-nextest" ] || [ -e "$dir/cargo-deny" ] || [ -e "$dir/cargo-semver-checks" ] \
      || [ -e "$dir/cargo-fuzz" ]; then
      shadow="$world/path/$(printf '%s' "$dir" | tr '/' '_')"
      mkdir -p "$shadow"
      for entry in "$dir"/*; do
        case "$(basename "$entry")" in cargo-nextest|cargo-deny|cargo-semver-checks|cargo-fuzz) continue ;; esac
        ln -sf "$entry" "$shadow/"
      done
      out="$out:$shadow"
    else
      out="$out:$dir"
    fi
  done
  printf '%s' "$out"
}

# Runs the README command $2 in world $1 (created fresh when missing), logging to $1/$3.log; prints seconds.
run_in_world() {
  local world="$1" command="$2" name="$3" start status=0
  if [ ! -d "$world/clone" ]; then
    mkdir -p "$world/cache"
    git clone --quiet "$repo" "$world/clone"
  fi
  start=$SECONDS
  (
    cd "$world/clone"
    env -u CCM_CACHE_DIR -u CARGO_TARGET_DIR -u CARGO_TARGET_DIR_FUZZ -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS \
      -u CCM_TESTENV_DIR CARGO_HOME="$world/cargo-home" XDG_CACHE_HOME="$world/cache" \
      RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" PATH="$(fresh_path "$world")" \
      "$command" </dev/null
  ) >"$world/$name.log" 2>&1 || status=$?
  printf '%s %s\n' "$((SECONDS - start))" "$status"
}

minutes() { printf '%d min %02d s' "$(($1 / 60))" "$(($1 % 60))"; }

# The cold test command's steps, from the times its log lines carry.
steps() {
  grep -E '^\[testenv [0-9:]{8}\] (group|scale|chaos|library|doc tests|fuzz|all tests|building|setup complete)' "$1" \
    | sed -E 's/^\[testenv ([0-9:]{8})\] (.*)$/\1 \2/' || true
}

declare -A secs status
if [ "$only" != test ]; then
  log "rehearse: cold sandbox in $scratch/sandbox (log: $scratch/sandbox/sandbox.log)"
  read -r secs[sandbox] status[sandbox] < <(run_in_world "$scratch/sandbox" scripts/sandbox.sh sandbox)
  log "rehearse: cold sandbox: $(minutes "${secs[sandbox]}"), exit ${status[sandbox]}"
  [ "$keep" -eq 1 ] || [ "${status[sandbox]}" -ne 0 ] || rm -rf "$scratch/sandbox"
fi
if [ "$only" != sandbox ]; then
  log "rehearse: cold test command in $scratch/test (log: $scratch/test/cold.log)"
  read -r secs[cold] status[cold] < <(run_in_world "$scratch/test" scripts/test.sh cold)
  log "rehearse: cold test command: $(minutes "${secs[cold]}"), exit ${status[cold]}"
  log "rehearse: warm test command (log: $scratch/test/warm.log)"
  read -r secs[warm] status[warm] < <(run_in_world "$scratch/test" scripts/test.sh warm)
  log "rehearse: warm test command: $(minutes "${secs[warm]}"), exit ${status[warm]}"
fi

# The block between the markers in docs/testing.md now: a half not rehearsed this time keeps its rows from there.
doc="$repo/docs/testing.md"
previous="$(sed -n '/<!-- fresh-machine:begin -->/,/<!-- fresh-machine:end -->/p' "$doc")"

row() {
  local key="$1" what="$2"
  if [ -z "${secs[$key]:-}" ]; then
    printf '%s\n' "$previous" | grep -F "| $what |" \
      | sed -E 's/ \(an earlier rehearsal\) \|$/ |/; s/ \|$/ (an earlier rehearsal) |/' || true
    return 0
  fi
  local verdict="passed"
  [ "${status[$key]}" -eq 0 ] || verdict="**failed** (exit ${status[$key]})"
  printf '| %s | %s | %s |\n' "$what" "$(minutes "${secs[$key]}")" "$verdict"
}
table="$(
  printf 'Rehearsal of %s at `%s` (%s cores, %s GiB; rustup toolchains and Debian packages kept, everything\n' \
    "$(date -u +%F)" "$commit" "$(nproc)" "$(free -g | awk '/^Mem:/ {print $2}')"
  printf 'else empty), written by `scripts/rehearse-fresh-machine.sh --write`:\n\n'
  printf '| Run | Wall time | Result |\n| --- | --- | --- |\n'
  row sandbox 'cold `scripts/sandbox.sh` (set-up beside the build, then the tour)'
  row cold 'cold `scripts/test.sh` (set-up, every test, the smoke runs, crates, fuzz)'
  row warm 'warm `scripts/test.sh` (the same world again)'
  if [ -f "$scratch/test/cold.log" ]; then
    printf '\nWhen each step of the cold test command began (its log lines):\n\n```\n'
    steps "$scratch/test/cold.log"
    printf '```\n'
  else
    printf '\n'
    printf '%s\n' "$previous" | awk '/^When each step/ {on = 1} on {print} on && /^```$/ {if (++n == 2) exit}'
  fi
)"
printf '\n%s\n' "$table"

if [ "$write" -eq 1 ]; then
  grep -q '<!-- fresh-machine:begin -->' "$doc" || die "rehearse: no fresh-machine markers in $doc"
  TABLE="$table" python3 - "$doc" <<'PY'
import os, re, sys
path = sys.argv[1]
text = open(path).read()
new = "<!-- fresh-machine:begin -->\n" + os.environ["TABLE"].strip() + "\n<!-- fresh-machine:end -->"
text = re.sub(r"<!-- fresh-machine:begin -->.*?<!-- fresh-machine:end -->", lambda _: new, text, flags=re.S)
open(path, "w").write(text)
PY
  log "rehearse: wrote the figures into docs/testing.md"
fi
for key in "${!status[@]}"; do [ "${status[$key]}" -eq 0 ] || die "rehearse: the $key run failed (logs under $scratch)"; done
[ "$keep" -eq 1 ] || rm -rf "$scratch"
