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

#include "mlir/IR/BuiltinOps.h"

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

/// The configuration of the GPU GEMM `op` (isGPUGemm) on `target` when
/// `preferred` is the requested path: the MX paths only for GEMMs of codes
/// (isMXCodesGemm), every other GEMM on bf16 operands; fp8 falls back to
/// bf16 for a GEMM its kernel cannot compute. The target's kernel shape of
/// the chosen path.
GemmConfigAttr selectGemmConfig(Operation *op, const TargetInfo &target,
                                MXMmaPath preferred);

/// The kernel shape `config` describes on `target`: the target's shape of
/// its path with the attribute's choices.
MXGemmConfig getMXGemmConfig(GemmConfigAttr config, const TargetInfo &target);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_GEMMCONFIG_H
