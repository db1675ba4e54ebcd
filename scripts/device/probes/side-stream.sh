#!/usr/bin/env bash
# Issue 9's GEMM-share gate, two ways (docs/sm90a-kernels.md, twenty-fifth
# session): a memory-bound rounding stream in a third warpgroup beside a
# GEMM's wgmmas (side-stream-overlap, if .bundle has it), then shape 1's
# ncu kernel times and call with the weights rounded in the block GEMMs'
# registers (--swap-weights) against the default. One device call:
#   bash .bundle/run-on-device.sh bash scripts/device/probes/side-stream.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"

if [ -x .bundle/side-stream-overlap ]; then
  echo "== side-stream-overlap"
  timeout 150 .bundle/side-stream-overlap
fi
layer_times T=16384,H=4096,I=1536,E=128,K=8,B=128 " |--swap-weights"
