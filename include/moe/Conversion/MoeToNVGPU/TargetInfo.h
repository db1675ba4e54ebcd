//===- TargetInfo.h - what the GPU lowering knows about a chip ----*- C++ -*-===//
//
// The one place where NVIDIA chips differ for the GPU lowering (the Triton
// TargetInfo idea): the chip and PTX feature strings handed to
// nvvm-attach-target, the way MX GEMMs use the tensor cores, and the tile
// shapes, pipeline depth, register split and shared-memory budget of those
// kernels. Patterns and kernel builders ask this class; they never test the
// chip name themselves.
//
// sm_90a (Hopper, H100 / H200) runs on the H200; sm_100a (B200 class) and
// sm_120a (RTX 50 / RTX PRO 6000 class) are compile-verified only (ptxas;
// docs/numerics.md). Any other chip is
// rejected by TargetInfo::get with a message that lists the supported ones.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_TARGETINFO_H
#define MOE_CONVERSION_MOETONVGPU_TARGETINFO_H

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::moe {

/// The option spelling of `path` ("fp8", "bf16" or "bf16-operands"; the
/// enum itself, MXMmaPath, is the moe dialect's, spelled "bf16_operands" in
/// #moe.gemm_config).
StringRef stringifyMmaPathOption(MXMmaPath path);
/// The path an option spells, or nullopt.
std::optional<MXMmaPath> parseMmaPathOption(StringRef name);

/// The shape of one MX GEMM kernel on a target: a CTA computes a tileM x
/// tileN fp32 output tile, streaming tileM x tileK and tileN x tileK code
/// tiles through a `stages`-deep shared-memory ring. Warpgroup 0 produces
/// (TMA, scales), the consumer warpgroups each own tileM / consumers rows.
struct MXGemmConfig {
  int64_t tileM;
  int64_t tileN;
  int64_t tileK;
  /// One MMA instruction: m x n x k.
  int64_t mmaM;
  int64_t mmaN;
  int64_t mmaK;
  int64_t stages;
  /// Depth of the ring of dequantized bf16 tiles (Bf16Dequant; 0 for the
  /// other paths, which feed the tensor cores from the TMA ring).
  int64_t dequantStages;
  int64_t producerWarpgroups;
  int64_t consumerWarpgroups;
  /// setmaxnreg values of the producer and consumer warpgroups.
  int64_t producerRegisters;
  int64_t consumerRegisters;
  /// Floats per lane-quad group of the per-stage B-scale table in shared
  /// memory: 32 used plus padding, so that the four groups of a quarter-warp
  /// read different banks.
  int64_t scaleTableStride;
  /// Suspend-time hint of mbarrier.try_wait (ns).
  int64_t waitTicks;
  /// Bf16Operands: the rhs is read with N contiguous ([K, N] per expert of
  /// a block GEMM, [slots, N] of an expert GEMM) with the transposed-B MMA
  /// (#moe.gemm_config rhs_n_major), and the lhs of an expert GEMM with M
  /// contiguous ([slots, M]) with the transposed-A MMA (lhs_m_major).
  bool rhsNMajor = false;
  bool lhsMMajor = false;
  /// Bf16Operands: one CTA per SM walks the output tiles (#moe.gemm_config
  /// persistent) instead of one CTA per tile.
  bool persistent = false;
  /// CTAs per SM the kernel is built for (#moe.gemm_config ctas_per_sm):
  /// each gets 1 / ctasPerSM of the registers and of the shared memory, so
  /// that one CTA's epilogue runs beside another's MMAs.
  int64_t ctasPerSM = 1;
  /// Persistent, two consumer warpgroups (#moe.gemm_config pingpong): each
  /// warpgroup computes every other tile of the CTA whole (tileM / mmaM
  /// MMAs per K step), and the two take turns at the tensor cores, so that
  /// one's epilogue runs beside the other's MMAs.
  bool pingpong = false;
  /// One CTA per tile: the CTAs of a cluster along N (#moe.gemm_config
  /// cluster_n, 1 or 2); a pair shares its lhs tile, which the first CTA
  /// loads for both (TMA multicast).
  int64_t clusterN = 1;
  /// The order of the output tiles (#moe.gemm_config raster_m): bands of
  /// rasterM M tiles, M fastest within a band, then N, band after band (1:
  /// N fastest), so that the tiles in flight share fewer, more reused
  /// operand panels in L2.
  int64_t rasterM = 1;
  /// Bf16Operands: the epilogue's streams (the result tile, the activation
  /// backward's gate/up loads and outputs) carry an L2 evict-first policy
  /// (#moe.gemm_config evict_first_outputs).
  bool evictFirstOutputs = false;
  /// Bf16Operands, K-major rhs: the rhs arrives as FP8 codes with E8M0
  /// scales, and the producer warpgroup's warps 1-3 dequantize each K tile
  /// into the bf16 stage the MMAs read (#moe.gemm_config rhs_codes).
  bool rhsCodes = false;
  /// Bf16Operands, block GEMM, K-major lhs: the lhs arrives as FP8 codes
  /// (each K tile of a row in wgmma A-fragment order, LhsCodeLayout.h)
  /// with E8M0 scales, and the consumers decode each K tile into the
  /// registers of a register-A wgmma (#moe.gemm_config lhs_codes).
  bool lhsCodes = false;
  /// Bf16Operands, block GEMM, K-major lhs: the lhs rows are gathered from
  /// token rows, and the producer warpgroup copies each row of a tile from
  /// its token's row (cp.async chunks into the swizzled stage) through the
  /// GEMM's token ids (#moe.gemm_config lhs_gather).
  bool lhsGather = false;
  /// Bf16Operands, persistent expert GEMM, M-major lhs (N-major rhs): the
  /// operand is rows gathered from token rows MX-rounded along the slots,
  /// and the producer warpgroup copies each slot row of a K tile from its
  /// token's row (cp.async) and rounds the stage in place
  /// (#moe.gemm_config round_lhs, round_rhs).
  bool roundLhs = false, roundRhs = false;
  /// Bf16Operands, persistent GEMM with tmaStore: the kernel computes the
  /// transposed product, the op's rhs as its lhs and the op's lhs as its
  /// rhs (MXGemmProblem::transposedResult; the other fields name the
  /// kernel's operands), and stores each result tile transposed
  /// (#moe.gemm_config swap_operands). Of a block GEMM: the weight of the
  /// tile's expert as the lhs, rounded by the consumers (roundLhs), the
  /// slot rows of two of its blocks as the rhs.
  bool swapOperands = false;
  /// swapOperands of a block GEMM: the producer warpgroup copies the slot
  /// rows (the kernel's rhs) from their token rows through the token ids
  /// (#moe.gemm_config rhs_gather), as lhsGather copies a lhs.
  bool rhsGather = false;
  /// Bf16Operands, cooperative: each consumer warpgroup stages its rows of
  /// the f32 result tile through tmaStore shared-memory buffers of
  /// storeColumns columns (8, 16 or 32), each stored by TMA by one of its
  /// threads (#moe.gemm_config tma_store = tmaStore, store_columns =
  /// storeColumns), instead of st.global from the accumulator registers
  /// (0).
  int64_t tmaStore = 0;
  int64_t storeColumns = 32;
  /// Two consumer warpgroups of one tile take turns at the tensor cores each
  /// K tile (#moe.gemm_config k_turns).
  bool kTurns = false;
  /// tma_store: bytes of a chunk buffer's row (the TMA box's inner size and
  /// the width of its swizzle).
  int64_t storeRowBytes() const { return storeColumns * 4; }

  int64_t threads() const {
    return 128 * (producerWarpgroups + consumerWarpgroups);
  }
};

/// The MMA instructions a chip's GEMM kernels are built from.
enum class MmaEmitter {
  /// sm_90a: warpgroup MMA (wgmma.mma_async) from shared memory.
  Wgmma,
  /// sm_100a: tcgen05.mma with the accumulator and the block scales in
  /// tensor memory.
  Tcgen05,
  /// sm_120a: warp-level mma.sync m16n8k32 block_scale from registers.
  MmaSync,
};

/// One row of a chip's table of bf16-operand GEMM shapes: the kernel shape,
/// for GEMMs whose output has at least `minN` columns, and whether it
/// takes the activation-backward epilogue (whose registers come on top of
/// the accumulator's: ptxas must report no spills). The kernel-config pass
/// takes the first row that applies and that the kernel can run
/// (docs/results keeps the measurement behind each row).
struct GemmTableEntry {
  int64_t minN;
  bool activationEpilogue;
  MXGemmConfig config;
};

/// Describes one GPU target. Obtain it with TargetInfo::get.
class TargetInfo {
public:
  /// The description of `chip`, or failure (with an error through
  /// `emitError`) when the chip is not supported.
  static FailureOr<TargetInfo>
  get(StringRef chip, function_ref<InFlightDiagnostic()> emitError);
  /// The description of `chip`, or nullopt when it is not supported (for
  /// callers that report the error elsewhere).
  static std::optional<TargetInfo> lookup(StringRef chip);

  /// The chips `get` knows, comma separated, for messages.
  static StringRef supportedChips();

  /// The `chip` of nvvm-attach-target, e.g. "sm_90a".
  StringRef getChip() const { return chip; }
  /// The PTX features of nvvm-attach-target, e.g. "+ptx80".
  StringRef getFeatures() const { return features; }
  /// The MMA path MX GEMMs use unless a pass option overrides it.
  MXMmaPath getMXMmaPath() const { return mxPath; }
  /// The MMA instructions of this chip's GEMM kernels.
  MmaEmitter getMmaEmitter() const { return mmaEmitter; }
  /// Whether this chip has kernels of `path` (the wgmma paths on sm_90a,
  /// block_scale on sm_100a and sm_120a).
  bool hasMmaPath(MXMmaPath path) const {
    return (path == MXMmaPath::BlockScale) ==
           (mmaEmitter != MmaEmitter::Wgmma);
  }
  /// The kernel shape of `path` on this chip.
  const MXGemmConfig &getMXGemmConfig(MXMmaPath path) const {
    switch (path) {
    case MXMmaPath::Fp8WgmmaPromote:
      return mxGemmFp8;
    case MXMmaPath::Bf16Dequant:
      return mxGemmBf16;
    case MXMmaPath::BlockScale:
      return blockScale;
    case MXMmaPath::Bf16Operands:
      break;
    }
    return bf16Operands;
  }
  /// The bf16-operands shapes in order of preference; the last row applies
  /// to every GEMM and is getMXGemmConfig(MXMmaPath::Bf16Operands).
  ArrayRef<GemmTableEntry> getBf16OperandsTable() const {
    return bf16OperandsTable;
  }
  /// The tile order of bf16-operand GEMMs of one group (dense products)
  /// with more tiles than SMs: bands of this many M tiles (rasterM; 1 keeps
  /// N fastest).
  int64_t getDenseRasterM() const { return denseRasterM; }
  /// Threads per block of the operand rounding kernels.
  int64_t getOperandKernelThreads() const { return operandKernelThreads; }
  /// The most dynamic shared memory one CTA may request (bytes).
  int64_t getMaxDynamicSharedMemory() const { return maxDynamicSharedMemory; }
  /// Shared memory of one SM (bytes), of which each resident CTA also takes
  /// kReservedSharedMemoryPerCta.
  int64_t getSharedMemoryPerMultiprocessor() const {
    return sharedMemoryPerMultiprocessor;
  }
  static constexpr int64_t kReservedSharedMemoryPerCta = 1024;
  /// Streaming multiprocessors of the chip: the grid of a persistent GEMM.
  int64_t getMultiprocessors() const { return multiprocessors; }

private:
  TargetInfo() = default;

  std::string chip;
  std::string features;
  MXMmaPath mxPath = MXMmaPath::Bf16Dequant;
  MXGemmConfig mxGemmFp8 = {};
  MXGemmConfig mxGemmBf16 = {};
  MXGemmConfig bf16Operands = {};
  MXGemmConfig blockScale = {};
  MmaEmitter mmaEmitter = MmaEmitter::Wgmma;
  SmallVector<GemmTableEntry, 2> bf16OperandsTable;
  int64_t denseRasterM = 1;
  int64_t operandKernelThreads = 0;
  int64_t maxDynamicSharedMemory = 0;
  int64_t sharedMemoryPerMultiprocessor = 0;
  int64_t multiprocessors = 0;
};

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_TARGETINFO_H
