# Device call 6 of 2026-12-03 (repository root on the H200, bundle carried):
# P1 as a plain GEMM with the activation backward in the kernel of
# ActBwdKernel.h (--no-act-epilogue) against the default (P1's activation
# epilogue): outputs bit for bit but da (its partial sums come in other
# groups), both against R_mx; memcheck and racecheck; then the benchmark at
# shapes 1 and 2 with --no-act-epilogue (torch in the same process).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
bash .bundle/run-on-device.sh true
R=bash\ /tmp/moe-device/run-on-device.sh
o=$(mktemp -d)
for layer in T=256,H=256,I=128,E=2,K=1,B=128 T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=256,H=256,I=128,E=2,K=1,B=128,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2; do
  timeout 120 $R moe-run --target=sm90a --layer $layer --empty-experts 1 --no-act-epilogue --outputs $o/a > $o/la 2>&1
  timeout 120 $R moe-run --target=sm90a --layer $layer --empty-experts 1 --outputs $o/b > $o/lb 2>&1
  python3 - $o/a $o/b "$layer" "$(tail -1 $o/la)" "$(grep -c ' PASS$' $o/la)" <<'PY'
import sys, pathlib, numpy as np
a, b = map(pathlib.Path, sys.argv[1:3])
out = []
for f in sorted(b.glob("*.npy")):
    x, y = np.load(a / f.name), np.load(f)
    if x.dtype.kind == "V" or x.dtype == np.uint16:
        bits = (x.view(np.uint16) == y.view(np.uint16)).all()
        out.append(f"{f.stem} {'bitwise' if bits else 'DIFFERS'}")
        continue
    if (x.view(np.uint8) == y.view(np.uint8)).all():
        out.append(f"{f.stem} bitwise")
    else:
        rel = np.linalg.norm((x - y).astype(np.float64)) / max(np.linalg.norm(y.astype(np.float64)), 1e-30)
        out.append(f"{f.stem} rel {rel:.1e}")
print(f"{sys.argv[3]}: {sys.argv[4]} ({sys.argv[5]} PASS vs R_mx); " + ", ".join(out))
PY
  rm -rf $o/a $o/b
done 2>&1 | tee $OUT/act-bwd-bitwise.log
for tool in memcheck racecheck; do
  timeout 240 $R compute-sanitizer --tool $tool --error-exitcode 1 moe-run --target=sm90a \
    --no-act-epilogue --layer T=1024,H=512,I=256,E=8,K=2,B=128,checkpoint=bf16 --empty-experts 1 \
    --check none > $o/san 2>&1 && echo "$tool --no-act-epilogue (checkpoint): PASS" ||
    { tail -8 $o/san; echo "$tool: FAIL"; }
  timeout 240 $R compute-sanitizer --tool $tool --error-exitcode 1 moe-run --target=sm90a \
    --no-act-epilogue --layer T=1024,H=512,I=160,E=8,K=2,B=128 --empty-experts 1 \
    --check none > $o/san 2>&1 && echo "$tool --no-act-epilogue: PASS" ||
    { tail -8 $o/san; echo "$tool: FAIL"; }
done 2>&1 | tee $OUT/act-bwd-sanitize.log
$R bash bench/run.sh --out $OUT/bench --shapes 1,2 --gemms none --budget 300 \
  --moe-run-arg=--no-act-epilogue 2>&1 | tail -45
