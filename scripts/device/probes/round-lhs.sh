#!/usr/bin/env bash
# round_lhs in the consumers' registers: racecheck of an earlier bundle
# (DIR_A, first lines of its report) and of this one (DIR_B): memcheck,
# racecheck, the outputs bit for bit against the default, and the ncu time
# of every kernel at the reference shapes, default and --round-operands.
# Run ON THE H200 from the repository root:
#   bash scripts/device/probes/round-lhs.sh DIR_A DIR_B
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-74s %s' "$1" "$2")"); }
for v in A B; do
  dir=$1; shift
  mkdir -p "$out/$v" && tar -xJf "$dir/moe-device.tar.xz" -C "$out/$v" ||
    { echo "no bundle in $dir"; exit 2; }
done
bin() { echo "$out/$1/moe-device/bin/moe-run"; }
small=T=256,H=256,I=128,E=2,K=1,B=128
sanitize() {  # BUNDLE TOOL LAYER
  local status=PASS
  timeout 300 compute-sanitizer --tool $2 --error-exitcode 1 --print-limit 4 \
    "$(bin $1)" --target=sm90a --round-operands --layer "$3" --empty-experts 1 \
    --check none >"$out/log" 2>&1 || status=FAIL
  [ $status = FAIL ] && head -c 3000 "$out/log"
  tail -2 "$out/log"
  record "compute-sanitizer $2 $1 $3" "$status"
}
if [ -z "${NCU_ONLY:-}" ]; then
sanitize A racecheck "$small"
sanitize B racecheck "$small"
sanitize B memcheck "$small"
sanitize B racecheck T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2
for layer in "$small" T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
  status=PASS
  timeout 300 "$(bin B)" --target=sm90a --layer "$layer" --empty-experts 1 \
    --outputs "$out/o1" >"$out/log" 2>&1 || status=FAIL
  timeout 300 "$(bin B)" --target=sm90a --round-operands --layer "$layer" \
    --empty-experts 1 --outputs "$out/o2" >>"$out/log" 2>&1 || status=FAIL
  for f in "$out"/o1/*.npy; do
    cmp -s "$f" "$out/o2/$(basename "$f")" || { status=FAIL; echo "differs: $f"; }
  done
  [ $status = FAIL ] && tail -5 "$out/log"
  record "--round-operands == default, bitwise: $layer" "$status"
  rm -rf "$out/o1" "$out/o2"
done
fi
for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128; do
  python3 -m moe_crosscheck torch-gen --config "$shape" --seed 1 \
    --out "$out/in" >/dev/null 2>&1 || { record "torch-gen $shape" FAIL; continue; }
  for args in "" --round-operands; do
    timeout 300 ncu --clock-control none --kernel-name regex:'matmul|mx_operand' \
      --csv --print-units base --metrics gpu__time_duration.sum \
      "$(bin B)" --target=sm90a --layer "$shape" --inputs "$out/in" --check none \
      $args >"$out/ncu.csv" 2>"$out/ncu.err" || { record "ncu $shape $args" FAIL; continue; }
    echo "== ${shape%%,H*} ${args:-default}"
    grep gpu__time_duration "$out/ncu.csv" |
      awk -F'","' '{ gsub(/[",]/, "", $NF); printf "  %s %.3f\n", $5, $NF / 1e6; s += $NF }
                   END { printf "  total %.3f ms\n", s / 1e6 }'
  done
  rm -rf "$out/in"
done
# The layer of gpu-suite.sh's sanitize_with.
sanitize A racecheck T=1024,H=512,I=256,E=8,K=2,B=128
sanitize B racecheck T=1024,H=512,I=256,E=8,K=2,B=128
echo; echo "================ round_lhs probe"
printf '%s\n' "${rows[@]}"
