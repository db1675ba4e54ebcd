#!/usr/bin/env bash
# Device-resident sm_90a prototype: the embedded example (or $1) through
#   moe-opt:  decompose, convert-moe-to-nvgpu + kernel serialization (the
#             hybrid pipeline's GEMM kernels, unchanged)
#   mlir-opt + plugin: moe-proto-gpu-slot-ops (affinity_grad and
#             scatter_add_rows in a race-free, deterministic form)
#   moe-opt:  the host pipeline's tensor lowering, bufferization,
#             deallocation, moe-lower-gpu-launches (unchanged)
#   moe-opt (moe-gpu-reductions-innermost, moe-gpu-loop-shape{block=256},
#             moe-gpu-device-buffers) interleaved with mlir-opt (linalg ->
#             scf.parallel, gpu-map-parallel-loops,
#             convert-parallel-loops-to-gpu), then mlir-opt + plugin:
#             outlining, async region, kernel lowering, PTX, host lowering
# then ptxas -arch=sm_90a on every PTX module.
#
# usage: run.sh [input.mlir] [outdir]      (nice -n 19, one job at a time)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
IN=${1:-$ROOT/examples/blockwise_bwd.mlir}
OUT=${2:-$HERE/out}
MOE=${MOE_OPT:-$ROOT/build/bin/moe-opt}
LLVM=/usr/lib/llvm-22/bin
PTXAS=/usr/local/cuda/bin/ptxas
PLUGIN=$HERE/plugin/MoeGpuProto.so
NICE="nice -n 19"
mkdir -p "$OUT"

if [[ ! -f $PLUGIN || $HERE/plugin/MoeGpuProto.cpp -nt $PLUGIN ]]; then
  echo "== building the pass plugin"
  $NICE c++ -O1 -shared -fPIC $($LLVM/llvm-config --cxxflags) \
    "$HERE/plugin/MoeGpuProto.cpp" -o "$PLUGIN" -L$LLVM/../lib -lMLIR -lLLVM \
    -Wl,-rpath,$LLVM/../lib
fi
OPT="$NICE $LLVM/mlir-opt --load-pass-plugin=$PLUGIN --allow-unregistered-dialect"
T0=$(date +%s.%N)

# 1. GEMM kernels exactly as moe-gpu-hybrid-pipeline builds them.
GEMM="gpu.module(convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true index-bitwidth=64},convert-nvvm-to-llvm,expand-strided-metadata,convert-arith-to-llvm,convert-index-to-llvm,canonicalize,cse,reconcile-unrealized-casts),nvvm-attach-target{chip=sm_90a features=+ptx80 O=3},gpu-module-to-binary{format=isa}"
$NICE $MOE "$IN" --pass-pipeline="builtin.module(moe-decompose-bwd,convert-moe-to-nvgpu{chip=sm_90a},$GEMM)" \
  --mlir-print-op-generic -o "$OUT/1-gemm.mlir"

# 2. The two slot-scatter ops in their GPU form (generic-form moe IR).
$OPT "$OUT/1-gemm.mlir" --pass-pipeline="builtin.module(moe-proto-gpu-slot-ops)" \
  --mlir-print-op-generic -o "$OUT/2-slot-ops.mlir"

# 3. The host pipeline's tensor lowering and bufferization, unchanged.
$NICE $MOE "$OUT/2-slot-ops.mlir" --pass-pipeline="builtin.module(convert-moe-to-linalg,convert-elementwise-to-linalg,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},buffer-results-to-out-params{hoist-static-allocs modify-public-functions},func.func(llvm-request-c-wrappers),buffer-deallocation-pipeline,convert-bufferization-to-memref,moe-lower-gpu-launches)" \
  -o "$OUT/3-buffers.mlir"

# 4. Loops -> GPU kernels, buffers -> device memory.
#    The moe-gpu-* passes are the project's (moe-opt); the upstream GPU
#    mapping passes are not registered in moe-opt, so mlir-opt runs those.
$NICE $MOE "$OUT/3-buffers.mlir" --pass-pipeline="builtin.module(func.func(moe-gpu-reductions-innermost))" \
  -o "$OUT/4a.mlir"
$OPT "$OUT/4a.mlir" --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops))" \
  -o "$OUT/4b.mlir"
