#!/usr/bin/env bash
# The moe-mlir backward benchmark (bench/moe_bench.py), run ON THE H200 from
# the repository root with the device bundle carried
# (scripts/build-device-bundle.sh; carry [".bundle"]):
#
#   bash .bundle/run-on-device.sh bash bench/run.sh --out "$OUT" [OPTIONS]
#
# Times the full backward at the issue's three shapes in both layer modes
# next to torch's bf16 backward, profiles every kernel with ncu, records
# every kernel's SASS instruction mix (cuobjdump), and writes
# OUT/bench-latest.json and the raw log OUT/bench-latest.log (copy both
# into docs/results). The table comes last. OPTIONS go to moe_bench.py
# (--shapes 1,2, --no-ncu, --dry-run, ...; see its --help). It stops
# starting steps after --budget seconds (540) so that it ends within the
# machine's 10-minute limit with its JSON written.
#
# A whole run takes longer than one command may (three shapes, two modes,
# ncu). It can run detached in its own session, which outlives the command
# that started it, and be collected by the next command:
#
#   bash .bundle/run-on-device.sh bash bench/run.sh --start DIR --budget 1500 [OPTIONS]
#   bash bench/run.sh --wait DIR --out "$OUT" [--timeout SECONDS]
#
# --start returns at once; the run writes DIR/bench-latest.{json,log}, its
# console to DIR/console.log and its exit status to DIR/exit-status.
# --wait waits up to --timeout seconds (540) for the exit status, prints the
# console's end (the table) and copies the JSON and the log to --out; exit
# status 3 while the run goes on (call --wait again), else the run's. The
# machine keeps the run only while it is held: call --wait again within
# its idle time.
set -euo pipefail
cd "$(dirname "$0")/.."
# ncu lives with the CUDA toolkit.
export PATH=/usr/local/cuda/bin:$PATH

usage() {
  echo "usage: $0 --start DIR [OPTIONS] | --wait DIR --out DIR" \
       "[--timeout SECONDS] | OPTIONS (with --out DIR)" >&2
  exit 2
}

case "${1:-}" in
--start)
  [ $# -ge 2 ] || usage
  dir=$2
  shift 2
  mkdir -p "$dir"
  rm -f "$dir/exit-status"
  # The console exists before this returns, so --wait finds the run at once.
  : > "$dir/console.log"
  # setsid: a session of its own, so the run survives the end of this
  # command; the exit status is written last, when the run has ended.
  setsid bash -c 'python3 bench/moe_bench.py --out "$0" "$@"; echo $? > "$0/exit-status"' \
    "$dir" "$@" >> "$dir/console.log" 2>&1 < /dev/null &
  echo "bench: started in $dir (pid $!); collect with: bash bench/run.sh --wait $dir --out \$OUT"
  ;;
--wait)
  [ $# -ge 2 ] || usage
  dir=$2
  shift 2
  out= timeout=540
  while [ $# -gt 0 ]; do
    case "$1" in
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
    *) usage ;;
    esac
  done
  [ -n "$out" ] || usage
  [ -f "$dir/console.log" ] || { echo "bench: no run in $dir" >&2; exit 2; }
  waited=0
  while [ ! -f "$dir/exit-status" ] && [ "$waited" -lt "$timeout" ]; do
    sleep 5
    waited=$((waited + 5))
  done
  mkdir -p "$out"
  for f in bench-latest.json bench-latest.log; do
    [ -f "$dir/$f" ] && cp "$dir/$f" "$out/"
  done
  tail -40 "$dir/console.log"
  if [ ! -f "$dir/exit-status" ]; then
    echo "bench: still running after ${waited} s; call --wait again"
    exit 3
  fi
  exit "$(cat "$dir/exit-status")"
  ;;
*)
  exec python3 bench/moe_bench.py "$@"
  ;;
esac
