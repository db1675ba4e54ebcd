//===- TargetInfo.cpp - what the GPU lowering knows about a chip ----------===//
//
// The table of supported chips. The sm_90a values are those of the H200
// prototype (bench/prototypes/mxgemm_sm90 at commit 360947c, docs/results/
// 2026-11-30-mxgemm-sm90-prototype.md), which ptxas allocates without
// spills:
//   fp8:  128x128x128 tiles, 5 stages, one producer and two consumer
//         warpgroups with setmaxnreg 40 / 232;
//   bf16: 128x128x128 tiles, 3 fp8 stages and 2 bf16 stages, two producer
//         (dequantizing) and two consumer warpgroups with setmaxnreg
//         144 / 112;
//   bf16-operands: 128x128x64 bf16 tiles (one 128-byte panel), 6 stages,
//         one TMA producer and two consumer warpgroups with setmaxnreg
//         40 / 232.
// sm_90a uses the bf16-operands path by default: it needs no dequantization
// in the GEMM and runs at 480-600 TF where the bf16 path ran at 230-290
// (docs/results/2026-12-01-sm90a-bf16-operands.md). Neither uses FP8 wgmma:
// the H200 does not sum the 32 products of one instruction exactly, and the
// MX requantization of P1's result amplifies that past SPEC's gate
// (docs/results/2026-11-30-sm90a-hybrid.md).
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::moe;

StringRef moe::stringifyMmaPathOption(MXMmaPath path) {
  switch (path) {
  case MXMmaPath::Fp8WgmmaPromote:
    return "fp8";
  case MXMmaPath::Bf16Dequant:
    return "bf16";
  case MXMmaPath::BlockScale:
    return "block-scale";
  case MXMmaPath::Bf16Operands:
    break;
  }
  return "bf16-operands";
}

std::optional<MXMmaPath> moe::parseMmaPathOption(StringRef name) {
  return llvm::StringSwitch<std::optional<MXMmaPath>>(name)
      .Case("fp8", MXMmaPath::Fp8WgmmaPromote)
      .Case("bf16", MXMmaPath::Bf16Dequant)
      .Case("bf16-operands", MXMmaPath::Bf16Operands)
      .Case("block-scale", MXMmaPath::BlockScale)
      .Default(std::nullopt);
}

StringRef TargetInfo::supportedChips() {
  return "sm_90a, sm_100a, sm_120a";
}

