//===- moe-opt.cpp - the moe-mlir optimizer driver ----------------------===//
//
// mlir-opt for this project: the moe dialect, its passes and pipelines, the
// upstream passes the pipelines use, and the upstream
// dialects the lowering pipeline produces (func, arith, math, memref,
// tensor, linalg, scf, gpu, nvgpu, nvvm, llvm).
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"
#include "moe/GPU/Transforms/Passes.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/Transforms/Passes.h"
#include "moe/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::moe::MoeDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::tensor::TensorDialect,
                  mlir::linalg::LinalgDialect, mlir::scf::SCFDialect,
                  mlir::gpu::GPUDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::NVVM::NVVMDialect, mlir::LLVM::LLVMDialect>();
  mlir::moe::registerPipelineDependencies(registry);
  mlir::moe::registerMoeTransformsPasses();
  mlir::moe::registerMoeConversionPasses();
  mlir::moe::registerMoeGPUTransformsPasses();
  mlir::moe::registerMoePipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "moe-mlir optimizer driver\n", registry));
}
