# Device call 3 of 2026-12-03 (run from the repository root on the H200 with
# the bundle carried): the sm90a matrix, determinism and the sanitizers at
# this tree, the matrix again with --lhs-codes, and lhs_codes with a fifth
# stage (its stages are 40.25 KiB against 48) on the 128x256 GEMMs: the
# 8192^3 kernel and, at reference shape 1, the recompute GEMM and P2 (ncu).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONPATH=$PWD/python
bash .bundle/run-on-device.sh true
R=bash\ /tmp/moe-device/run-on-device.sh
if [ -z "${SKIP_SUITE:-}" ]; then
  $R bash scripts/device/gpu-suite.sh matrix determinism sanitize 2>&1 | tee $OUT/suite-default.log | tail -30
  MATRIX_EXTRA=--lhs-codes $R bash scripts/device/gpu-suite.sh matrix 2>&1 | tee $OUT/suite-lhs.log | tail -25
fi
base='mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16]'
wg='warpgroups = [1, 2], registers = [40, 232]'
sq="persistent = true, raster_m = 16"
for cfg in "stages = 4, $wg, $sq" "stages = 4, $wg, $sq, lhs_codes = true" "stages = 5, $wg, $sq, lhs_codes = true"; do
  echo "== 8192^3 $cfg"
  timeout 120 $R ncu --clock-control none --kernel-name regex:matmul --csv \
    --metrics gpu__time_duration.sum --print-units base moe-run --target=sm90a \
    --gemm M=8192,N=8192,K=8192,G=1 --gemm-config "#moe.gemm_config<$base, $cfg>" 2>&1 |
    grep -E 'gpu__time|rel\(exact\)|result0|error' | tail -3
done 2>&1 | tee $OUT/gemm.log
shape=T=16384,H=4096,I=1536,E=128,K=8,B=128
$R python3 -m moe_crosscheck torch-gen --config $shape --seed 1 --out /tmp/s1in > /dev/null
rc="#moe.gemm_config<$base, stages = 5, $wg, rhs_n_major = true, lhs_codes = true>"
p2="#moe.gemm_config<$base, stages = 5, $wg, persistent = true, lhs_codes = true>"
echo "== shape 1, recompute and P2 lhs_codes with 5 stages"
timeout 300 $R ncu --clock-control none --kernel-name regex:'matmul|mx_operand' --csv \
  --metrics gpu__time_duration.sum --print-units base moe-run --target=sm90a \
  --layer $shape --inputs /tmp/s1in --check none "--gemm-config-at=0=$rc" "--gemm-config-at=2=$p2" 2>&1 |
  grep gpu__time | awk -F'","' '{ gsub(/[",]/, "", $NF); printf "%s %.3f\n", $5, $NF / 1e6; s += $NF } END { printf "total %.3f ms\n", s / 1e6 }' |
  tee $OUT/s1-stages5.log
