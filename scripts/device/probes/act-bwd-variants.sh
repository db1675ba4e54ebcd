#!/usr/bin/env bash
# Variants of the activation-backward kernel against a base: device bundles
# (scripts/build-device-bundle.sh) of trees that differ only in
# ActBwdKernel.cpp, run ON THE H200 from the repository root:
#
#   bash scripts/device/probes/act-bwd-variants.sh DIR_BASE DIR_V [DIR_V ...]
#
# (DIR_* hold moe-device.tar.xz). Each variant's outputs against the base's
# on five layers: dx, dwgu and dwd bit for bit, and da too unless
# DA_MAY_DIFFER=1 (a variant that sums the <dA, h> partials over other
# column tiles: within the R_mx gate, its last bits may differ); memcheck
# and racecheck of each variant (SANITIZE_CHECKPOINT=1: also on a layer
# with a checkpoint); first, the ncu time of the act_bwd kernel of each
# bundle at the reference shapes (torch-gen inputs). Prints a table last. (2026-12-04: the 128-column tiles, DA_MAY_DIFFER=1; the loads of
# rows ahead.)
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-70s %s' "$1" "$2")"); }
names=()
for dir in "$@"; do
  v=v${#names[@]}
  mkdir -p "$out/$v" && tar -xJf "$dir/moe-device.tar.xz" -C "$out/$v" ||
    { echo "no bundle in $dir"; exit 2; }
  echo "$v: $dir ($(sed -n 's/^commit: //p' "$out/$v/moe-device/BUILD-INFO"))"
  names+=("$v")
done
[ ${#names[@]} -ge 2 ] || { echo "usage: $0 DIR_BASE DIR_V [DIR_V ...]"; exit 2; }
bin() { echo "$out/$1/moe-device/bin/moe-run"; }
for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128 \
    T=16384,H=4096,I=1536,E=128,K=8,B=128,checkpoint=bf16; do
  # (torch-gen spells a checkpoint input checkpoint=true.)
  python3 -m moe_crosscheck torch-gen --config "${shape/checkpoint=bf16/checkpoint=true}" \
    --seed 1 --out "$out/in" >/dev/null 2>&1 ||
    { record "torch-gen $shape" FAIL; continue; }
  for v in "${names[@]}"; do
    ncu --clock-control none --kernel-name regex:act_bwd --csv \
      --metrics gpu__time_duration.sum,dram__bytes.sum.per_second,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
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
for layer in T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=256,H=256,I=128,E=2,K=1,B=128,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on \
    T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
  timeout 300 "$(bin v0)" --target=sm90a --layer "$layer" --empty-experts 1 \
    --outputs "$out/o0" >"$out/log" 2>&1 || cat "$out/log"
  for v in "${names[@]:1}"; do
    status=PASS
    timeout 300 "$(bin $v)" --target=sm90a --layer "$layer" --empty-experts 1 \
      --outputs "$out/o$v" >"$out/log" 2>&1 || { status=FAIL; cat "$out/log"; }
    for f in "$out"/o0/*.npy; do
      n=$(basename "$f")
      [ "$n" = da.npy ] && [ -n "${DA_MAY_DIFFER:-}" ] && continue
      cmp -s "$f" "$out/o$v/$n" || { status=FAIL; echo "$v differs: $n"; }
    done
    record "$v == v0${DA_MAY_DIFFER:+ but da}, bitwise: $layer" "$status"
    rm -rf "$out/o$v"
  done
  rm -rf "$out/o0"
done
for v in "${names[@]:1}"; do
  for tool in memcheck racecheck; do
    for layer in T=1024,H=512,I=256,E=8,K=2,B=128 \
        ${SANITIZE_CHECKPOINT:+T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16}; do
      status=PASS
      timeout 300 compute-sanitizer --tool $tool --error-exitcode 1 \
        "$(bin $v)" --target=sm90a --layer "$layer" --empty-experts 1 \
        --check none >"$out/log" 2>&1 || status=FAIL
      tail -2 "$out/log"
      record "compute-sanitizer $tool $v $layer" "$status"
    done
  done
done
echo
echo "================ act_bwd variants against v0"
printf '%s\n' "${rows[@]}"
