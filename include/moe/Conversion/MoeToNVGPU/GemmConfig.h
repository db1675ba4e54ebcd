//===- GemmConfig.h - the kernel configuration of GPU GEMMs -----*- C++ -*-===//
//
// The one choice of a GPU GEMM's kernel configuration (#moe.gemm_config),
// shared by moe-gpu-kernel-config, which records it on the GEMM, and
// convert-moe-to-nvgpu, which makes it for a GEMM that has none: the two
// passes cannot disagree. Also the way back from the attribute to the
// MXGemmConfig the kernel builder reads.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_GEMMCONFIG_H
#define MOE_CONVERSION_MOETONVGPU_GEMMCONFIG_H

#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace mlir::moe {

/// The discardable attribute of a GPU GEMM that holds its
/// #moe.gemm_config.
constexpr StringLiteral kGemmConfigAttrName = "moe.gemm_config";

/// The MMA path that the pass option `option` names (empty: the target's
/// default), or failure with an error through `emitError`.
FailureOr<MXMmaPath>
getPreferredMmaPath(const TargetInfo &target, StringRef option,
                    function_ref<InFlightDiagnostic()> emitError);

/// A GPU pass's chip and MMA-path options resolved: the target and the
/// preferred path, or failure with an error on `module`.
struct GemmTargetChoice {
  TargetInfo target;
  MXMmaPath preferred;
};
FailureOr<GemmTargetChoice> resolveGemmTarget(ModuleOp module, StringRef chip,
                                              StringRef mmaPathOption);

/// The ops of one kernel unit (a moe.fused region, inlined or not): a
/// GEMM's kernel may compute those of them it knows (its epilogue).
using KernelGroup = SmallPtrSet<Operation *, 16>;

/// The P1 epilogue of a moe.fused region: the activation backward of the
/// GEMM's result dA, with the scale_rows of its h by the same affinities
/// and the affinity gradient <dA, h> when the region has them.
struct GatedActEpilogue {
  GatedActBwdOp act;
  ScaleRowsOp scaled;
  AffinityGradOp grad;
};

/// The P1 epilogue of `gemm` among the ops of `group`, if it has one the
/// kernel computes: the result dA read only by one moe.gated_act_bwd (as
/// d_act) and by a moe.affinity_grad of that h.
std::optional<GatedActEpilogue> matchGatedActEpilogue(BlockMatmulOp gemm,
                                                      const KernelGroup &group);

/// What a pipeline asks of selectGemmConfig (the options of
/// moe-gpu-kernel-config and convert-moe-to-nvgpu).
struct GemmChoices {
  /// bf16-operands kernels take their tiles with one CTA per SM instead of
  /// one CTA per tile, P1's (activation epilogue) as the table's ping-pong
  /// kernel.
  bool persistent = true;
  /// bf16-operands kernels of one CTA per tile run in clusters of two CTAs
  /// along N that load their shared lhs tile once (cluster_n = 2), where
  /// the GEMM has an even number of N tiles.
  bool cluster = false;
  /// bf16-operands block GEMMs whose rhs is an MX-quantized weight stored
  /// with K contiguous read it as FP8 codes with E8M0 scales, dequantized
  /// by the producer warpgroup (rhs_codes), where the kernel fits.
  bool rhsCodes = false;
  /// bf16-operands block GEMMs whose lhs is MX-quantized along K by an
  /// mx_quantize read it as FP8 codes with E8M0 scales, decoded by the
  /// consumer warpgroups into the registers of a register-A wgmma
  /// (lhs_codes), where the kernel fits.
  bool lhsCodes = false;
  /// P1's GEMM computes the activation backward of its moe.fused region in
  /// its epilogue (the ping-pong kernel of the table); false: it is a plain
  /// GEMM that stores dA, and convert-moe-to-nvgpu builds the activation
  /// backward as the operand kernel of the GEMMs after it (ActBwdKernel.h),
  /// measured faster (docs/results/2026-12-03-act-bwd-operands.md).
  bool activationEpilogue = false;
  /// bf16-operands block GEMMs whose lhs is rows gathered from token rows
  /// and MX-quantized along K (x of the recompute, dy of P1) read the token
  /// rows rounded once through their token ids (lhs_gather), where the
  /// kernel fits.
  bool lhsGather = false;
  /// bf16-operands expert GEMMs whose lhs (x of P3) / rhs (dy of P4) is
  /// rows gathered from token rows and MX-quantized along the slots gather
  /// and round it themselves (round_lhs / round_rhs), where the kernel fits.
  bool roundLhs = false;
  bool roundRhs = false;
  /// With tmaStore: an expert GEMM whose rhs roundRhs would round computes
  /// the transposed product instead, the rhs as its lhs (swap_operands,
  /// round_lhs), where the kernel fits.
  bool swapRoundedRhs = false;
  /// Also round the operand of roundLhs (P3's x) or of swapRoundedRhs (P4's
  /// dy) where each element would be rounded at most this many times (the
  /// tiles along the GEMM's other dimension); 0: only where those ask.
  int64_t roundReuse = 0;
  /// bf16-operands GEMMs with a plain epilogue (cooperative consumer
  /// warpgroups) stage the f32 result tile through shared memory and store
  /// it by TMA (tma_store), where the kernel fits.
  bool tmaStore = false;
  /// With tmaStore and persistent: a block GEMM whose rhs is a bf16 weight
  /// MX-quantized along K computes the transposed product, the raw weight
  /// of the tile's expert as its lhs rounded in the consumers' registers
  /// (swap_operands, round_lhs) and the slot rows of two of its blocks as
  /// its rhs (with lhsGather: copied from the token rows, rhs_gather),
  /// where the kernel fits.
  bool swapWeights = false;
};

/// The configuration of the GPU GEMM `op` (isGPUGemm) on `target` when
/// `preferred` is the requested path: the MX paths only for GEMMs of codes
/// (isMXCodesGemm), every other GEMM on bf16 operands; fp8 falls back to
/// bf16 for a GEMM its kernel cannot compute. The first shape of the
/// target's table for the chosen path that applies to the GEMM, whose
/// epilogue is looked for in `group` (null: the ops of the moe.fused
/// region around `op`, if any). Null when the chip has no kernel for the
/// GEMM (bf16 operands or a bias on a chip with only block_scale).
GemmConfigAttr selectGemmConfig(Operation *op, const TargetInfo &target,
                                MXMmaPath preferred,
                                const GemmChoices &choices = {},
                                const KernelGroup *group = nullptr);

/// Why selectGemmConfig found no kernel for a GEMM on `target`.
std::string noKernelMessage(const TargetInfo &target);

/// The kernel shape `config` describes on `target`: the target's shape of
/// its path with the attribute's choices.
MXGemmConfig getMXGemmConfig(GemmConfigAttr config, const TargetInfo &target);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_GEMMCONFIG_H
