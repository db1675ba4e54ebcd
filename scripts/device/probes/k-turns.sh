#!/usr/bin/env bash
# k_turns on the transposed block GEMMs (docs/sm90a-kernels.md, twenty-fourth
# session): the two consumer warpgroups take turns at the tensor cores each
# K tile, so that one rounds its next K tile beside the other's MMAs. The
# probe first (rs-wgmma-overlap's RSO column, if .bundle has it), then the
# outputs (k_turns changes no MMA or its order: bit for bit the default, and
# racecheck), then ncu's kernel times at T=8192 (the default swaps there)
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
for layer in T=300,H=256,I=160,E=4,K=2,B=128,bias=on \
    T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h; do
  timeout 120 moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
    --outputs "$tmp/a" >"$tmp/log" 2>&1 || echo "  default $layer FAIL"
  if timeout 120 moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
      --k-turns --outputs "$tmp/b" >"$tmp/log" 2>&1; then
    cmp -s <(cat "$tmp"/a/* | sha256sum) <(cat "$tmp"/b/* | sha256sum) &&
      echo "  $layer: PASS vs R_mx, bit for bit the default" ||
      echo "  $layer: PASS vs R_mx, DIFFERS from the default"
  else
    echo "  $layer: k_turns FAIL"
    tail -3 "$tmp/log"
  fi
  rm -rf "$tmp/a" "$tmp/b"
done
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 moe-run \
  --target=sm90a --layer T=512,H=256,I=128,E=4,K=2,B=128,bias=on \
  --empty-experts 1 --check none --k-turns \
  >"$tmp/log" 2>&1 && echo "  racecheck k_turns: PASS" ||
  { echo "  racecheck k_turns: FAIL"; tail -5 "$tmp/log"; }

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
