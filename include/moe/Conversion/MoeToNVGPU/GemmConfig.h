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

#include "moe/Conversion/MoeToNVGPU/KernelChoices.h"
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

/// The configuration of the GPU GEMM `op` (isGPUGemm) on `target` when
/// `preferred` is the requested path and `choices` the kernel choices of
/// the pass (those the table gives moe-gpu-kernel-config decide; the
/// others are read by convert-moe-to-nvgpu alone): the MX paths only for GEMMs
/// of codes (isMXCodesGemm), every other GEMM on bf16 operands; fp8 falls back
/// to bf16 for a GEMM its kernel cannot compute. The first shape of the
/// target's table for the chosen path that applies to the GEMM, whose
/// epilogue is looked for in `group` (null: the ops of the moe.fused
/// region around `op`, if any). Null when the chip has no kernel for the
/// GEMM (bf16 operands or a bias on a chip with only block_scale).
GemmConfigAttr selectGemmConfig(Operation *op, const TargetInfo &target,
                                MXMmaPath preferred,
                                const KernelChoices &choices,
                                const KernelGroup *group = nullptr);

/// Why selectGemmConfig found no kernel for a GEMM on `target`.
std::string noKernelMessage(const TargetInfo &target);

/// The kernel shape `config` describes on `target`: the target's shape of
/// its path with the attribute's choices.
MXGemmConfig getMXGemmConfig(GemmConfigAttr config, const TargetInfo &target);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_GEMMCONFIG_H
