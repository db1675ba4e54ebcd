#!/usr/bin/env bash
# round_lhs, a quick look (one short device call): the ncu time of P3 and of
# x's slot-rounding operand kernel at reference shape 1, default and
# --round-operands; the outputs of three layers bit for bit; racecheck of one.
# Run ON THE H200 with the bundle on PATH (.bundle/run-on-device.sh).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python
out=$(mktemp -d)
S1=T=16384,H=4096,I=1536,E=128,K=8,B=128
python3 -m moe_crosscheck torch-gen --config $S1 --seed 1 --out "$out/in" >/dev/null
for a in "" --round-operands; do
  echo "== ncu $S1 ${a:-default}"
  timeout 150 ncu --clock-control none --kernel-name regex:'expert_matmul|mx_operand_8' \
    --csv --print-units base --metrics gpu__time_duration.sum moe-run \
    --target=sm90a --layer $S1 --inputs "$out/in" --check none $a 2>/dev/null |
    grep gpu__time_duration |
    awk -F'","' '{ gsub(/[",]/, "", $NF); printf "  %s %.3f\n", $5, $NF / 1e6 }'
done
rm -rf "$out/in"
for L in T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
  s=PASS
  moe-run --target=sm90a --layer $L --empty-experts 1 --outputs "$out/o1" >"$out/log" 2>&1 || s=FAIL
  moe-run --target=sm90a --layer $L --empty-experts 1 --round-operands \
    --outputs "$out/o2" >>"$out/log" 2>&1 || s=FAIL
  for f in "$out"/o1/*.npy; do cmp -s "$f" "$out/o2/$(basename "$f")" || s=FAIL; done
  [ $s = FAIL ] && tail -5 "$out/log"
  echo "--round-operands == default, bitwise: $L $s"
  rm -rf "$out/o1" "$out/o2"
done
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 moe-run \
  --target=sm90a --round-operands --layer T=1024,H=512,I=256,E=8,K=2,B=128 \
  --empty-experts 1 --check none >"$out/rc" 2>&1 &&
  echo "racecheck --round-operands PASS" ||
  { echo "racecheck --round-operands FAIL"; head -c 1500 "$out/rc"; }