$NICE $MOE "$OUT/4b.mlir" --pass-pipeline="builtin.module(func.func(moe-gpu-loop-shape{block=256}))" \
  -o "$OUT/4c.mlir"
$OPT "$OUT/4c.mlir" --pass-pipeline="builtin.module(func.func(gpu-map-parallel-loops,convert-parallel-loops-to-gpu))" \
  -o "$OUT/4d.mlir"
$NICE $MOE "$OUT/4d.mlir" --pass-pipeline="builtin.module(func.func(moe-gpu-device-buffers))" \
  -o "$OUT/4e.mlir"
$OPT "$OUT/4e.mlir" --pass-pipeline="builtin.module(func.func(canonicalize,gpu-launch-sink-index-computations))" \
  -o "$OUT/4-launches.mlir"
$NICE $MOE "$OUT/4-launches.mlir" --pass-pipeline="builtin.module(gpu-kernel-outlining,func.func(moe-gpu-async-region))" \
  -o "$OUT/5-outlined.mlir"

# 5. Kernels -> PTX (bf16 conversions expanded as on the host), host -> LLVM.
KERN="gpu.module(arith-expand{include-bf16=true},lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=64},convert-nvvm-to-llvm,expand-strided-metadata,lower-affine,convert-arith-to-llvm,convert-index-to-llvm,canonicalize,cse,reconcile-unrealized-casts),nvvm-attach-target{chip=sm_90a features=+ptx80 O=3},gpu-module-to-binary{format=isa}"
HOST="func.func(convert-linalg-to-loops),convert-scf-to-cf,arith-expand{include-bf16=true},convert-math-to-libm,expand-strided-metadata,lower-affine,convert-nvgpu-to-nvvm,gpu-to-llvm,finalize-memref-to-llvm,convert-math-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts,canonicalize"
$OPT "$OUT/5-outlined.mlir" --pass-pipeline="builtin.module($KERN,$HOST)" -o "$OUT/6-llvm.mlir"
$NICE $LLVM/mlir-translate --mlir-to-llvmir "$OUT/6-llvm.mlir" -o "$OUT/7-host.ll"
T1=$(date +%s.%N)

# 6. ptxas on every module.
rm -rf "$OUT/ptx"
python3 "$HERE/tools/extract_ptx.py" "$OUT/6-llvm.mlir" "$OUT/ptx"
fail=0
for f in "$OUT"/ptx/*.ptx; do
  $NICE $PTXAS -arch=sm_90a -O3 -v "$f" -o "${f%.ptx}.cubin" >"${f%.ptx}.ptxas.txt" 2>&1 \
    || { echo "ptxas FAILED: $f"; fail=1; }
done

echo "== summary ($(basename "$IN"), compile $(printf '%.1f' "$(echo "$T1 - $T0" | bc)") s)"
python3 "$HERE/tools/alloc_stats.py" "$OUT/4-launches.mlir"
echo "gpu.binary ops: $(grep -c 'gpu.binary @' "$OUT/6-llvm.mlir"), kernel entries: $(cat "$OUT"/ptx/*.ptx | grep -c '^.visible .entry'), launch_func: $(grep -c 'gpu.launch_func' "$OUT/6-llvm.mlir")"
echo "ptxas: $(ls "$OUT"/ptx/*.cubin | wc -l) modules assembled, failures: $fail"
echo "registers per kernel (count x regs):"
grep -ho 'Used [0-9]* registers' "$OUT"/ptx/*.ptxas.txt | awk '{print $2}' | sort -n | uniq -c | awk '{printf "  %s x %s\n", $1, $2}'
grep -h 'spill' "$OUT"/ptx/*.ptxas.txt | sort | uniq -c | sed 's/^/  /'
EW=$(ls "$OUT"/ptx/*.ptx | grep -v "/moe_kernels.ptx$")
echo "elementwise PTX modules: $(echo "$EW" | wc -l); atomics in them: $(cat $EW | grep -cE '\b(atom|red)\.' || true)"
echo "fp instructions in elementwise kernels:"
cat $EW | grep -oE '^\s+[a-z][a-z0-9_.:]*\.(f32|f64|bf16|f16)[a-z0-9_.]*' \
  | sed 's/^\s*//' | sort | uniq -c | sort -rn | sed 's/^/  /'
exit $fail
