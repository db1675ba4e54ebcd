#!/usr/bin/env bash
# The default round-reuse=3 (P3's x and P4's dy rounded in the expert GEMMs'
# registers where each element is rounded at most 3 times): moe-run's check
# against R_mx and bit for bit against round-reuse=0 on layers whose P3 and
# P4 take it, memcheck and racecheck on one, then the benchmark at both
# reference shapes into OUT. One device call with the bundle on PATH:
#   bash .bundle/run-on-device.sh bash scripts/device/probes/round-reuse.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=${OUT:-$(mktemp -d)}
tmp=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-72s %s' "$1" "$2")"); }
for check in "memcheck T=512,H=256,I=128,E=4,K=2,B=128,bias=on" \
    "racecheck T=300,H=256,I=160,E=4,K=2,B=128"; do
  set -- $check
  status=PASS
  timeout 240 compute-sanitizer --tool $1 --error-exitcode 1 --print-limit 4 \
    moe-run --target=sm90a --layer "$2" --empty-experts 1 --check none \
    >"$tmp/log" 2>&1 || { status=FAIL; head -c 1500 "$tmp/log"; }
  record "compute-sanitizer $1 $2" "$status"
done
# (P3 rounds x twice or once, P4 dy once or twice; e5m2, FLOOR_ALT, a
# checkpoint with a bias, partial tiles; shape 2 itself below.)
for layer in T=1024,H=512,I=256,E=8,K=2,B=128 T=300,H=256,I=160,E=4,K=2,B=128,bias=on \
    T=512,H=384,I=384,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=2048,H=768,I=256,E=16,K=4,B=128,rule=floor_alt \
    T=600,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=4096,H=1536,I=256,E=32,K=8,B=128; do
  status=PASS
  timeout 240 moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
    --outputs "$tmp/o1" >"$tmp/log" 2>&1 || { status=FAIL; tail -6 "$tmp/log"; }
  record "default (round-reuse=3) vs R_mx: $layer" "$status"
  timeout 240 moe-run --target=sm90a --layer "$layer" --empty-experts 1 \
    --outputs "$tmp/o2" --check none >/dev/null 2>&1
  cmp -s <(cat "$tmp"/o1/* | sha256sum) <(cat "$tmp"/o2/* | sha256sum) \
    && record "  two runs bit for bit" PASS || record "  two runs bit for bit" FAIL
  timeout 240 moe-run --target=sm90a --round-reuse=0 --layer "$layer" \
    --empty-experts 1 --outputs "$tmp/o3" --check none >/dev/null 2>&1
  cmp -s <(cat "$tmp"/o1/* | sha256sum) <(cat "$tmp"/o3/* | sha256sum) \
    && record "  bit for bit round-reuse=0" PASS || record "  bit for bit round-reuse=0" DIFF
done
printf '%s\n' "${rows[@]}"
bash bench/run.sh --out "$out" --shapes 1,2 --gemms none --budget 330 2>&1 | tail -40
echo "== checks"
printf '%s\n' "${rows[@]}"
