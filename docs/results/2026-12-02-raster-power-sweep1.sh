#!/usr/bin/env bash
# Session 10, call 1: power/clock sampling of the shape-1 layer, raster
# sweep, deep profiles of P1 (ours, plain, torch) and the 8192^3 pair.
set -u
R=/tmp/r; mkdir -p $R
export PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name,power.limit,power.max_limit,clocks.max.sm,clocks.sm,temperature.gpu --format=csv > $R/gpu.txt 2>&1
S=T=16384,H=4096,I=1536,E=128,K=8,B=128
t0=$SECONDS
python3 -m moe_crosscheck torch-gen --config "$S,checkpoint=true" --seed 1 --out /tmp/in1 > $R/gen.log 2>&1
echo "gen $((SECONDS-t0)) s" >> $R/times.txt
for mode in recompute checkpoint; do
  L=$S; [ $mode = checkpoint ] && L=$S,checkpoint=bf16
  nvidia-smi --query-gpu=timestamp,power.draw.instant,power.draw,clocks.sm,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,temperature.gpu --format=csv -lms 10 > $R/power-$mode.csv 2>&1 &
  sp=$!
  moe-run --target=sm90a --layer "$L" --inputs /tmp/in1 --check none --repeat 40 > $R/power-run-$mode.log 2>&1
  kill $sp
done
echo "power $((SECONDS-t0)) s" >> $R/times.txt
SUITE_REPORTS=$R/reports timeout 470 bash scripts/device/gpu-suite.sh raster deep-prof > $R/suite.log 2>&1
echo "suite rc $? $((SECONDS-t0)) s" >> $R/times.txt
rm -f $R/reports/*.ncu-rep
tar -czf $OUT/results.tgz -C /tmp r
cat $R/times.txt; tail -40 $R/suite.log
