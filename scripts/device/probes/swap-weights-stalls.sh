#!/usr/bin/env bash
# Where the transposed block GEMMs of --swap-weights wait: ncu's scheduler,
# warp-state and source-counter sections (stall samples per SASS
# instruction) of P2 and the recompute, swapped and default, at
# T=8192 H=4096 I=1536 E=128 K=8 (shape 1's GEMM shapes with half the
# tokens, so each ncu run reaches its kernel quickly). Details pages and the
# source pages (CSV) into OUT, the top stalled instructions printed:
#   bash .bundle/run-on-device.sh bash scripts/device/probes/swap-weights-stalls.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"
out=${1:-$OUT}
L=${LAYER:-T=8192,H=4096,I=1536,E=128,K=8,B=128}
# First the swapped kernels' outputs: against R_mx and bit for bit against
# the default (odd block counts, an empty expert, partial tiles).
for layer in T=300,H=256,I=160,E=4,K=2,B=128,bias=on T=1024,H=1024,I=512,E=8,K=2,B=128; do
  timeout 120 moe-run --target=sm90a --layer $layer --empty-experts 1 \
    --outputs /tmp/o1 >/tmp/log 2>&1 || echo "default $layer FAIL"
  if timeout 120 moe-run --target=sm90a --swap-weights --layer $layer \
      --empty-experts 1 --outputs /tmp/o2 >/tmp/log 2>&1; then
    echo "--swap-weights vs R_mx: $layer PASS"
  else
    echo "--swap-weights vs R_mx: $layer FAIL"; tail -5 /tmp/log; exit 1
  fi
  cmp -s <(cat /tmp/o1/* | sha256sum) <(cat /tmp/o2/* | sha256sum) &&
    echo "  bit for bit the default" || echo "  DIFFERS from the default"
done
# The inputs come from torch on the GPU, as the benchmark's (with moe-run's
# own host-made inputs, an ncu run of every kernel did not finish in 150 s
# on 2026-12-05).
probe_inputs "$L" /tmp/in || exit 1
# Each kernel's time: the default, --swap-weights, and --swap-weights with
# the slot rows by TMA from an operand kernel's gathered copy instead of
# rhs_gather's copies (--gathered-lhs-copies): the gather's share.
# (base: ncu's locked base clock, under which the power cap cannot slow a
# kernel that spends more energy per MMA.)
IFS='|' read -r -a runs <<<"${STALL_RUNS:-none |none --swap-weights|none --swap-weights --gathered-lhs-copies|base |base --swap-weights}"
for run in "${runs[@]}"; do
  clock=${run%% *} args=${run#* }
  # shellcheck disable=SC2086
  timeout 150 ncu --clock-control $clock --csv --print-units base \
    --metrics gpu__time_duration.sum moe-run --target=sm90a --layer $L \
    --inputs /tmp/in --check none $args >/tmp/ncu.csv 2>/tmp/ncu.err || echo "ncu $args failed"
  echo "== ${args:-default} (clock-control $clock)"
  kernel_times "${args:-default}" /tmp/ncu.csv
done
[ -n "${TIMES_ONLY:-}" ] && exit 0
sections="--section SpeedOfLight --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis --section SourceCounters"
for v in "block_matmul_5 p2-swap --swap-weights" "block_matmul_7 p2-default" \
    "block_matmul_1 rc-swap --swap-weights"; do
  set -- $v
  k=$1 name=$2
  shift 2
  # shellcheck disable=SC2086
  timeout 150 ncu $sections ${CLOCKS:-} --import-source no --kernel-name "$k" \
    --launch-count 1 -o "/tmp/$name" moe-run --target=sm90a --layer $L \
    --inputs /tmp/in --check none "$@" >"/tmp/$name.log" 2>&1
  echo "== $name: $k $* (exit status $?)"
  ncu --import "/tmp/$name.ncu-rep" --page details >"$out/$name.txt" 2>&1
  grep -E "SM Frequency|Duration|Issue Slots Busy|Executed Ipc Active|No Eligible|Active Warps Per|Eligible Warps|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Stall" \
    "$out/$name.txt" | head -24
  ncu --import "/tmp/$name.ncu-rep" --page source --csv --print-source sass \
    >"$out/$name-source.csv" 2>"/tmp/$name-source.err" || head -5 "/tmp/$name-source.err"
  python3 - "$out/$name-source.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr = None
for i, r in enumerate(rows):
    if any("Warp Stall Sampling" in c for c in r):
        hdr, body = r, rows[i + 1:]
        break
if hdr is None:
    print("no stall columns;", len(rows), "rows; first:", rows[:2]); sys.exit(0)
col = next(j for j, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All"))
src = next((j for j, c in enumerate(hdr) if c == "Source"), 1)
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
tot = sum(num(r[col]) for r in body if len(r) > col)
top = sorted(body, key=lambda r: -num(r[col]) if len(r) > col else 0)[:28]
print(f"  samples {tot:.0f}; top instructions:")
for r in top:
    print(f"  {100*num(r[col])/max(tot,1):5.1f}%  {r[0]:>6}  {r[src][:70]}")
PY
done
