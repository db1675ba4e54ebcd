#!/usr/bin/env bash
# ncu's full section set of the block GEMMs at reference shape 1, the
# transposed products of --swap-weights against the default kernels
# (P1: block_matmul_3 / block_matmul_5, the recompute: block_matmul_1 /
# block_matmul_2), reports and details pages into OUT (default $OUT):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/swap-weights-prof.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=${1:-$OUT}
S1=T=16384,H=4096,I=1536,E=128,K=8,B=128
for v in "block_matmul_3 --swap-weights" block_matmul_5 \
    "block_matmul_1 --swap-weights" block_matmul_2; do
  set -- $v
  k=$1
  shift
  name=$k${1:+-swap}
  timeout 170 ncu --set full --import-source no --kernel-name "$k" \
    --launch-count 1 -o "$out/$name" moe-run --target=sm90a --layer $S1 \
    --check none "$@" >"$out/$name.log" 2>&1
  echo "== $k $* (exit status $?)"
  ncu --import "$out/$name.ncu-rep" --page details >"$out/$name.txt" 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Ipc Active|No Eligible|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|Warp Cycles Per Issued" \
    "$out/$name.txt" | head -12
done
