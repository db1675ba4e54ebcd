//===- TargetInfo.cpp - what the GPU lowering knows about a chip ----------===//
//
// The table of supported chips. The sm_90a values are those of the H200
// prototype (bench/prototypes/mxgemm_sm90, docs/results/
// 2026-11-30-mxgemm-sm90-prototype.md): 128x128x128 tiles, 5 stages, one
// producer and two consumer warpgroups with setmaxnreg 40 / 232, which
// ptxas allocates without spills.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"

using namespace mlir;
using namespace mlir::moe;

StringRef TargetInfo::supportedChips() { return "sm_90a"; }

std::optional<TargetInfo> TargetInfo::lookup(StringRef chip) {
  if (chip == "sm_90a") {
    TargetInfo info;
    info.chip = chip.str();
    // wgmma, setmaxnreg and the tensor-map TMA forms need PTX ISA 8.0.
    info.features = "+ptx80";
    info.mxPath = MXMmaPath::Fp8WgmmaPromote;
    info.mxGemm = MXGemmConfig{/*tileM=*/128,
                               /*tileN=*/128,
                               /*tileK=*/128,
                               /*mmaM=*/64,
                               /*mmaN=*/128,
                               /*mmaK=*/32,
                               /*stages=*/5,
                               /*producerWarpgroups=*/1,
                               /*consumerWarpgroups=*/2,
                               /*producerRegisters=*/40,
                               /*consumerRegisters=*/232,
                               /*scaleTableStride=*/36,
                               /*waitTicks=*/1000000};
    // 227 KB: the opt-in limit of one CTA on sm_90.
    info.maxDynamicSharedMemory = 232448;
    return info;
  }
  return std::nullopt;
}

FailureOr<TargetInfo>
TargetInfo::get(StringRef chip, function_ref<InFlightDiagnostic()> emitError) {
  if (std::optional<TargetInfo> info = lookup(chip))
    return *info;
  emitError() << "unsupported GPU chip '" << chip
              << "' (supported: " << supportedChips() << ")";
  return failure();
}
