#!/usr/bin/env bash
# The sanitizer build and its tests (issue 13): the `sanitize` preset of
# CMakePresets.json (clang-22, Debug, assertions, ASan + UBSan, libFuzzer
# harnesses) in build-sanitize/, then the unit tests, the lit tests of
# every directory but python/, docs/, examples/ and bench/ (those load the
# libraries into an uninstrumented Python, or link programs with the system
# compiler), and a 20 s fuzz smoke per harness (test/Fuzz). scripts/test.sh
# runs it after the main tests; docs/fuzzing.md has the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3)}
BUILD_DIR=build-sanitize  # the preset's binaryDir
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake --preset sanitize -DPython3_EXECUTABLE="$PYTHON" >/dev/null
fi
ninja -C "$BUILD_DIR"
suites=()
for d in Dialect Conversion GPU Pipelines Integration Reference Runtime Fuzz; do
  suites+=("$BUILD_DIR/test/$d")
done
/usr/lib/llvm-22/bin/lit -sv "${suites[@]}" "$BUILD_DIR/test/Unit"
