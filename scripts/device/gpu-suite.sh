#!/usr/bin/env bash
# The GPU suite, run ON THE H200 from the repository root with the device
# bundle carried (scripts/build-device-bundle.sh; carry [".bundle"]):
#
#   bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh [PART...]
#
# PARTS (default: all of them, in this order):
#   smoke      the CUDA runtime smoke test and the host target from the bundle
#   matrix     every moe-run case of test/Integration/Host/matrix-*.test on
#              the sm90a target (MX GEMMs on the GPU, the rest on the host)
#   layers     larger layers on sm90a with both MMA paths (bf16, fp8)
#   sanitize   compute-sanitizer memcheck and racecheck on two sm90a layers
#   determinism  two sm90a runs, outputs compared bit for bit
#   kernels    ncu kernel durations of one layer, both MMA paths
# Prints a table last; exit status 0 only if every row passes.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-66s %s' "$1" "$2")"); }
# Runs a command, keeps its log, and records PASS / FAIL with the largest
# rel(R_mx) that moe-run printed.
run() {
  local name=$1; shift
  echo "== $name: $*"
  local status=PASS
  "$@" >"$out/log" 2>&1 || status=FAIL
  cat "$out/log"
  local worst
  # The rel(R_mx) column follows the dtype column of each output row.
  worst=$(awk '$1 ~ /^(dx|da|dwgu|dwd|dbgu|dbd)$/ {
                 for (i = 2; i < NF; ++i)
                   if ($i == "bf16" || $i == "f32") { v = $(i + 1) + 0; break }
                 if (v > m) m = v } END { if (m) printf "%.2e", m }' \
            "$out/log")
  record "$name" "$status${worst:+ (max rel R_mx $worst)}"
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(smoke matrix layers sanitize determinism kernels)
want() { printf '%s\n' "${parts[@]}" | grep -qx "$1"; }

echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
small=T=256,H=256,I=128,E=2,K=1,B=128
partial=T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2

if want smoke; then
  run "runtime smoke (moe-cuda-smoke)" moe-cuda-smoke
  run "host: embedded example" moe-run examples/blockwise_bwd.mlir
fi

if want matrix; then
  # The host matrix's command lines, as the lit tests run them.
  mapfile -t cases < <(grep -h "RUN: moe-run --layer" \
      test/Integration/Host/matrix-*.test |
    sed -e 's/.*RUN: moe-run //' -e 's/ | FileCheck.*//' | sort -u)
  for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    run "sm90a ${c% --opt-level 0}" moe-run --target=sm90a $c
  done
fi

if want layers; then
  for path in bf16 fp8; do
    for layer in "$small" "$small,act=geglu" T=512,H=512,I=256,E=4,K=2,B=128 \
        T=1024,H=1024,I=512,E=8,K=2,B=128 \
        T=1024,H=768,I=256,E=8,K=4,B=128,quant=e5m2,affinity=on_h; do
      run "sm90a $path $layer" moe-run --target=sm90a --mma-path "$path" \
        --layer "$layer"
    done
  done
fi

if want sanitize; then
  for layer in "$small" "$partial"; do
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool (sm90a, $layer)"
      compute-sanitizer --tool "$tool" moe-run --target=sm90a --layer "$layer" \
        --empty-experts 3 >"$out/$tool" 2>&1
      tail -3 "$out/$tool"
      if grep -qE "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)" \
           "$out/$tool" && grep -q "moe-run: PASS" "$out/$tool"; then
        record "compute-sanitizer $tool $layer" PASS
      else
        record "compute-sanitizer $tool $layer" FAIL
      fi
    done
  done
fi

if want determinism; then
  echo "== determinism: two runs, bitwise"
  layer=T=1024,H=1024,I=512,E=8,K=2,B=128
  same=PASS
  for i in 1 2; do
    moe-run --target=sm90a --layer "$layer" --outputs "$out/run$i" \
      >/dev/null 2>&1 || same=FAIL
  done
  for f in "$out"/run1/*.npy; do
    cmp -s "$f" "$out/run2/$(basename "$f")" || { same=FAIL; echo "differs: $f"; }
  done
  record "determinism $layer (2 runs, bitwise)" "$same"
fi

if want kernels; then
  layer=T=2048,H=1024,I=512,E=8,K=2,B=128
  for path in bf16 fp8; do
    echo "== ncu kernel durations, $path, $layer"
    if ncu --clock-control none --metrics gpu__time_duration.sum \
         --print-units base --csv moe-run --target=sm90a --mma-path "$path" --layer "$layer" \
         >"$out/ncu" 2>&1; then
      grep -E "mx_(block|expert)_matmul" "$out/ncu" |
        awk -F'","' '{ gsub(/[",]/, "", $NF); print $5, $NF " ns" }' |
        tee "$out/ncu-$path"
      record "ncu $path $layer" "PASS ($(awk '{ s += $2 } END { printf "%.1f us", s / 1000 }' \
        "$out/ncu-$path") in MX GEMM kernels)"
    else
      tail -20 "$out/ncu"
      record "ncu $path $layer" FAIL
    fi
  done
fi

echo
echo "================ GPU suite on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
printf '%s\n' "${rows[@]}"
! printf '%s\n' "${rows[@]}" | grep -q FAIL
