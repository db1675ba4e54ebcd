#!/usr/bin/env bash
# The activation-backward kernel's tile width, A against B: two device
# bundles (scripts/build-device-bundle.sh) of trees that differ only in
# kActBwdTileColumns, run ON THE H200 from the repository root:
#
#   bash scripts/device/probes/act-bwd-columns.sh DIR_A DIR_B
#
# (DIR_* hold moe-device.tar.xz). Each layer's outputs from both: dx, dwgu
# and dwd bit for bit (da sums its <dA, h> partials over tiles of the
# width: within the R_mx gate, its last bits may differ); memcheck and
# racecheck of B; then the ncu time of the act_bwd kernel of both at the
# reference shapes (torch-gen inputs). Prints a table last.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-70s %s' "$1" "$2")"); }
for v in A B; do
  dir=$1; shift
  mkdir -p "$out/$v" && tar -xJf "$dir/moe-device.tar.xz" -C "$out/$v" ||
    { echo "no bundle in $dir"; exit 2; }
done
bin() { echo "$out/$1/moe-device/bin/moe-run"; }
for layer in T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=256,H=256,I=128,E=2,K=1,B=128,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on \
    T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
  status=PASS
  for v in A B; do
    timeout 300 "$(bin $v)" --target=sm90a --layer "$layer" --empty-experts 1 \
      --outputs "$out/o$v" >"$out/log$v" 2>&1 || status=FAIL
    cat "$out/log$v"
  done
  for f in "$out"/oA/*.npy; do
    n=$(basename "$f")
    [ "$n" = da.npy ] && continue
    cmp -s "$f" "$out/oB/$n" || { status=FAIL; echo "differs: $n"; }
  done
  record "A == B but da, both within R_mx: $layer" "$status"
  rm -rf "$out/oA" "$out/oB"
done
for tool in memcheck racecheck; do
  status=PASS
  timeout 300 compute-sanitizer --tool $tool --error-exitcode 1 "$(bin B)" \
    --target=sm90a --layer T=1024,H=512,I=256,E=8,K=2,B=128 --empty-experts 1 \
    --check none >"$out/log" 2>&1 || status=FAIL
  tail -3 "$out/log"
  record "compute-sanitizer $tool B" "$status"
  status=PASS
  timeout 300 compute-sanitizer --tool $tool --error-exitcode 1 "$(bin B)" \
    --target=sm90a --layer T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16 \
    --empty-experts 1 --check none >"$out/log" 2>&1 || status=FAIL
  tail -3 "$out/log"
  record "compute-sanitizer $tool B checkpoint" "$status"
done
for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128 \
    T=16384,H=4096,I=1536,E=128,K=8,B=128,checkpoint=bf16; do
  python3 -m moe_crosscheck torch-gen --config "$shape" --seed 1 \
    --out "$out/in" >/dev/null 2>&1 || { record "torch-gen $shape" FAIL; continue; }
  for v in A B; do
    ncu --clock-control none --kernel-name regex:act_bwd --csv \
      --metrics gpu__time_duration.sum,dram__bytes.sum.per_second,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem \
      --print-units base "$(bin $v)" --target=sm90a --layer "$shape" \
      --inputs "$out/in" --check none >"$out/ncu$v.csv" 2>&1
    cp "$out/ncu$v.csv" "${OUT:-$out}/act-bwd-$v-${shape//[=,]/_}.csv" 2>/dev/null
    summary=$(grep '"act_bwd' "$out/ncu$v.csv" |
      awk -F'","' '{ gsub(/[",]/, "", $NF); printf "%s=%s ", $(NF-2), $NF }')
    echo "$v $shape: $summary"
    record "ncu act_bwd $v ${shape%%,H*}${shape##*B=128}" "$summary"
  done
  rm -rf "$out/in"
done
echo
echo "================ act_bwd tile width, A against B"
printf '%s\n' "${rows[@]}"
