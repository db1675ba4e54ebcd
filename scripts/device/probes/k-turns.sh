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

if [ -x .bundle/rs-wgmma-overlap ]; then
  echo "== rs-wgmma-overlap"
  timeout 120 .bundle/rs-wgmma-overlap
fi

echo "== outputs: k_turns against the default"
bash "$(dirname "$0")/../gpu-suite.sh" k-turns 2>&1 | grep -E "PASS|FAIL"

layer_times T=8192,H=4096,I=1536,E=128,K=8,B=128 " |--k-turns"
layer_times T=16384,H=4096,I=1536,E=128,K=8,B=128 \
  " |--swap-weights|--swap-weights --k-turns"
