#!/usr/bin/env bash
# Shape 3's weight-gradient GEMMs and their stores (T=8192 H=7168 I=2048
# E=256 K=8; docs/sm90a-kernels.md, twenty-sixth session). P3 and P4 write
# 30 + 15 GB of f32 dWgu / dWd, four K tiles of MMAs per 128 KB result
# tile, and take 44% of the backward. At E = 256 their persistent kernels'
# expert table (12 bytes an expert) leaves tma_store 1136 bytes short beside
# four stages, so they store from the registers; with three stages the
# staged TMA stores fit. This probe times both, and first checks the
# three-stage configs bit for bit against the default on a small layer.
# One device call with the bundle on PATH (a few minutes):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/shape3-stores.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"
L=${LAYER:-T=8192,H=7168,I=2048,E=256,K=8,B=128}
cfg() {  # GEMM INDEX
  echo "$1=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 3, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, tma_store = 2>"
}
staged=(--round-reuse=0 --gemm-config-at "$(cfg 3)" --gemm-config-at "$(cfg 4)")
tmp=$(mktemp -d)

# Exactness: the same GEMMs with three stages and staged stores give the
# default's bits (the operand kernels round x and dy for both: round-reuse=0).
small=T=1024,H=1024,I=512,E=8,K=2,B=128
for v in default staged; do
  args=(--round-reuse=0)
  [ $v = staged ] && args=("${staged[@]}")
  timeout 200 moe-run --target=sm90a "${args[@]}" --layer "$small" \
    --empty-experts 1 --outputs "$tmp/$v" | grep -E "^(moe-run|dx|dw)" | head -4
done
if diff -rq "$tmp/default" "$tmp/staged" >/dev/null; then
  echo "staged == default, bitwise: $small PASS"
else
  echo "staged == default, bitwise: $small FAIL"
fi
rm -rf "$tmp/default" "$tmp/staged"

probe_inputs "$L" "$tmp/in" || exit 1
for v in default staged; do
  args=()
  [ $v = staged ] && args=("${staged[@]}")
  timeout 200 ncu --clock-control none --csv --print-units base \
    --metrics gpu__time_duration.sum moe-run --target=sm90a "${args[@]}" \
    --layer "$L" --inputs "$tmp/in" --check none >"$tmp/ncu.csv" \
    2>"$tmp/ncu.err" || echo "ncu $v failed: $(tail -1 "$tmp/ncu.err")"
  echo "== $v: ncu kernel times"
  kernel_times "$v" "$tmp/ncu.csv"
  timeout 200 moe-run --target=sm90a "${args[@]}" --layer "$L" \
    --inputs "$tmp/in" --check none --repeat 10 --warmup 1 |
    grep -E "^(gpu|timing)" | head -2
done
rm -rf "$tmp"
