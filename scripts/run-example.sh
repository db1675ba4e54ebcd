#!/usr/bin/env bash
# The main job on the embedded default example: install, build, then
# moe-opt parses, verifies and prints examples/blockwise_bwd.mlir, and
# moe-run compiles the same file for the host (decomposition, fusion, loops,
# LLVM JIT), runs it on seeded inputs and prints each output's error against
# the references R_mx and R_64, and the times.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh moe-opt moe-run
BUILD_DIR=${BUILD_DIR:-build}
echo "== moe-opt examples/blockwise_bwd.mlir (parsed, verified, printed) =="
"$BUILD_DIR/bin/moe-opt" examples/blockwise_bwd.mlir
echo
echo "== moe-run examples/blockwise_bwd.mlir (host JIT vs the references) =="
"$BUILD_DIR/bin/moe-run" examples/blockwise_bwd.mlir "$@"
