#!/usr/bin/env bash
# The block GEMMs' transposed products (--swap-weights: the recompute, P1
# and P2 round their raw weights along K in the consumers' registers, the
# weight operand kernels gone), alone and beside P3's and P4's slot
# roundings (--round-lhs --swap-rounded-rhs):
# memcheck and racecheck, the outputs against R_mx (moe-run's check) and
# against the default bit for bit (reported, not required: the transposed
# MMAs may sum in another order), two runs bit for bit, and the ncu time
# of every kernel at both reference shapes. One device call, with the
# bundle on PATH (CHECKS_ONLY=1 or NCU_ONLY=1 split it in two):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/swap-weights.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-86s %s' "$1" "$2")"); }
ALL="--swap-weights --round-lhs --swap-rounded-rhs"
# (TIMEOUT: seconds a check may run; a kernel that never finishes its
# ring waits until then.)
T=${TIMEOUT:-300}
if [ -z "${NCU_ONLY:-}" ]; then
  # A smoke run first: stop at once if the kernels fail or hang.
  for flags in --swap-weights "$ALL"; do
    # shellcheck disable=SC2086
    if ! timeout 90 moe-run --target=sm90a $flags \
        --layer T=256,H=256,I=128,E=2,K=1,B=128 >"$out/log" 2>&1; then
      echo "== smoke $flags failed (exit status $?)"; tail -30 "$out/log"
      exit 1
    fi
    echo "== smoke $flags: $(grep -c PASS "$out/log") PASS lines"
  done
  for check in "memcheck T=256,H=256,I=128,E=2,K=1,B=128,bias=on" \
      "racecheck T=256,H=256,I=128,E=2,K=1,B=128,bias=on" \
      "racecheck T=90,H=64,I=160,E=8,K=2,B=128,quant=e5m2" \
      "memcheck T=1024,H=512,I=256,E=8,K=2,B=128,checkpoint=bf16"; do
    set -- $check
    status=PASS
    timeout $((2 * T)) compute-sanitizer --tool $1 --error-exitcode 1 --print-limit 4 \
      moe-run --target=sm90a --swap-weights --layer "$2" --empty-experts 1 \
      --check none >"$out/log" 2>&1 || { status=FAIL; head -c 2000 "$out/log"; }
    record "compute-sanitizer $1 --swap-weights $2" "$status"
  done
  # (Odd block counts, experts without tokens, a partial M tile of the
  # weight (I = 160), a bias, the checkpoint mode (no recompute GEMM),
  # e5m2, and FLOOR_ALT, whose blocks take the conversions.)
  for layer in T=256,H=256,I=128,E=2,K=1,B=128 T=1024,H=1024,I=512,E=8,K=2,B=128 \
      T=300,H=256,I=160,E=4,K=2,B=128,bias=on \
      T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
      T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
      T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
    timeout $T moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
      --outputs "$out/o1" >"$out/log" 2>&1 || record "default $layer" FAIL
    for flags in --swap-weights "$ALL"; do
      status=PASS
      # shellcheck disable=SC2086
      timeout $T moe-run --target=sm90a $flags --layer "$layer" \
        --empty-experts 1 --outputs "$out/o2" >"$out/log" 2>&1 || status=FAIL
      [ $status = FAIL ] && tail -8 "$out/log"
      record "$flags vs R_mx: $layer" "$status"
      # shellcheck disable=SC2086
      timeout $T moe-run --target=sm90a $flags --layer "$layer" \
        --empty-experts 1 --check none --outputs "$out/o3" >/dev/null 2>&1
      same=yes; repeat=yes
      for f in "$out"/o1/*.npy; do
        cmp -s "$f" "$out/o2/$(basename "$f")" || same="no ($(basename "$f"))"
        cmp -s "$out/o2/$(basename "$f")" "$out/o3/$(basename "$f")" || repeat=FAIL
      done
      record "$flags two runs bitwise: $layer" "$repeat"
      record "$flags == default bitwise (info): $layer" "$same"
      rm -rf "$out/o2" "$out/o3"
    done
    rm -rf "$out/o1"
  done
  # The SASS mix of the block GEMMs at shape 1 (bench/sass_mix.py).
  echo "== SASS of the block GEMMs, --swap-weights"
  python3 bench/sass_mix.py --moe-run "$(command -v moe-run)" \
    --kernel block_matmul -- --swap-weights ||
    record "SASS S1 --swap-weights" FAIL
fi
if [ -z "${CHECKS_ONLY:-}" ]; then
  for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128; do
    probe_inputs "$shape" "$out/in" || { record "torch-gen $shape" FAIL; continue; }
    for args in "" --swap-weights "$ALL"; do
      # shellcheck disable=SC2086
      timeout 300 ncu --clock-control none \
        --csv --print-units base --metrics gpu__time_duration.sum \
        moe-run --target=sm90a --layer "$shape" --inputs "$out/in" --check none \
        $args >"$out/ncu.csv" 2>"$out/ncu.err" || { record "ncu $shape $args" FAIL; continue; }
      echo "== ${shape%%,H*} ${args:-default}"
      kernel_times "${args:-default}" "$out/ncu.csv" 0
    done
    rm -rf "$out/in"
  done
fi
echo; echo "================ swap-weights probe"
printf '%s\n' "${rows[@]}"
