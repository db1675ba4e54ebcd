#!/usr/bin/env bash
# k_turns on the transposed block GEMMs (docs/sm90a-kernels.md, twenty-fourth
# session): the two consumer warpgroups take turns at the tensor cores each
# K tile, so that one rounds its next K tile beside the other's MMAs. The
# probe first (rs-wgmma-overlap's RSO column, if .bundle has it), then the
# outputs (gpu-suite.sh's k-turns part: bit for bit the default, racecheck),
# then ncu's kernel times at T=8192 (the default swaps there)
# and at shape 1 (the default, --swap-weights, --swap-weights with k_turns),
# each part's lines printed as it ends (moe-run --k-turns: k_turns on every
# GEMM that rounds its lhs in its registers):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/k-turns.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"
tmp=$(mktemp -d)

if [ -x .bundle/rs-wgmma-overlap ]; then
  echo "== rs-wgmma-overlap"
  timeout 120 .bundle/rs-wgmma-overlap
fi

echo "== outputs: k_turns against the default"
bash "$(dirname "$0")/../gpu-suite.sh" k-turns 2>&1 | grep -E "PASS|FAIL"

# ncu's kernel times of LAYER with each flag set (| between sets), then the
# call's (moe-run --repeat 10).
times() {  # LAYER SETS
  local layer=$1 set args
  probe_inputs "$layer" "$tmp/in" || return
  IFS='|' read -r -a sets <<<"$2"
  for set in "${sets[@]}"; do
    read -r -a args <<<"$set"
    timeout 240 ncu --clock-control none --csv --print-units base \
      --metrics gpu__time_duration.sum moe-run --target=sm90a --layer "$layer" \
      --inputs "$tmp/in" --check none "${args[@]}" >"$tmp/ncu.csv" \
      2>"$tmp/ncu.err" || echo "ncu $set failed"
    local name=${set# }
    echo "== $layer ${name:-default}"
    kernel_times "${name:-default}" "$tmp/ncu.csv"
    # The call as a trainer sees it (the power cap included).
    timeout 120 moe-run --target=sm90a --layer "$layer" --inputs "$tmp/in" \
      --check none "${args[@]}" --repeat 10 --warmup 1 | grep -E "^(gpu|timing)" |
      head -3
  done
  rm -rf "$tmp/in"
}
times T=8192,H=4096,I=1536,E=128,K=8,B=128 " |--k-turns"
times T=16384,H=4096,I=1536,E=128,K=8,B=128 \
  " |--swap-weights|--swap-weights --k-turns"