std::optional<TargetInfo> TargetInfo::lookup(StringRef chip) {
  if (chip == "sm_90a") {
    TargetInfo info;
    info.chip = chip.str();
    // wgmma, setmaxnreg and the tensor-map TMA forms need PTX ISA 8.0.
    info.features = "+ptx80";
    info.mxPath = MXMmaPath::Bf16Operands;
    info.mxGemmFp8 = MXGemmConfig{/*tileM=*/128,
                                  /*tileN=*/128,
                                  /*tileK=*/128,
                                  /*mmaM=*/64,
                                  /*mmaN=*/128,
                                  /*mmaK=*/32,
                                  /*stages=*/5,
                                  /*dequantStages=*/0,
                                  /*producerWarpgroups=*/1,
                                  /*consumerWarpgroups=*/2,
                                  /*producerRegisters=*/40,
                                  /*consumerRegisters=*/232,
                                  /*scaleTableStride=*/36,
                                  /*waitTicks=*/1000000};
    info.mxGemmBf16 = MXGemmConfig{/*tileM=*/128,
                                   /*tileN=*/128,
                                   /*tileK=*/128,
                                   /*mmaM=*/64,
                                   /*mmaN=*/128,
                                   /*mmaK=*/16,
                                   /*stages=*/3,
                                   /*dequantStages=*/2,
                                   /*producerWarpgroups=*/2,
                                   /*consumerWarpgroups=*/2,
                                   /*producerRegisters=*/144,
                                   /*consumerRegisters=*/112,
                                   /*scaleTableStride=*/0,
                                   /*waitTicks=*/1000000};
    // One 128B-swizzle panel (64 bf16) of K per stage; six stages of both
    // 128-row tiles take 192 KB.
    info.bf16Operands = MXGemmConfig{/*tileM=*/128,
                                     /*tileN=*/128,
                                     /*tileK=*/64,
                                     /*mmaM=*/64,
                                     /*mmaN=*/128,
                                     /*mmaK=*/16,
                                     /*stages=*/6,
                                     /*dequantStages=*/0,
                                     /*producerWarpgroups=*/1,
                                     /*consumerWarpgroups=*/2,
                                     /*producerRegisters=*/40,
                                     /*consumerRegisters=*/232,
                                     /*scaleTableStride=*/0,
                                     /*waitTicks=*/1000000};
    // 128x256 (two consumer warpgroups of m64n256k16, four stages in
    // 192 KB) halves the shared-memory reads of A per flop: on the H200 it
    // runs the block GEMMs of shape 1 at 760-770 TF against 645-660 for
    // 128x128, and 8192^3 at 640 against 532 (ncu, bench/run.sh --gemms
    // square,1, docs/results/2026-12-01-wide-tiles-both-axes.md). Narrow
    // outputs keep 128x128: a 256-column tile would be mostly padding.
    // P1's activation-backward epilogue keeps it too: with the 128
    // accumulator registers of m64n256 it spills (236 bytes, ptxas -v).
    MXGemmConfig wide = info.bf16Operands;
    wide.tileN = 256;
    wide.mmaN = 256;
    wide.stages = 4;
    info.bf16OperandsTable = {
        {/*minN=*/256, /*activationEpilogue=*/false, wide},
        {/*minN=*/0, /*activationEpilogue=*/true, info.bf16Operands}};
    info.operandKernelThreads = 256;
    // 227 KB: the opt-in limit of one CTA on sm_90.
    info.maxDynamicSharedMemory = 232448;
    return info;
  }
  if (chip == "sm_100a") {
    TargetInfo info;
    info.chip = chip.str();
    // tcgen05.mma ... block_scale with the portable .block32 spelling
    // needs PTX ISA 8.8 (ptxas of CUDA 13; llc defaults to 8.6).
    info.features = "+ptx88";
    info.mxPath = MXMmaPath::BlockScale;
    info.mmaEmitter = MmaEmitter::Tcgen05;
    // One 128-row tcgen05.mma (cta_group::1) per K = 32 of a 128 x 128
    // tile, K tiles of one 128-byte swizzle panel of codes: 4 stages take
    // 128 KB. Warpgroup 0 loads (TMA, and the scale bytes into their
    // tensor-memory atoms); warpgroup 1 issues the MMAs from one thread
    // and reads the accumulator out of tensor memory. Compile-verified
    // only: no sm_100 GPU has run it (docs/numerics.md).
    info.blockScale = MXGemmConfig{/*tileM=*/128,
                                   /*tileN=*/128,
                                   /*tileK=*/128,
                                   /*mmaM=*/128,
                                   /*mmaN=*/128,
                                   /*mmaK=*/32,
                                   /*stages=*/4,
                                   /*dequantStages=*/0,
                                   /*producerWarpgroups=*/1,
                                   /*consumerWarpgroups=*/1,
                                   /*producerRegisters=*/40,
                                   /*consumerRegisters=*/232,
                                   /*scaleTableStride=*/0,
                                   /*waitTicks=*/1000000};
    // The wgmma paths do not exist here; their shapes stay unset.
    info.bf16OperandsTable = {};
    info.operandKernelThreads = 256;
    info.maxDynamicSharedMemory = 232448;
    return info;
  }
  if (chip == "sm_120a") {
    TargetInfo info;
    info.chip = chip.str();
    // mma.sync ... kind::mxf8f6f4.block_scale needs PTX ISA 8.7 and the
    // "a" target.
    info.features = "+ptx88";
    info.mxPath = MXMmaPath::BlockScale;
    info.mmaEmitter = MmaEmitter::MmaSync;
    // A 128 x 128 tile of 8 warps (two consumer warpgroups), each a 32 x 64
    // warp tile of 2 x 8 m16n8k32 MMAs per K = 32; K tiles of one 128-byte
    // swizzle panel of codes, 2 stages (64 KB) within the 99 KB a CTA may
    // have. Compile-verified only (docs/numerics.md).
    info.blockScale = MXGemmConfig{/*tileM=*/128,
                                   /*tileN=*/128,
                                   /*tileK=*/128,
                                   /*mmaM=*/16,
                                   /*mmaN=*/8,
                                   /*mmaK=*/32,
                                   /*stages=*/2,
                                   /*dequantStages=*/0,
                                   /*producerWarpgroups=*/1,
                                   /*consumerWarpgroups=*/2,
                                   /*producerRegisters=*/40,
                                   /*consumerRegisters=*/232,
                                   /*scaleTableStride=*/0,
                                   /*waitTicks=*/1000000};
    info.bf16OperandsTable = {};
    info.operandKernelThreads = 256;
    // 99 KB: the opt-in limit of one CTA on sm_120.
    info.maxDynamicSharedMemory = 101376;
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
