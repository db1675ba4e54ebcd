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
    // P1's activation-backward epilogue keeps it too: it runs spill-free
    // at 128x256 (its g and u loads 16 column pairs at a time), but took
    // 7.14 ms at shape 1 against 4.10 for 128x128 (ncu, 2026-12-02,
    // docs/results/2026-12-02-p1-tile-variants.md).
    MXGemmConfig wide = info.bf16Operands;
    wide.tileN = 256;
    wide.mmaN = 256;
    wide.stages = 4;
    // One CTA per tile: the persistent form of these kernels (static
    // round-robin over the tiles, moe-gpu-kernel-config persistent-gemms)
    // ran the shape-2 GEMMs 0-9% faster but shape 1's P1, P2 and P4
    // 16-44% slower (docs/results/2026-12-01-persistent-gemms.md).
    // (P1 in 64-row tiles with two CTAs per SM, so that one CTA's
    // epilogue runs beside the other's MMAs, took 4.88 ms at shape 1
    // against 4.10 for one 128-row CTA per tile: no row; a configuration
    // set by hand, docs/results/2026-12-02-p1-tile-variants.md.)
    // P1 with moe-gpu-kernel-config's persistent-gemms (the default): the
    // two consumer warpgroups take turns over 128x128 tiles, one's
    // activation epilogue beside the other's MMAs. 240 consumer registers
    // for its 128 accumulator registers and the epilogue (the measured
    // config; with the epilogue's g|u loaded 16 pairs at a time, 232
    // spilled 24 bytes at shape 1, ptxas -v); the producer thread runs in
    // 24.
    MXGemmConfig pingpong = info.bf16Operands;
    pingpong.persistent = true;
    pingpong.pingpong = true;
    pingpong.producerRegisters = 24;
    pingpong.consumerRegisters = 240;
    // Measured against the rows it does not take (ncu, every GEMM of both
    // reference shapes alone, 2026-12-03,
    // docs/results/2026-12-03-bench-issue10.md): 128x256 persistent beats
    // one CTA per tile (by 0-8%), the ping-pong schedule over 128x128 tiles
    // with a plain store (by 13-50%) and evict-first outputs, on all of them.
    info.bf16OperandsTable = {
        {/*minN=*/256, /*activationEpilogue=*/false, wide},
        {/*minN=*/0, /*activationEpilogue=*/true, pingpong},
        {/*minN=*/0, /*activationEpilogue=*/true, info.bf16Operands}};
    // A dense 8192^3 in N-fastest order reads B from DRAM once per wave of
    // 132 tiles (ncu: DRAM 82.7%); in bands of 16 M tiles it took 1.327 ms
    // against 1.562 one CTA per tile and 1.589 persistent (bands of 4: 1.37,
    // of 8: 1.33; ncu, H200, 2026-12-02,
    // docs/results/2026-12-02-raster-and-power.md). Grouped GEMMs keep N
    // fastest: an expert's tiles already share their weight panel in L2.
    info.denseRasterM = 16;
    info.operandKernelThreads = 256;
    // 227 KB: the opt-in limit of one CTA on sm_90.
    info.maxDynamicSharedMemory = 232448;
    info.sharedMemoryPerMultiprocessor = 233472;
    // The H100 SXM and the H200 (sm_90a parts with fewer SMs run a
    // persistent grid in two waves: correct, slower).
    info.multiprocessors = 132;
    return info;
  }
  // The Blackwell chips: MX GEMMs on their block-scaled MMA (block_scale),
  // a 128 x 128 tile of K tiles of one 128-byte swizzle panel of codes,
  // one TMA / scale producer warpgroup. Both need PTX ISA 8.8 for the
  // portable spellings (ptxas of CUDA 13; llc defaults to 8.6). No wgmma:
  // the bf16-operand shapes stay unset. Compile-verified only: no such GPU
  // has run them (docs/numerics.md).
  auto blackwell = [&](MmaEmitter emitter, int64_t mmaM, int64_t mmaN,
                       int64_t stages, int64_t consumerWarpgroups,
                       int64_t maxSharedMemory) {
    TargetInfo info;
    info.chip = chip.str();
    info.features = "+ptx88";
    info.mxPath = MXMmaPath::BlockScale;
    info.mmaEmitter = emitter;
    info.blockScale = MXGemmConfig{/*tileM=*/128,
                                   /*tileN=*/128,
                                   /*tileK=*/128,
                                   mmaM,
                                   mmaN,
                                   /*mmaK=*/32,
                                   stages,
                                   /*dequantStages=*/0,
                                   /*producerWarpgroups=*/1,
                                   consumerWarpgroups,
                                   /*producerRegisters=*/40,
                                   /*consumerRegisters=*/232,
                                   /*scaleTableStride=*/0,
                                   /*waitTicks=*/1000000};
    info.operandKernelThreads = 256;
    info.maxDynamicSharedMemory = maxSharedMemory;
    info.sharedMemoryPerMultiprocessor =
        maxSharedMemory + kReservedSharedMemoryPerCta;
    return info;
  };
  // sm_100a: one 128 x 128 x 32 tcgen05.mma (cta_group::1) per K = 32, 4
  // stages in 128 KB; warpgroup 1 issues the MMAs from one thread and
  // reads the accumulator out of tensor memory. 227 KB per CTA.
  if (chip == "sm_100a")
    return blackwell(MmaEmitter::Tcgen05, /*mmaM=*/128, /*mmaN=*/128,
                     /*stages=*/4, /*consumerWarpgroups=*/1,
                     /*maxSharedMemory=*/232448);
  // sm_120a: 8 warps (two consumer warpgroups) of 32 x 64, each 2 x 8
  // m16n8k32 mma.sync per K = 32; 2 stages (64 KB) within the 99 KB a CTA
  // may have there.
  if (chip == "sm_120a")
    return blackwell(MmaEmitter::MmaSync, /*mmaM=*/16, /*mmaN=*/8,
                     /*stages=*/2, /*consumerWarpgroups=*/2,
                     /*maxSharedMemory=*/101376);
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
