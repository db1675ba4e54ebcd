#!/usr/bin/env bash
# round_lhs with the bit rounding (mxRoundPairBits) in P3's consumers:
# memcheck and racecheck, the outputs bit for bit against the default on
# five layers (RCEIL e4m3 and e5m2 take the bits, FLOOR_ALT the
# conversions), the SASS of P3 (instructions, registers), and the ncu time
# of every GEMM and operand kernel at both reference shapes: the default,
# --round-lhs (P3) and --round-rhs (P4). One device call, with the bundle
# on PATH:
#   bash .bundle/run-on-device.sh bash scripts/device/probes/round-bits.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-74s %s' "$1" "$2")"); }
for tool_layer in "memcheck T=256,H=256,I=128,E=2,K=1,B=128" \
    "racecheck T=256,H=256,I=128,E=2,K=1,B=128" \
    "racecheck T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2"; do
  set -- $tool_layer
  status=PASS
  timeout 300 compute-sanitizer --tool $1 --error-exitcode 1 --print-limit 4 \
    moe-run --target=sm90a --round-lhs --round-rhs --layer "$2" --empty-experts 1 \
    --check none >"$out/log" 2>&1 || { status=FAIL; head -c 2000 "$out/log"; }
  record "compute-sanitizer $1 $2" "$status"
done
for layer in T=256,H=256,I=128,E=2,K=1,B=128 T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
  status=PASS
  timeout 300 moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
    --outputs "$out/o1" >"$out/log" 2>&1 || status=FAIL
  timeout 300 moe-run --target=sm90a --round-lhs --round-rhs --layer "$layer" \
    --empty-experts 1 --outputs "$out/o2" >>"$out/log" 2>&1 || status=FAIL
  for f in "$out"/o1/*.npy; do
    cmp -s "$f" "$out/o2/$(basename "$f")" || { status=FAIL; echo "differs: $f"; }
  done
  [ $status = FAIL ] && tail -5 "$out/log"
  record "--round-lhs --round-rhs == default, bitwise: $layer" "$status"
  rm -rf "$out/o1" "$out/o2"
done
S1=T=16384,H=4096,I=1536,E=128,K=8,B=128
if moe-run --target=sm90a --layer $S1 --round-lhs --round-rhs --compile-only \
    --emit cubin "$out/cubin" >"$out/log" 2>&1; then
  for f in "$out"/cubin/*.cubin; do
    cuobjdump -sass -res-usage "$f" >"$out/sass.txt" 2>&1
    awk '/Function : expert_matmul/ { name = $3 } name && /REG:/ { print "  " name ": " $0 }' "$out/sass.txt" | head -4
    for k in $(grep -o 'Function : expert_matmul_[0-9]*' "$out/sass.txt" | awk '{print $3}'); do
      awk -v k="$k" '$0 ~ "Function : " k "$" { on = 1; next } /Function :/ { on = 0 }
        on && /\/\*[0-9a-f]+\*\// { n++; for (i = 1; i <= NF; i++) if ($i ~ /^(HFMA2|VIMNMX|LOP3|IADD3|PRMT|SHFL|F2FP|HMUL2|FMUL|VOTE)/) { split($i, p, "."); c[p[1]]++ } }
        END { printf "  %s: %d instructions;", k, n; for (o in c) printf " %s %d", o, c[o]; print "" }' "$out/sass.txt"
    done
  done
else
  tail -3 "$out/log"; record "compile S1 --emit cubin" FAIL
fi
for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 $S1; do
  python3 -m moe_crosscheck torch-gen --config "$shape" --seed 1 \
    --out "$out/in" >/dev/null 2>&1 || { record "torch-gen $shape" FAIL; continue; }
  for args in "" --round-lhs --round-rhs; do
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
echo; echo "================ round-bits probe"
printf '%s\n' "${rows[@]}"
