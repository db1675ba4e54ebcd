#!/usr/bin/env bash
# Issue 9's GEMM-share gate from the other side: ncu's sections of shape 1's
# memory-bound kernels (the activation backward, the slot roundings of x and
# dy for P3 / P4, the dx sum over top_k and the small generic kernels), to see
# how far each is from the DRAM rate and why. One device call (~2 min):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/nongemm-prof.sh
# Prints ncu's CSV details (SOL, memory workload, occupancy, launch, warp
# states); the analysis is in docs/sm90a-kernels.md.
set -uo pipefail
source "$(dirname "$0")/common.sh"
layer=${NONGEMM_LAYER:-T=16384,H=4096,I=1536,E=128,K=8,B=128}
tmp=$(mktemp -d)
probe_inputs "$layer" "$tmp/in" || exit 1
timeout 400 ncu --clock-control none --csv --page details --print-units base \
  --kernel-name regex:'act_bwd|mx_operand|moe_layer_bwd' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section Occupancy --section LaunchStats --section WarpStateStats \
  moe-run --target=sm90a --layer "$layer" --inputs "$tmp/in" --check none \
  ${NONGEMM_ARGS:-} 2>&1 | grep -v '^==PROF==' 
rm -rf "$tmp"
