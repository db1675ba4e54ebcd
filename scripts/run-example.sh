#!/usr/bin/env bash
# The main job on the embedded default example: install, build, then
# moe-opt parses, verifies and prints examples/blockwise_bwd.mlir, and the
# reference computes the gradients of that same layer (R_64 and R_mx) and
# prints a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh moe-opt moe-ref
BUILD_DIR=${BUILD_DIR:-build}
echo "== moe-opt examples/blockwise_bwd.mlir (parsed, verified, printed) =="
"$BUILD_DIR/bin/moe-opt" examples/blockwise_bwd.mlir
echo
echo "== moe-ref run (reference gradients of the same layer) =="
"$BUILD_DIR/bin/moe-ref" run "$@"
