#!/usr/bin/env bash
# The moe-mlir backward benchmark (bench/moe_bench.py), run ON THE H200 from
# the repository root with the device bundle carried
# (scripts/build-device-bundle.sh; carry [".bundle"]):
#
#   bash .bundle/run-on-device.sh bash bench/run.sh --out "$OUT" [OPTIONS]
#
# Times the full backward at the issue's three shapes in both layer modes
# next to torch's bf16 backward, profiles every kernel with ncu, and writes
# OUT/bench-latest.json and the raw log OUT/bench-latest.log (copy both
# into docs/results). The table comes last. OPTIONS go to moe_bench.py
# (--shapes 1,2, --no-ncu, --dry-run, ...; see its --help). Takes about
# 5 minutes; it stops starting steps after --budget seconds (540) so that
# it ends within the machine's 10-minute limit with its JSON written.
set -euo pipefail
cd "$(dirname "$0")/.."
# ncu lives with the CUDA toolkit.
export PATH=/usr/local/cuda/bin:$PATH
exec python3 bench/moe_bench.py "$@"
