#!/usr/bin/env bash
# Lowers IN (moe.blockwise_bwd) twice for the CPU: A = the project's host
# lowering, B = the same with moe-proto-gpu-slot-ops (the GPU form of
# affinity_grad / scatter_add_rows, its scf.parallel run sequentially),
# and builds a driver that compares A and B bit for bit.
# usage (in a scratch directory; run ../run.sh once to build the plugin):
#   equiv/build.sh IN.mlir TAG [gcc flags]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
IN=$1; TAG=$2; shift 2
MOE=${MOE_OPT:-$HERE/../../../../build/bin/moe-opt}; LLVM=/usr/lib/llvm-22/bin
OPT="nice -n 19 $LLVM/mlir-opt --load-pass-plugin=$HERE/../plugin/MoeGpuProto.so --allow-unregistered-dialect"
HOSTLOW="convert-moe-to-linalg,convert-elementwise-to-linalg,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},buffer-results-to-out-params{hoist-static-allocs modify-public-functions},func.func(llvm-request-c-wrappers),buffer-deallocation-pipeline,convert-bufferization-to-memref,func.func(convert-linalg-to-loops),convert-scf-to-cf,arith-expand{include-bf16=true},convert-math-to-libm,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-math-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts,canonicalize"
$MOE $IN --moe-decompose-bwd --mlir-print-op-generic -o $TAG-dec.mlir
$MOE $TAG-dec.mlir --pass-pipeline="builtin.module($HOSTLOW)" -o $TAG-A.mlir
$OPT $TAG-dec.mlir --pass-pipeline="builtin.module(moe-proto-gpu-slot-ops)" --mlir-print-op-generic -o $TAG-Bin.mlir
sed -i 's/@moe_layer_bwd/@moe_layer_bwd_B/g; s/"moe_layer_bwd"/"moe_layer_bwd_B"/g' $TAG-Bin.mlir
$MOE $TAG-Bin.mlir --pass-pipeline="builtin.module($HOSTLOW)" -o $TAG-B.mlir
for v in A B; do
  $LLVM/mlir-translate --mlir-to-llvmir $TAG-$v.mlir -o $TAG-$v.ll
  nice -n 19 $LLVM/llc -O2 -relocation-model=pic -filetype=obj $TAG-$v.ll -o $TAG-$v.o
done
nice -n 19 gcc -O2 -ffp-contract=off "$@" "$HERE/driver.c" $TAG-A.o $TAG-B.o -lm -o $TAG-driver
