#!/usr/bin/env bash
mkdir -p $OUT
timeout 150 bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh dgate-up > $OUT/suite-dgate.log 2>&1
echo dgate rc $?
timeout 190 bash .bundle/run-on-device.sh bash bench/run.sh --out $OUT --shapes 1,2 --gemms none --budget 170 > $OUT/bench-console.log 2>&1
timeout 75 bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh matrix > $OUT/suite.log 2>&1
echo suite rc $?
grep -E "bitwise|sanitizer" $OUT/suite-dgate.log | tail -10
tail -7 $OUT/bench-console.log
echo matrix PASS $(grep -c "PASS (max" $OUT/suite.log) FAIL $(grep -c "FAIL" $OUT/suite.log)
python3 - <<'PY'
import json,os
d=json.load(open(os.environ['OUT']+'/bench-latest.json'))
for s in d['shapes']:
  print(s['name'], round(s.get('kernel_total_ms',0),3), round(s.get('gemm_ms',0),3), round(s.get('gemm_share',0),4))
  for k in s.get('kernels',[])[:12]: print('  ',k['name'],round(k['ms'],3))
PY
