#!/usr/bin/env bash
# The bit rounding of one LOP3 and two HFMA2 that scale M by 2^(7 - f)
# (mxRoundPairBits, 2026-12-05, twenty-second session: one instruction less
# per bf16 pair) on the H200: the GEMMs that round in their registers
# against R_mx and bit for bit against kernels that do not use it. The
# default rounds P3's x and P4's dy in registers at these layers
# (round-reuse=3), round-reuse=0 reads the operand kernels' roundings
# (cvt.rn.satfinite, no bit rounding); --swap-weights rounds the weights in
# the block GEMMs. Then memcheck on a swapped layer. One device call with
# the bundle on PATH (about 3 minutes):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/rounding-step.sh
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
tmp=$(mktemp -d)
rows=()
# (Each row printed as it comes too: a call cut short keeps what it ran.)
record() { rows+=("$(printf '%-76s %s' "$1" "$2")"); echo "${rows[-1]}"; }
# (A run that wrote nothing digests as its own name: never equal.)
digest() { if ls "$1"/* >/dev/null 2>&1; then cat "$1"/* | sha256sum; else echo "none $1"; fi; }
# (partial tiles, a bias, e5m2 with the affinity on H, FLOOR_ALT (the
# conversions, not the bit rounding), a checkpoint with a bias, more
# blocks per expert, and about two blocks an expert: the layers that
# --weight-reuse=2 swaps, as shape 3.)
for layer in T=1024,H=512,I=256,E=8,K=2,B=128 T=300,H=256,I=160,E=4,K=2,B=128,bias=on \
    T=512,H=384,I=384,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=2048,H=768,I=256,E=16,K=4,B=128,rule=floor_alt \
    T=600,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on \
    T=4096,H=1536,I=256,E=32,K=8,B=128 T=2048,H=768,I=256,E=64,K=4,B=128; do
  rm -rf "$tmp/default" "$tmp/swapweights" "$tmp/plain"
  for variant in "default" "--swap-weights"; do
    args=${variant#default} name=${variant//-/}
    status=PASS
    # shellcheck disable=SC2086
    timeout 240 moe-run --target=sm90a $args --layer "$layer" --empty-experts 1 \
      --outputs "$tmp/$name" >"$tmp/log" 2>&1 || { status=FAIL; tail -6 "$tmp/log"; }
    record "$variant vs R_mx: $layer" "$status"
  done
  timeout 240 moe-run --target=sm90a --round-reuse=0 --layer "$layer" \
    --empty-experts 1 --outputs "$tmp/plain" --check none >/dev/null 2>&1
  [ "$(digest "$tmp/default")" = "$(digest "$tmp/plain")" ] &&
    record "  default bit for bit round-reuse=0" PASS ||
    record "  default bit for bit round-reuse=0" DIFF
  [ "$(digest "$tmp/default")" = "$(digest "$tmp/swapweights")" ] &&
    record "  --swap-weights bit for bit the default" PASS ||
    record "  --swap-weights bit for bit the default" DIFF
done
status=PASS
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 4 \
  moe-run --target=sm90a --swap-weights --layer T=512,H=256,I=128,E=4,K=2,B=128,bias=on \
  --empty-experts 1 --check none >"$tmp/log" 2>&1 || { status=FAIL; head -c 1500 "$tmp/log"; }
record "compute-sanitizer memcheck --swap-weights T=512,H=256,I=128,E=4,K=2,B=128,bias=on" "$status"
echo "== summary"
printf '%s\n' "${rows[@]}"
