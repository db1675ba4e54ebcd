#!/usr/bin/env bash
# weight-reuse at shape 3 (T=8192 H=7168 I=2048 E=256 K=8, about two blocks
# an expert): the default since 2026-12-05 (weight-reuse=3) runs the block
# GEMMs' transposed products, each weight element rounded about twice in
# the GEMMs, against --weight-reuse=0 (the weights' operand kernels, 37.5 GB
# of rounded copies). One set of torch-gen inputs, then for each variant
# the call's time (median of 10 after a warm-up, the benchmark's moe-run
# flags) and ncu's time of every kernel (weight-reuse=0 may not fit an
# 80 GB card; that is a result too). One device call with the bundle on
# PATH (a few minutes):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/weight-reuse-shape3.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"
L=${LAYER:-T=8192,H=7168,I=2048,E=256,K=8,B=128}
tmp=$(mktemp -d)
probe_inputs "$L" "$tmp/in" || exit 1
rows=()
for args in "" "--weight-reuse=0"; do
  name=${args:-default}
  # shellcheck disable=SC2086
  if timeout 240 moe-run --target=sm90a $args --layer "$L" --inputs "$tmp/in" \
      --check none --repeat 10 --warmup 1 --times-json "$tmp/t.json" \
      >"$tmp/log" 2>&1; then
    ms=$(python3 -c "import json, statistics, sys
print('%.3f' % (1e3 * statistics.median(json.load(open(sys.argv[1]))['call_s'])))" "$tmp/t.json")
    rows+=("$(printf '%-18s call %s ms (median of 10)' "$name" "$ms")")
  else
    rows+=("$(printf '%-18s FAILED: %s' "$name" "$(tail -1 "$tmp/log")")")
    continue
  fi
  # shellcheck disable=SC2086
  timeout 200 ncu --clock-control none --csv --print-units base \
    --metrics gpu__time_duration.sum moe-run --target=sm90a $args --layer "$L" \
    --inputs "$tmp/in" --check none >"$tmp/ncu.csv" 2>"$tmp/ncu.err" ||
    echo "ncu $name failed"
  echo "== $name: ncu kernel times"
  kernel_times "$name" "$tmp/ncu.csv"
done
printf '%s\n' "${rows[@]}"
