#!/usr/bin/env bash
# A quick look at #moe.gemm_config rhs_codes on the H200 (run through
# .bundle/run-on-device.sh): the 8192^3 GEMM with and without --rhs-codes,
# the same bits as the default on two layers with --rhs-codes, racecheck.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=$(mktemp -d)
for flag in "" --rhs-codes; do
  echo "== gemm 8192^3 $flag"
  moe-run --target=sm90a --gemm M=8192,N=8192,K=8192,G=1 --repeat 10 \
    --warmup 2 $flag 2>&1 | grep -E "PASS|FAIL|TFLOPS|timing"
  ncu --clock-control none --metrics gpu__time_duration.sum --print-units base \
    --csv --kernel-name regex:matmul moe-run --target=sm90a \
    --gemm M=8192,N=8192,K=8192,G=1 --check none $flag 2>&1 |
    grep gpu__time_duration | awk -F'","' '{ gsub(/[",]/, "", $NF); print "ncu", $5, $NF, "ns" }'
done
for layer in T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16; do
  moe-run --target=sm90a --layer $layer --empty-experts 1 --outputs $out/a \
    --rhs-codes | grep -E "PASS|FAIL" | tr '\n' ' '; echo
  moe-run --target=sm90a --layer $layer --empty-experts 1 --outputs $out/b |
    grep -cE "PASS" | sed 's/^/default passes: /'
  diff=0
  for f in $out/a/*.npy; do cmp -s $f $out/b/$(basename $f) || diff=$((diff + 1)); done
  echo "bitwise $layer: $diff outputs differ"
  rm -rf $out/a $out/b
done
compute-sanitizer --tool racecheck --error-exitcode 1 moe-run --target=sm90a \
  --rhs-codes --layer T=1024,H=512,I=256,E=8,K=2,B=128 --empty-experts 1 \
  --check none > $out/race 2>&1 && echo "racecheck PASS" || { tail -5 $out/race; echo "racecheck FAIL"; }
