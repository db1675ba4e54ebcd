#!/usr/bin/env bash
# The slot roundings inside P3 and P4 with the bit rounding (mxRoundPairBits):
#   --round-lhs         P3's x in its consumers' registers
#   --round-rhs         P4's dy in its producer warpgroup
#   --swap-rounded-rhs  P4 transposed, dy in its consumers' registers
# memcheck and racecheck (P3 with each form of P4), the
# outputs bit for bit against the default on five layers (RCEIL e4m3 and
# e5m2 take the bits, FLOOR_ALT the conversions), the SASS of P3 and P4,
# and the ncu time of every GEMM and operand kernel at both reference
# shapes for the default and each variant. One device call, with the
# bundle on PATH (CHECKS_ONLY=1 or NCU_ONLY=1 split it in two):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/round-bits.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-78s %s' "$1" "$2")"); }
if [ -z "${NCU_ONLY:-}" ]; then
  for check in "memcheck T=256,H=256,I=128,E=2,K=1,B=128 --round-rhs" \
      "racecheck T=256,H=256,I=128,E=2,K=1,B=128 --round-rhs" \
      "racecheck T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2 --round-rhs" \
      "memcheck T=256,H=256,I=128,E=2,K=1,B=128 --swap-rounded-rhs" \
      "racecheck T=256,H=256,I=128,E=2,K=1,B=128 --swap-rounded-rhs" \
      "racecheck T=1024,H=512,I=256,E=8,K=2,B=128 --swap-rounded-rhs"; do
    set -- $check
    flags=(--round-lhs "$3")
    status=PASS
    timeout 300 compute-sanitizer --tool $1 --error-exitcode 1 --print-limit 4 \
      moe-run --target=sm90a "${flags[@]}" --layer "$2" --empty-experts 1 \
      --check none >"$out/log" 2>&1 || { status=FAIL; head -c 2000 "$out/log"; }
    record "compute-sanitizer $1 ${flags[*]} $2" "$status"
  done
  for layer in T=256,H=256,I=128,E=2,K=1,B=128 T=1024,H=1024,I=512,E=8,K=2,B=128 \
      T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
      T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
      T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
    timeout 300 moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
      --outputs "$out/o1" >"$out/log" 2>&1 || record "default $layer" FAIL
    for flags in "--round-lhs --round-rhs" "--round-lhs --swap-rounded-rhs"; do
      status=PASS
      # shellcheck disable=SC2086
      timeout 300 moe-run --target=sm90a $flags --layer "$layer" \
        --empty-experts 1 --outputs "$out/o2" >>"$out/log" 2>&1 || status=FAIL
      for f in "$out"/o1/*.npy; do
        cmp -s "$f" "$out/o2/$(basename "$f")" || { status=FAIL; echo "differs: $f"; }
      done
      [ $status = FAIL ] && tail -5 "$out/log"
      record "$flags == default, bitwise: $layer" "$status"
      rm -rf "$out/o2"
    done
    rm -rf "$out/o1"
  done
  # The SASS mix of the expert GEMMs at shape 1 (bench/sass_mix.py).
  for flags in "--round-lhs --round-rhs" --swap-rounded-rhs; do
    echo "== SASS of the expert GEMMs, $flags"
    # shellcheck disable=SC2086
    python3 bench/sass_mix.py --moe-run "$(command -v moe-run)" \
      --kernel expert_matmul -- $flags || record "SASS S1 $flags" FAIL
  done
fi
if [ -z "${CHECKS_ONLY:-}" ]; then
  for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128; do
    python3 -m moe_crosscheck torch-gen --config "$shape" --seed 1 \
      --out "$out/in" >/dev/null 2>&1 || { record "torch-gen $shape" FAIL; continue; }
    for args in "" --round-lhs --round-rhs --swap-rounded-rhs; do
      # shellcheck disable=SC2086
      timeout 300 ncu --clock-control none --kernel-name regex:'matmul|mx_operand' \
        --csv --print-units base --metrics gpu__time_duration.sum \
        moe-run --target=sm90a --layer "$shape" --inputs "$out/in" --check none \
        $args >"$out/ncu.csv" 2>"$out/ncu.err" || { record "ncu $shape $args" FAIL; continue; }
      echo "== ${shape%%,H*} ${args:-default}"
      grep gpu__time_duration "$out/ncu.csv" |
        awk -F'","' '{ gsub(/[",]/, "", $NF); printf "  %s %.3f\n", $5, $NF / 1e6; s += $NF }
                     END { printf "  total %.3f ms\n", s / 1e6 }'
    done
    rm -rf "$out/in"
  done
fi
echo; echo "================ round-bits probe"
printf '%s\n' "${rows[@]}"
