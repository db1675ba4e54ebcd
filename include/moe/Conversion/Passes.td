//===- Passes.td - conversions out of the moe dialect ------*- tablegen -*-===//
//
// Lowerings of moe ops to upstream dialects.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_PASSES_TD
#define MOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoeToLinalg : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe phase-level ops to linalg, tensor, scf, arith and math";
  let description = [{
    The host (reference) lowering: inlines `moe.fused` regions and rewrites
    every slot-space op into destination-passing linalg / tensor / scf code
    on tensors, with the MX numerics built by the shared IR builders
    (moe/Dialect/Moe/Utils/MXBuilders.h), so that one-shot bufferization
    and the standard loop lowering take it to LLVM.
  }];
  let options = [
    Option<"readOnlyInputs", "read-only-inputs", "bool", /*default=*/"true",
           "Mark the tensor arguments of every func.func "
           "`bufferization.writable = false`, so that one-shot "
           "bufferization never writes into a caller's input buffer (it "
           "would, e.g., for an elementwise op whose result reuses an "
           "argument as its destination)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def ConvertMoeToNVGPU : Pass<"convert-moe-to-nvgpu", "::mlir::ModuleOp"> {
  let summary = "Emit the GPU kernels of moe phase-level ops for an NVIDIA chip";
  let description = [{
    The GPU lowering, for the chip named by `chip` (its description:
    moe/Conversion/MoeToNVGPU/TargetInfo.h). Handled so far: a
    `moe.block_matmul` whose operands are both f8E4M3FN codes with E8M0
    scales along K (lhs [S, K], rhs [E, Nout, K], no bias, no
    `transpose_rhs`). For each one the pass adds a kernel to the
    `gpu.module @moe_kernels` of the module (the exact-MXFP8 GEMM of the
    target's MMA path, with the expert of each row block read from
    `block_to_expert`) and records how to launch it on the op:

    ```mlir
    moe.block_matmul ... {block_size = 128 : i64, moe.gpu_launch = {
        kernel = @moe_kernels::@mx_block_matmul_0,
        grid = array<i64: 2, 4, 1>, block = array<i64: 384, 1, 1>,
        dynamic_shared_memory = 186704 : i64}} -> tensor<512x256xf32>
    ```

    The op itself stays: the host-side launch sequence is not emitted yet.
    Other block_matmul forms are left as they are; an MX block_matmul whose
    shape the target's tiles do not divide is an error.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The NVIDIA chip to generate code for (supported: sm_90a)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // MOE_CONVERSION_PASSES_TD
