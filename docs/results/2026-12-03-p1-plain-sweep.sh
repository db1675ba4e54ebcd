# Device call 5 of 2026-12-03 (repository root on the H200, bundle carried):
# what P1 costs without its activation-backward epilogue. ncu times of every
# kernel of the resident backward at reference shape 1 (recompute and
# checkpoint mode) and shape 2, the default against --no-act-epilogue (P1 a
# plain 128x256 GEMM storing dA, the activation backward an elementwise
# kernel, [dg|du] and a*h rounded by operand kernels).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
bash .bundle/run-on-device.sh true
R=bash\ /tmp/moe-device/run-on-device.sh
times() {  # LABEL LAYER INPUTS ARGS...
  local label=$1 layer=$2 inputs=$3
  shift 3
  echo "== $label"
  timeout 240 $R ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    --print-units base moe-run --target=sm90a --layer "$layer" --inputs "$inputs" \
    --check none "$@" 2>&1 | grep gpu__time |
    awk -F'","' '{ gsub(/[",]/, "", $NF); printf "%-24s %.3f\n", $5, $NF / 1e6; s += $NF }
                 END { printf "total %.3f ms\n", s / 1e6 }' | tee -a $OUT/p1-plain.log
}
s1=T=16384,H=4096,I=1536,E=128,K=8,B=128
s2=T=24576,H=1536,I=256,E=128,K=8,B=128
$R python3 -m moe_crosscheck torch-gen --config $s1 --seed 1 --out /tmp/s1 > /dev/null
for f in "" --no-act-epilogue; do times "shape 1 recompute ${f:-default}" $s1 /tmp/s1 $f; done
rm -rf /tmp/s1
$R python3 -m moe_crosscheck torch-gen --config $s1,checkpoint=true --seed 1 --out /tmp/s1c > /dev/null
for f in "" --no-act-epilogue; do times "shape 1 checkpoint ${f:-default}" $s1,checkpoint=bf16 /tmp/s1c $f; done
rm -rf /tmp/s1c
$R python3 -m moe_crosscheck torch-gen --config $s2 --seed 1 --out /tmp/s2 > /dev/null
for f in "" --no-act-epilogue; do times "shape 2 recompute ${f:-default}" $s2 /tmp/s2 $f; done
