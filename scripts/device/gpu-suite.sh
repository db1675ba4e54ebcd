#!/usr/bin/env bash
# The GPU suite, run ON THE H200 from the repository root with the device
# bundle carried (scripts/build-device-bundle.sh; carry [".bundle"]):
#
#   bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh
#
# Runs the CUDA runtime smoke test, the host target from the bundle, the
# sm90a hybrid target (P1/P2 GEMMs on the GPU) on a few layers against R_mx,
# compute-sanitizer memcheck and racecheck on the smallest sm90a layer, and a
# two-run bitwise determinism check; prints a table last. Exit status 0 only
# if every row passes.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }
run() {
  local name=$1; shift
  echo "== $name: $*"
  if "$@" >"$out/log" 2>&1; then record "$name" PASS; else record "$name" FAIL; fi
  cat "$out/log"
}

echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
run "runtime smoke (moe-cuda-smoke)" moe-cuda-smoke
run "host: embedded example" moe-run examples/blockwise_bwd.mlir
small=T=256,H=256,I=128,E=2,K=1,B=128
run "sm90a: $small" moe-run --target=sm90a --layer "$small"
run "sm90a: $small,act=geglu seed 3" \
  moe-run --target=sm90a --layer "$small,act=geglu" --seed 3
run "sm90a: T=512,H=512,I=256,E=4,K=2,B=128" \
  moe-run --target=sm90a --layer T=512,H=512,I=256,E=4,K=2,B=128
run "sm90a: T=1024,H=1024,I=512,E=8,K=2,B=128" \
  moe-run --target=sm90a --layer T=1024,H=1024,I=512,E=8,K=2,B=128

for tool in memcheck racecheck; do
  echo "== compute-sanitizer --tool $tool (sm90a, $small)"
  compute-sanitizer --tool "$tool" moe-run --target=sm90a --layer "$small" \
    >"$out/$tool" 2>&1
  tail -3 "$out/$tool"
  if grep -qE "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)" \
       "$out/$tool" && grep -q "moe-run: PASS" "$out/$tool"; then
    record "compute-sanitizer $tool" PASS
  else
    record "compute-sanitizer $tool" FAIL
  fi
done

echo "== determinism: two runs, bitwise"
same=PASS
for i in 1 2; do
  moe-run --target=sm90a --layer "$small" --outputs "$out/run$i" \
    >/dev/null 2>&1 || same=FAIL
done
for f in "$out"/run1/*.npy; do
  cmp -s "$f" "$out/run2/$(basename "$f")" || { same=FAIL; echo "differs: $f"; }
done
record "determinism (2 runs, bitwise)" "$same"

echo
echo "================ GPU suite on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
printf '%s\n' "${rows[@]}"
! printf '%s\n' "${rows[@]}" | grep -q FAIL
