#!/usr/bin/env bash
# weight-reuse at shape 3 (T=8192 H=7168 I=2048 E=256 K=8, about two blocks
# an expert): the block GEMMs' transposed products (--weight-reuse=2, each
# weight element rounded about twice in the GEMMs) against the default
# (the weights' operand kernels, 37.5 GB of rounded copies). One set of
# torch-gen inputs, then for each variant the call's time (median of 10
# after a warm-up, the benchmark's moe-run flags) and ncu's time of every
# kernel (default: it may not fit an 80 GB card; that is a result too).
# One device call with the bundle on PATH (a few minutes):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/weight-reuse-shape3.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
L=${LAYER:-T=8192,H=7168,I=2048,E=256,K=8,B=128}
tmp=$(mktemp -d)
python3 -m moe_crosscheck torch-gen --config "$L" --seed 1 --out "$tmp/in" \
  >/dev/null 2>&1 || { echo "torch-gen $L failed"; exit 1; }
rows=()
for args in "" "--weight-reuse=2"; do
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
  echo "== $name: ncu kernel times"
  # shellcheck disable=SC2086
  timeout 200 ncu --csv --print-units base --metrics gpu__time_duration.sum \
    moe-run --target=sm90a $args --layer "$L" --inputs "$tmp/in" --check none \
    >"$tmp/ncu.csv" 2>"$tmp/ncu.err" || echo "ncu $name failed"
  grep gpu__time_duration "$tmp/ncu.csv" |
    awk -F'","' '{ gsub(/[",]/, "", $NF); t = $NF / 1e6; s += t
                   if ($5 ~ /matmul/) g += t; if (t > 0.05) printf "  %s %.3f\n", $5, t }
                 END { printf "  total %.3f ms, GEMMs %.3f ms (%.1f%%)\n", s, g, 100 * g / s }'
done
printf '%s\n' "${rows[@]}"
