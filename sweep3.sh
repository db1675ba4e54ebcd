#!/usr/bin/env bash
# dgate-up epilogue: bitwise part, bench shapes 1,2, matrix + determinism
mkdir -p $OUT
timeout 200 bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh dgate-up > $OUT/suite-dgate.log 2>&1
echo dgate rc $?
bash .bundle/run-on-device.sh bash bench/run.sh --out $OUT --shapes 1,2 --gemms none --budget 280 > $OUT/bench-console.log 2>&1
timeout 200 bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh matrix determinism > $OUT/suite.log 2>&1
echo suite rc $?
tail -22 $OUT/suite-dgate.log
tail -7 $OUT/bench-console.log
grep -c PASS $OUT/suite.log; grep FAIL $OUT/suite.log | head
python3 - <<'PY'
import json,os
d=json.load(open(os.environ['OUT']+'/bench-latest.json'))
for s in d['shapes']:
  print(s['name'], round(s['kernel_total_ms'],3), round(s['gemm_ms'],3), round(s['gemm_share'],4))
  for k in s['kernels'][:12]: print('  ',k['name'],round(k['ms'],3))
PY
