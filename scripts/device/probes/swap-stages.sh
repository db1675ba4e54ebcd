#!/usr/bin/env bash
# How the transposed block GEMMs of --swap-weights depend on their ring's
# depth: ncu's time of every kernel at T=8192 H=4096 I=1536 E=128 K=8
# (shape 1's GEMM shapes, half its tokens) for the default, --swap-weights
# (4 stages of 48 KB), the same with 3 and 2 stages (hand configs of the
# recompute, P1 and P2), and with the slot rows by TMA from an operand
# kernel's copy (--gathered-lhs-copies: the gather's share). A weight tile
# shared by two warpgroups of 256 slots each (half the roundings) needs
# 72 KB stages: 2 fit beside the store buffers, 3 do not
# (docs/sm90a-kernels.md). One device call with the bundle on PATH:
#   bash .bundle/run-on-device.sh bash scripts/device/probes/swap-stages.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"
L=${LAYER:-T=8192,H=4096,I=1536,E=128,K=8,B=128}
tmp=$(mktemp -d)
probe_inputs "$L" "$tmp/in" || exit 1
common='mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = STAGES, warpgroups = [1, 2]'
swap='persistent = true, round_lhs = true, swap_operands = true'
configs() {
  echo "--swap-weights"
  echo "--gemm-config-at"
  echo "0=#moe.gemm_config<${common/STAGES/$1}, registers = [56, 224], lhs_m_major = true, $swap, rhs_gather = true, tma_store = 2>"
  echo "--gemm-config-at"
  echo "1=#moe.gemm_config<${common/STAGES/$1}, registers = [56, 224], $swap, rhs_gather = true, tma_store = 2>"
  echo "--gemm-config-at"
  echo "2=#moe.gemm_config<${common/STAGES/$1}, registers = [40, 232], $swap, tma_store = 2>"
}
rows=()
for variant in default swap4 swap3 swap2 swap4-copies; do
  case $variant in
    default) args=() ;;
    swap4) args=(--swap-weights) ;;
    swap4-copies) args=(--swap-weights --gathered-lhs-copies) ;;
    swap*) mapfile -t args < <(configs "${variant#swap}") ;;
  esac
  timeout 150 ncu --clock-control none --csv --print-units base \
    --metrics gpu__time_duration.sum moe-run --target=sm90a --layer "$L" \
    --inputs "$tmp/in" --check none "${args[@]}" >"$tmp/ncu.csv" 2>"$tmp/ncu.err" ||
    { rows+=("$(printf '%-14s ncu FAILED: %s' "$variant" "$(tail -1 "$tmp/ncu.err")")"); continue; }
  echo "== $variant"
  kernel_times "$variant" "$tmp/ncu.csv" >"$tmp/times"
  head -n -1 "$tmp/times"
  rows+=("$(tail -1 "$tmp/times")")
done
printf '%s\n' "${rows[@]}"
