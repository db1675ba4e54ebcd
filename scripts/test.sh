#!/usr/bin/env bash
# Installs, builds and runs every test (lit: dialect, reference CLI, Python
# cross-check, and the GoogleTest units), then the sanitizer build's tests
# and fuzz smoke (scripts/sanitize.sh; MOE_SKIP_SANITIZE=1 leaves them
# out), printing lit's summary last.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh all mlir-doc
BUILD_DIR=${BUILD_DIR:-build}
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test" "$BUILD_DIR/test/Unit"
if [ "${MOE_SKIP_SANITIZE:-0}" != 1 ]; then
  scripts/sanitize.sh
fi
