#!/usr/bin/env bash
# Build the MLIR kernels: gen -> mlir-opt (gpu.module lowering to NVVM, PTX via gpu-module-to-binary)
# -> extract PTX -> ptxas -arch=sm_90a (cubin).  Runs here (needs MLIR 22 + CUDA 13), not on the H200.
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/lib/llvm-22/bin:$PATH
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
mkdir -p out
# The pipeline: everything inside the gpu.module, then attach the NVVM target (chip + PTX ISA
# explicitly: gpu-lower-to-nvvm-pipeline's defaults are sm_50/+ptx60) and serialize to PTX.
PIPE='builtin.module(gpu.module(convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64},convert-nvvm-to-llvm,expand-strided-metadata,convert-arith-to-llvm,convert-index-to-llvm,canonicalize,cse,reconcile-unrealized-casts),nvvm-attach-target{chip=sm_90a features=+ptx80 O=3},gpu-module-to-binary{format=isa})'
echo "$PIPE" > out/pipeline.txt
for v in ${VARIANTS:-fp8 bf16}; do
  python3 gen_mxgemm.py --variant "$v" ${GENFLAGS:-} -o out/mxgemm_$v.mlir
  python3 gen_mxgemm.py --variant "$v" ${GENFLAGS:-} --info > out/mxgemm_$v.info
  mlir-opt out/mxgemm_$v.mlir --pass-pipeline="$PIPE" -o out/mxgemm_$v.bin.mlir
  python3 extract_ptx.py out/mxgemm_$v.bin.mlir out/mxgemm_$v.ptx
  "$PTXAS" -arch=sm_90a -v out/mxgemm_$v.ptx -o out/mxgemm_$v.cubin 2>&1 | tee out/mxgemm_$v.ptxas.txt
done
