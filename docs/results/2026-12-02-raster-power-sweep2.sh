#!/usr/bin/env bash
# Session 10, call 2: raster in the shape-1 layer (ncu per kernel), the
# benchmark (shapes 1, 2, square GEMM), the dense-layer raster check, the
# sm90a matrix and determinism.
set -u
R=/tmp/r; mkdir -p $R
export PYTHONPATH=$PWD/python
t0=$SECONDS
S=T=16384,H=4096,I=1536,E=128,K=8,B=128
python3 -m moe_crosscheck torch-gen --config "$S,checkpoint=true" --seed 1 --out /tmp/in1 > $R/gen.log 2>&1
W='#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]'
P='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true'
i=0
for v in "" "0=$W, rhs_n_major = true, raster_m = 8>" "2=$W, persistent = true, raster_m = 8>" "1=$P, raster_m = 8>"; do
  extra=(); [ -n "$v" ] && extra=(--gemm-config-at "$v")
  echo "variant $i: ${v:-default}" >> $R/layer-raster.txt
  ncu --clock-control none --metrics gpu__time_duration.sum --print-units base --csv \
    moe-run --target=sm90a --layer "$S" --inputs /tmp/in1 --check none "${extra[@]}" > $R/layer-$i.csv 2>&1
  python3 - $R/layer-$i.csv >> $R/layer-raster.txt <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and r[-3] == "gpu__time_duration.sum"]
tot = 0
for r in rows:
    ns = float(r[-1].replace(",", "")); tot += ns
    if "matmul" in r[4]: print("  %-28s %8.3f ms" % (r[4][:28], ns / 1e6))
print("  total %8.3f ms (%d kernels)" % (tot / 1e6, len(rows)))
PY
  i=$((i+1))
done
echo "layer raster $((SECONDS-t0)) s" >> $R/times.txt
timeout 300 bash bench/run.sh --out $R/bench --shapes 1,2 --gemms square --budget 260 > $R/bench-console.log 2>&1
echo "bench rc $? $((SECONDS-t0)) s" >> $R/times.txt
moe-run --target=sm90a --layer T=8192,H=2048,I=1024,E=1,K=1,B=128,dense=on > $R/dense.log 2>&1
echo "dense rc $? $((SECONDS-t0)) s" >> $R/times.txt
left=$((575 - (SECONDS-t0)))
[ $left -gt 30 ] && timeout $left bash scripts/device/gpu-suite.sh matrix determinism > $R/suite.log 2>&1
echo "suite rc $? $((SECONDS-t0)) s" >> $R/times.txt
tar -czf $OUT/results.tgz -C /tmp r
cat $R/times.txt $R/layer-raster.txt; tail -5 $R/dense.log; tail -30 $R/bench-console.log; tail -8 $R/suite.log
