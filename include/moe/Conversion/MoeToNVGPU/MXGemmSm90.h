//===- MXGemmSm90.h - IR builder of the sm_90a MX GEMM kernel -----*- C++ -*-===//
//
// Builds the exact-MXFP8 block GEMM kernel of the fp8-wgmma-with-promotion
// path (MXMmaPath::Fp8WgmmaPromote) as a gpu.func, for static shapes:
//
//   C[m, n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[e,n,kb]-127)
//                    * sum_{k in kb} qa[m, k] * qb[e, n, k]
//   e = blockToExpert[m / blockSize]
//
// qa [M, K] and qb [E*N, K] are f8E4M3FN codes (K contiguous), sa [M, K/32]
// and sb [E*N, K/32] E8M0 bytes, C [M, N] f32 row-major.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_MXGEMMSM90_H
#define MOE_CONVERSION_MOETONVGPU_MXGEMMSM90_H

#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Builders.h"

#include <array>

namespace mlir::moe {

/// The static problem of one MX block GEMM.
struct MXGemmProblem {
  /// Rows of the lhs (slots, S = N*B).
  int64_t m;
  /// Output columns (Nout) per expert.
  int64_t n;
  /// Contraction size.
  int64_t k;
  /// Experts: the rhs holds numExperts * n rows.
  int64_t numExperts;
  /// Consecutive lhs rows that share one block_to_expert entry.
  int64_t blockSize;
};

/// What the host needs to launch a built kernel.
///
/// Kernel ABI (after convert-gpu-to-nvvm with bare pointers), in order:
///   (!llvm.ptr tmapA, !llvm.ptr tmapB, !llvm.ptr<1> sa, !llvm.ptr<1> sb,
///    !llvm.ptr<1> c, !llvm.ptr<1> blockToExpert)
/// tmapA / tmapB point to CUtensorMaps in device global memory (64-byte
/// aligned): A over [M, K] and B over [E*N, K] ui8 codes, box tileK x tile
/// rows (innermost first), 128-byte swizzle, 256-byte L2 promotion, zero
/// fill. sa, sb are the scale bytes, c the f32 result, blockToExpert i32.
struct MXGemmLaunch {
  gpu::GPUFuncOp kernel;
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> block;
  int64_t dynamicSharedMemory;
  /// The descriptor types the kernel reads tmapA and tmapB as; their
  /// `tensor` is the shared-memory tile, so its shape is the TMA box.
  nvgpu::TensorMapDescriptorType tensorMapA, tensorMapB;
};

/// Whether `problem` fits the tiles of `target`; explains why not through
/// `emitError`.
LogicalResult checkMXGemmSm90(const MXGemmProblem &problem,
                              const TargetInfo &target,
                              function_ref<InFlightDiagnostic()> emitError);

/// Builds the kernel `name` for `problem` at the end of `module`. The
/// problem must pass checkMXGemmSm90.
MXGemmLaunch buildMXGemmSm90Kernel(OpBuilder &builder, Location loc,
                                   gpu::GPUModuleOp module, StringRef name,
                                   const MXGemmProblem &problem,
                                   const TargetInfo &target);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_MXGEMMSM90_H
