#!/usr/bin/env bash
# Session 9 sweep 2: per-warpgroup stage release; cluster pairs at 8192^3
# and in layers (--grid-gemms --cluster-gemms) against the defaults.
set -u
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
R=/tmp/r; W=/tmp/w; rm -rf $R; mkdir -p $W $R
T0=$(date +%s)
tab=()
left() { [ $(( $(date +%s)-T0 )) -lt ${1:-520} ] || { echo "skip: time"; return 1; }; }
rec() { tab+=("$(printf '%-62s %s' "$1" "$2")"); echo "REC $1 $2"; }
S1=T=16384,H=4096,I=1536,E=128,K=8,B=128
S2=T=24576,H=1536,I=256,E=128,K=8,B=128
python3 -m moe_crosscheck torch-gen --config "$S1,checkpoint=true" --seed 1 --out $W/in1 > $R/gen1.log 2>&1 &
python3 -m moe_crosscheck torch-gen --config "$S2,checkpoint=true" --seed 1 --out $W/in2 > $R/gen2.log 2>&1 &
wait
c128='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>'
c256='#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>'
g256='#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>'
g128='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>'
kt() { # label config-args...
  left || return; local label=$1; shift; local spec=${SPEC:-M=8192,N=8192,K=8192,G=1}
  timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum --print-units base --csv --kernel-name regex:matmul \
    moe-run --target=sm90a --gemm $spec --check none "$@" > $R/kt-$label.csv 2>&1
  local ns=$(grep gpu__time_duration $R/kt-$label.csv | tail -1 | awk -F'","' '{print $NF}' | tr -d '",')
  timeout 60 moe-run --target=sm90a --gemm $spec --repeat 3 "$@" > $R/g-$label.log 2>&1
  local st=$(grep -E "PASS|FAIL" $R/g-$label.log | head -1 | awk '{print $4, $NF}')
  local fl=$(python3 -c "import re;d=dict(re.findall(r'(\w+)=(\w+)','$spec'));print(2*int(d['M'])*int(d['N'])*int(d['K']))")
  rec "$spec $label" "kernel_ns=$ns tf=$(python3 -c "print(round($fl/$ns/1e3,1))" 2>/dev/null) | $st"
}
kt default
kt grid256 --gemm-config "$g256"
kt cl256 --gemm-config "$c256"
kt grid128 --gemm-config "$g128"
kt cl128 --gemm-config "$c128"
pp='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [32, 232], persistent = true, pingpong = true>'
ppx='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [32, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, pingpong = true>'
kt pingpong --gemm-config "$pp"
SPEC=M=4096,N=3072,K=32768,G=32,B=128,kind=expert kt p3-default
SPEC=M=4096,N=3072,K=32768,G=32,B=128,kind=expert kt p3-pingpong --gemm-config "$ppx"
SPEC=M=1536,N=4096,K=32768,G=32,B=128,kind=expert kt p4-default
SPEC=M=1536,N=4096,K=32768,G=32,B=128,kind=expert kt p4-pingpong --gemm-config "$ppx"
lay() { # label spec inputs args...
  left 480 || return; local label=$1 spec=$2 in=$3; shift 3
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --print-units base --csv --kernel-name regex:matmul \
    moe-run --target=sm90a "$@" --layer "$spec" --inputs "$in" --check none > $R/lay-$label.csv 2>&1
  local s=$(python3 - $R/lay-$label.csv <<'PY'
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>14 and r[12]=='gpu__time_duration.sum']
print(' '.join('%s=%.3f'%(r[4].replace('block_matmul','bm').replace('expert_matmul','em'), float(r[14].replace(',',''))/1e6) for r in rows), 'sum=%.3f'%(sum(float(r[14].replace(',',''))/1e6 for r in rows)))
PY
)
  rec "$label" "$s"
}
lay s1-default $S1 $W/in1
lay s1-grid $S1 $W/in1 --grid-gemms
lay s1-grid-cluster $S1 $W/in1 --grid-gemms --cluster-gemms
lay s2-default $S2 $W/in2
lay s2-grid-cluster $S2 $W/in2 --grid-gemms --cluster-gemms
# bitwise at shape 2: default vs cluster
if left 520; then
  moe-run --target=sm90a --layer $S2 --inputs $W/in2 --check none --outputs $W/o-def > $R/o-def.log 2>&1
  moe-run --target=sm90a --grid-gemms --cluster-gemms --layer $S2 --inputs $W/in2 --check none --outputs $W/o-cl > $R/o-cl.log 2>&1
  d=$(for f in $W/o-def/*.npy; do cmp -s $f $W/o-cl/$(basename $f) || echo "$(basename $f)"; done)
  rec "shape 2 default == grid+cluster bitwise" "${d:-SAME} ($(ls $W/o-def | wc -l) files)"
fi
if left 420; then
  bash scripts/device/gpu-suite.sh cluster > $R/suite-cluster.log 2>&1
  rec "gpu-suite cluster" "rc=$? $(grep -c PASS $R/suite-cluster.log) PASS $(grep -c FAIL $R/suite-cluster.log) FAIL"
fi
echo "total $(( $(date +%s)-T0 ))s"
tar -czf $OUT/results.tgz -C /tmp r
printf '%s\n' "${tab[@]}"
