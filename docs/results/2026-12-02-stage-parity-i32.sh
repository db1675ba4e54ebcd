#!/usr/bin/env bash
# One device call (2026-12-02, eleventh session): the GEMMs' stage / parity
# arithmetic in 32 bits (this tree, .bundle) against the same kernels with
# it in 64 bits (the 8f3f809 bundle, .bundle/old): outputs bit for bit at
# reference shape 1 (torch-gen inputs) and on two small layers with empty
# experts and partial tiles, and at shape 1 each GEMM kernel's ncu time.
# Results under /tmp/r.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
r=/tmp/r; mkdir -p $r
shape=T=16384,H=4096,I=1536,E=128,K=8,B=128
python3 -m moe_crosscheck torch-gen --config $shape --seed 1 --out $r/in > $r/gen.log 2>&1
for v in old new; do
  if [ $v = old ]; then
    run=(env MOE_BUNDLE_ROOT=/tmp/old bash .bundle/old/run-on-device.sh); mkdir -p /tmp/old
  else
    run=(bash .bundle/run-on-device.sh)
  fi
  timeout 100 "${run[@]}" ncu --clock-control none --kernel-name regex:matmul \
    --metrics gpu__time_duration.sum --csv moe-run --target=sm90a --layer $shape \
    --inputs $r/in --outputs $r/out-$v --check none > $r/ncu-$v.csv 2>&1
  for layer in T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2 T=1024,H=1024,I=512,E=8,K=2,B=128; do
    timeout 60 "${run[@]}" moe-run --target=sm90a --layer $layer --empty-experts 3 \
      --outputs $r/small-$v-${layer%%,*} > $r/small-$v-${layer%%,*}.log 2>&1
  done
done
python3 - <<'PY'
import csv, glob, os
import numpy as np
r = "/tmp/r"
for pat in ("out-%s", "small-%s-T=90", "small-%s-T=1024"):
    a, b = r + "/" + pat % "old", r + "/" + pat % "new"
    diff = 0
    for f in sorted(glob.glob(a + "/*.npy")):
        x, y = np.load(f), np.load(os.path.join(b, os.path.basename(f)))
        diff += int((x.view(np.uint8) != y.view(np.uint8)).sum())
    print("%-22s %s" % (pat % "*", "bitwise equal" if diff == 0 else "%d bytes differ" % diff))
for v in ("old", "new"):
    rows = [x for x in csv.reader(open(r + "/ncu-%s.csv" % v)) if len(x) > 14 and x[12] == "gpu__time_duration.sum"]
    unit = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3,
            "ms": 1.0, "msecond": 1.0}
    print(v, " ".join("%s=%.3f" % (x[4], float(x[14].replace(",", "")) * unit[x[13]])
                      for x in rows), "ms")
PY
grep -h "status\|PASS\|FAIL" $r/small-*.log | grep moe-run
