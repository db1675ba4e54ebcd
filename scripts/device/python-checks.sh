#!/usr/bin/env bash
# The H200 checks of the Python package (issue 11), run ON THE H200 from the
# repository root with the device bundle carried (carry [".bundle"]):
#
#   bash .bundle/run-on-device.sh bash scripts/device/python-checks.sh OUT
#
# At the layer T=4096 H=2048 I=1024 E=32 K=4 (LAYER overrides):
#   cache     a second moe-run process compiles the cached layer (host and
#             sm90a; a fresh cache folder): the compile line of both runs
#   cxx       moe-run --target sm90a --check none --repeat 30: the C++ call
#             (entry + synchronization, device buffers)
#   python    test/python/Inputs/moe_mlir_cuda_check.py: CUDA tensors give
#             the numpy call's bits, MoEMLP gradients against R_mx (2e-3),
#             the call's cost from Python against the C entry, a training
#             step's copies and synchronizations (torch profiler)
#   train     examples/python/train_moe.py --target sm90a, STEPS (200) Adam
#             steps next to torch's bf16 backward: OUT/train-moe-sm90a.csv
# Writes OUT/python-checks.json and the logs; prints a table last. The
# package imports ml_dtypes: when the machine lacks it, the wheel carried in
# .bundle/wheels is put on PYTHONPATH (scripts/build-device-bundle.sh does
# not fetch it; `pip download --only-binary=:all: --python-version 3.12
# ml_dtypes==0.6.0 -d .bundle/wheels` does).
set -uo pipefail
out=${1:?usage: python-checks.sh OUT}
mkdir -p "$out"
layer=${LAYER:-T=4096,H=2048,I=1024,E=32,K=4,B=128}
steps=${STEPS:-200}
: "${MOE_BUNDLE_DIR:?run through .bundle/run-on-device.sh}"
export MOE_MLIR_LIBRARY=$MOE_BUNDLE_DIR/lib/libMoeJIT.so
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
if ! python3 -c 'import ml_dtypes' 2>/dev/null; then
  deps=$(mktemp -d)
  for wheel in .bundle/wheels/*.whl; do
    python3 -m zipfile -e "$wheel" "$deps"
  done
  export PYTHONPATH=$PYTHONPATH:$deps
fi
rows=()
record() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }

# cache: two processes on a fresh cache folder.
export MOE_MLIR_CACHE_DIR=$(mktemp -d)
for target in host sm90a; do
  for run in cold cached; do
    line=$(moe-run --layer "$layer" --target $target --compile-only |
           grep '^compile:')
    echo "cache $target $run: $line"
    record "compile $target, $run" "$(echo "$line" | cut -d' ' -f2-4)"
  done
done

# cxx: the C++ call.
moe-run --layer "$layer" --target sm90a --check none --repeat 30 --warmup 3 \
  --times-json "$out/cxx-times.json" | tee "$out/cxx.log"
record "C++ call (moe-run, median of 30)" \
  "$(sed -n 's/^timing: call median \([0-9.]*\) s.*/\1 s/p' "$out/cxx.log")"

# python: the checks of the package on CUDA tensors.
status=PASS
python3 test/python/Inputs/moe_mlir_cuda_check.py --layer "$layer" \
  --json "$out/python-checks.json" 2>&1 | tee "$out/python.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=FAIL
record "moe_mlir CUDA checks" "$status"

# train: the example on the GPU.
status=PASS
python3 examples/python/train_moe.py --target sm90a --steps "$steps" \
  --tokens "$(echo "$layer" | sed 's/.*T=\([0-9]*\).*/\1/')" \
  --hidden "$(echo "$layer" | sed 's/.*H=\([0-9]*\).*/\1/')" \
  --intermediate "$(echo "$layer" | sed 's/.*I=\([0-9]*\).*/\1/')" \
  --experts "$(echo "$layer" | sed 's/.*E=\([0-9]*\).*/\1/')" \
  --top-k "$(echo "$layer" | sed 's/.*K=\([0-9]*\).*/\1/')" \
  --profile-step 5 --out "$out/train-moe-sm90a" 2>&1 | tee "$out/train.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=FAIL
record "train_moe.py sm90a, $steps steps" "$status"

echo
echo "== python checks ($layer), $(date -u +%FT%TZ)"
printf '%s\n' "${rows[@]}"
grep -hE 'rel\(R_mx\)|overhead|training step|median' "$out/python.log"
grep -h 'train-moe:\|profile step' "$out/train.log"
