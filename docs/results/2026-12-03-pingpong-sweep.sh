#!/usr/bin/env bash
# Sweep of GEMM kernel configurations on the H200: the ping-pong consumer
# schedule (two warpgroups taking turns over 128x128 tiles, one's store
# beside the other's MMAs) and evict-first outputs against the default
# (128x256 persistent) on the GEMMs of both reference shapes. Each row:
# moe-run --gemm (16 sampled rows against the exact MX product) under ncu,
# the GEMM kernel's time.
#   bash .bundle/run-on-device.sh bash docs/results/2026-12-03-pingpong-sweep.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
base='mma = bf16_operands'
wide="tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]"
narrow="tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2]"
declare -A CFG=(
  [default]=""
  [wide-grid]="#moe.gemm_config<$base, $wide%MAJOR%>"
  [pp128]="#moe.gemm_config<$base, $narrow, registers = [24, 240]%MAJOR%, persistent = true, pingpong = true>"
  [pp128-ef]="#moe.gemm_config<$base, $narrow, registers = [24, 240]%MAJOR%, persistent = true, pingpong = true, evict_first_outputs = true>"
  [wide-ef]="#moe.gemm_config<$base, $wide%MAJOR%, persistent = true, evict_first_outputs = true>"
)
GEMMS=(
  "s2-P2 M=196608,N=1536,K=512,G=128,B=128"
  "s2-P4 M=256,N=1536,K=196608,G=128,B=128,kind=expert"
  "s2-P1 M=196608,N=256,K=1536,G=128,B=128"
  "s2-rc M=196608,N=512,K=1536,G=128,B=128"
  "s2-P3 M=1536,N=512,K=196608,G=128,B=128,kind=expert"
  "s1-P3 M=4096,N=3072,K=131072,G=128,B=128,kind=expert"
  "s1-P4 M=1536,N=4096,K=131072,G=128,B=128,kind=expert"
  "s1-P2 M=131072,N=4096,K=3072,G=128,B=128"
  "s1-P1 M=131072,N=1536,K=4096,G=128,B=128"
)
table=()
for g in "${GEMMS[@]}"; do
  label=${g%% *}; spec=${g#* }
  major=""
  case "$spec" in *expert*) major=", rhs_n_major = true, lhs_m_major = true" ;; esac
  IFS=, read -r m n k _ <<<"$spec"
  flops=$(( 2 * ${m#M=} * ${n#N=} * ${k#K=} ))
  case "$label" in
  s2-*) order="default wide-grid pp128 pp128-ef" ;;
  *) order="default pp128" ;;
  esac
  [ -n "${ONLY_COMPILE:-}" ] && order="wide-grid pp128 pp128-ef wide-ef"
  for c in $order; do
    cfg=${CFG[$c]//%MAJOR%/$major}
    args=(--target=sm90a --gemm "$spec")
    [ -n "$cfg" ] && args+=(--gemm-config "$cfg")
    echo "== $label $c: moe-run ${args[*]}"
    if [ -n "${ONLY_COMPILE:-}" ]; then
      moe-run "${args[@]}" --compile-only 2>&1 | tail -1
      continue
    fi
    out=$(timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum \
      --kernel-name regex:matmul --print-units base --csv moe-run "${args[@]}" 2>&1)
    echo "$out" | grep -E "result0|moe-run:|error" | head -4
    ns=$(echo "$out" | grep gpu__time_duration | tail -1 | awk -F'","' '{gsub(/[",]/,"",$NF); print $NF}')
    status=$(echo "$out" | grep -q "^moe-run: PASS" && echo PASS || echo FAIL)
    if [ -n "$ns" ]; then
      table+=("$(awk -v l="$label" -v c="$c" -v s="$status" -v ns="$ns" -v f="$flops" \
        'BEGIN { printf "%-6s %-9s %-4s %9.3f ms %7.1f TF", l, c, s, ns / 1e6, f / ns / 1e3 }')")
    else
      table+=("$(printf '%-6s %-9s %-4s no time' "$label" "$c" "$status")")
    fi
  done
done
echo "================ GEMM kernel (ncu) by configuration"
printf '%s\n' "${table[@]}"
