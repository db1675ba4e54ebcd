//===- MXGemm.h - IR builders of the MX GEMM kernels ------------*- C++ -*-===//
//
// Builds the exact-MXFP8 GEMM kernels of sm_90a as gpu.funcs, for static
// shapes. Two problem kinds share one kernel structure (TMA ring, producer
// and consumer warpgroups, wgmma):
//
//   block:  C[m, n] = sum_kb 2^(sa[m,kb]-127) * 2^(sb[e*N+n,kb]-127)
//                          * sum_{k in kb} qa[m, k] * qb[e*N+n, k]
//           e = blockToExpert[m / blockSize]         (recompute, P1, P2)
//   expert: C[e, m, n] = the same sum over k in the slots of e's blocks,
//           with qb[n, k] (no expert offset); experts without blocks get
//           zeros                                      (P3, P4)
//
// qa [M, K] and qb [rows, K] are f8E4M3FN or f8E5M2 codes with K
// contiguous, sa [M, K/32] and sb [rows, K/32] E8M0 bytes, C f32 row-major.
// Two MMA paths (TargetInfo.h): FP8 wgmma with per-32-block promotion, or
// exact dequantization to bf16 feeding bf16 wgmma.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_MXGEMM_H
#define MOE_CONVERSION_MOETONVGPU_MXGEMM_H

#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <array>

namespace mlir::moe {

/// Which rows and contraction range a CTA works on.
enum class MXGemmKind {
  /// A CTA's lhs rows share one expert (block_to_expert), whose n rows of
  /// the rhs it reads; the whole K range.
  Block,
  /// Grid z is the expert; the contraction runs over the slots of its
  /// blocks (blocks are grouped by expert, experts never decrease).
  Expert,
};

/// What a Bf16Operands Block kernel does with its f32 accumulator.
struct MXGemmEpilogue {
  enum class Kind {
    /// Store it (plus the bias) into c.
    Store,
    /// The P1 epilogue (moe.gated_act_bwd, from a moe.fused region): the
    /// accumulator is dA [M, N]; with gate_up [M, 2N] and the slot
    /// affinities a [M], each element gives dg, du and h through
    /// buildGatedActBwd, the builder the host lowering uses. c is
    /// [dg | du] [M, 2N]; dA itself is never stored.
    GatedActBwd,
  };
  Kind kind = Kind::Store;
  Activation activation = Activation::swiglu;
  /// The clamp limits of g and u, or null.
  ClampAttr clamp;
  /// GatedActBwd outputs beside [dg | du]: h [M, N], a * h [M, N] (the
  /// moe.scale_rows of P4), and the row sums of dA * h over each tile's N
  /// columns [M, ceil(N / tileN)] (a moe.affinity_grad without `dot`).
  bool writeH = false, writeScaledH = false, writePartials = false;
  /// gate_up is the bf16 checkpoint [numBlocks, 2, N, blockSize] of the
  /// forward instead of f32 slot rows [M, 2N]: g = ckpt[m / B, 0, n, m % B]
  /// and u = ckpt[m / B, 1, n, m % B], each times 1 for a slot with a token
  /// and 0 for a padded one (the moe.unpack_checkpoint and moe.scale_rows
  /// the kernel replaces); the kernel then also takes the slots' token ids.
  bool gateUpCheckpoint = false;
  /// [dg | du] as f32 (c). False when the GEMMs that read it take only its
  /// MX values, which the kernel then writes itself (below): c is then the
  /// first of them.
  bool writeDGateUp = true;
  /// [dg | du]'s MX values as bf16 [M, 2N] (exact: quantized, then
  /// dequantized), for a GEMM that contracts over them, or null when not
  /// written. Along N: blocks of 32 consecutive columns of a row (P2,
  /// contracting over 2N); a lane quad holds a block's 8 column pairs. Along
  /// M: blocks of 32 consecutive rows (slots) of a column (P3, contracting
  /// over the slots); two warps hold a block, whose amax they exchange
  /// through shared memory.
  MXQuantAttr dGateUpAlongN, dGateUpAlongM;

  /// The [dg | du] outputs of a GatedActBwd kernel: f32 and the roundings.
  int64_t dGateUpOutputs() const {
    return writeDGateUp + bool(dGateUpAlongN) + bool(dGateUpAlongM);
  }
};

/// The static problem of one MX GEMM.
struct MXGemmProblem {
  MXGemmKind kind;
  /// Rows of the lhs: slots (Block) or output rows per expert (Expert).
  int64_t m;
  /// Output columns per expert.
  int64_t n;
  /// Contraction size: features (Block) or slots (Expert).
  int64_t k;
  /// Experts: a Block rhs holds numExperts * n rows; an Expert result
  /// holds numExperts m x n matrices.
  int64_t numExperts;
  /// Slots per block_to_expert entry.
  int64_t blockSize;
  /// Entries of block_to_expert.
  int64_t numBlocks;
  /// The code type of both operands: f8E4M3FN or f8E5M2. On the
  /// Bf16Operands path, whose operands are bf16 values, the rhs's code type
  /// when it is codes (null otherwise): what a rhs_codes kernel
  /// dequantizes.
  Type elementType;
  /// The MMA path the kernel uses.
  MXMmaPath path;
  /// The element type (bf16 or f32) of bias[e, n] [E, N] that the result
  /// adds, or null without a bias (Block problems on the Bf16Operands path
  /// only).
  Type biasType;
  /// What the kernel does with its accumulator.
  MXGemmEpilogue epilogue = {};
  /// The kernel takes the slots' token ids (the op's token_position_to_id,
  /// -1 for padding) and skips padding (Bf16Operands path): a Block tile
  /// whose first slot is padding gets no K tiles and stores the epilogue of
  /// a zero accumulator; an Expert tile's contraction ends after the last
  /// K tile of its expert that starts at a token.
  bool skipPadding = false;
  /// Bf16Operands: the lhs's code type when the op's lhs is codes (null
  /// otherwise): what a lhs_codes kernel decodes.
  Type lhsElementType = {};
  /// Bf16Operands with lhs_gather (MXGemmConfig::lhsGather): the rows of
  /// the token-row array the kernel copies lhs rows from; slot m of the lhs
  /// is its row tokens[m], a padding slot (-1) a row of zeros. 0 otherwise.
  int64_t lhsGatherRows = 0;
  /// The rounding of an Expert operand that is bf16 slot rows gathered from
  /// token rows and MX-rounded along the slots (its K), or null: what
  /// round_lhs / round_rhs (MXGemmConfig::roundLhs, roundRhs) gather and
  /// round in the kernel. Slot k of the operand is token row tokens[k], a
  /// padding slot (-1) zeros.
  MXQuantAttr roundLhs = {}, roundRhs = {};
  /// swap_operands: the kernel's lhs is the op's rhs and its rhs the op's
  /// lhs (m and n are the op's n and m), and the kernel stores its m x n
  /// result tile transposed into the op's [E, n, m] (Expert) or [n, m]
  /// (Block) result. A Block kernel's lhs is then the weight (the op's
  /// rhs before its MX rounding: [E, m, k], or [E, k, m] with the M-major
  /// lhs of transpose_rhs) rounded along K by the consumers (roundLhs),
  /// and its N tile two blocks of one expert (pairsBlocks).
  bool transposedResult = false;
  /// Block, swap_operands with rhs_gather: the rows of the token-row array
  /// the kernel copies its rhs rows (the op's lhs, slot rows) from, as
  /// lhsGatherRows for a lhs. 0 otherwise.
  int64_t rhsGatherRows = 0;

  /// A block GEMM's transposed product: each output tile is M rows of the
  /// weight of one expert by the slots of two of its blocks (the second
  /// one's results not stored when the expert has no second block there).
  bool pairsBlocks() const {
    return kind == MXGemmKind::Block && transposedResult;
  }
  /// The most tiles of two blocks of one expert: each expert's blocks in
  /// pairs, an odd one alone.
  int64_t maxBlockPairs() const {
    return (numBlocks + std::min(numExperts, numBlocks) + 1) / 2;
  }
  /// Bytes of a persistent kernel's shared table: an Expert kernel's
  /// block count and first block of each expert, and with skipPadding its
  /// K tiles; a pairsBlocks kernel's first block and first pair of each
  /// expert and their totals, 16 bits each.
  int64_t expertTableBytes() const {
    if (pairsBlocks())
      return 4 * (numExperts + 1);
    return kind == MXGemmKind::Expert ? (skipPadding ? 12 : 8) * numExperts
                                      : 0;
  }
};

/// What the host needs to launch a built kernel.
///
/// Kernel ABI (after convert-gpu-to-nvvm with bare pointers), in order:
///   (!llvm.ptr tmapA, !llvm.ptr tmapB, !llvm.ptr<1> sa, !llvm.ptr<1> sb,
///    !llvm.ptr<1> c, !llvm.ptr<1> blockToExpert)
/// tmapA / tmapB point to CUtensorMaps in device global memory (64-byte
/// aligned): A over [M, K] and B over [rows, K] ui8 codes, box tileK x tile
/// rows (innermost first), 128-byte swizzle, 256-byte L2 promotion, zero
/// fill. sa, sb are the scale bytes, c the f32 result, blockToExpert i32.
///
/// The Bf16Operands path takes bf16 operands and no scales:
///   (!llvm.ptr tmapA, !llvm.ptr tmapB, !llvm.ptr<1> c,
///    !llvm.ptr<1> blockToExpert[, !llvm.ptr<1> bias])
/// with the tensor maps over the operands' bytes (ui8 [rows, 2 K], box 128
/// bytes = 64 bf16 x tile rows) and bias [E, N] (bf16 or f32) when the
/// problem has a biasType.
///
/// A GatedActBwd epilogue replaces the bias by its operands and outputs:
///   (!llvm.ptr tmapA, !llvm.ptr tmapB, !llvm.ptr<1> dgu,
///    !llvm.ptr<1> blockToExpert, !llvm.ptr<1> gateUp,
///    !llvm.ptr<1> affinities[, h][, scaledH][, partials][, tokenIds])
/// all f32 but blockToExpert, the optional ones as the epilogue writes them;
/// with gateUpCheckpoint, gateUp is the bf16 checkpoint and the i32 token
/// ids of the slots come last.
///
/// With rhs_codes (MXGemmConfig::rhsCodes) tmapB is over the rhs's FP8
/// codes (ui8 [rows, K], box tileK bytes x tileN rows, no swizzle) and a
/// third tensor map follows it, before the pointers: the rhs's E8M0 scale
/// bytes in the layout an operand kernel writes them for it
/// (MXOperandProblem::codesOut: ui8 [K tiles * rows / 8, 16], box 16 x
/// tileN / 8).
/// With lhs_codes (MXGemmConfig::lhsCodes) tmapA is over the lhs's FP8
/// codes (ui8 [M, K], each 64-byte K tile of a row in wgmma A-fragment
/// order, LhsCodeLayout.h; box 64 bytes x tileM rows, no swizzle) and a
/// tensor map of the lhs's E8M0 scale bytes follows tmapB (the layout of
/// MXOperandProblem::codesOut: ui8 [K tiles * M / 8, 16], box 16 x
/// tileM / 8), before the pointers.
/// With lhs_gather (MXGemmConfig::lhsGather, which needs skipPadding)
/// there is no tmapA: the kernel takes tmapB, then the global address of
/// the token rows (bf16 [lhsGatherRows, K]), then the pointers above; the
/// producer warpgroup copies the tile's rows with cp.async.
/// With round_lhs / round_rhs (MXGemmConfig::roundLhs, roundRhs, which need
/// skipPadding) of an expert GEMM and with rhs_gather that operand has no
/// tensor map either: the maps there are come first, then the global
/// addresses of the token rows the rounded or gathered operands read (lhs
/// first; bf16 [T, M or N], [T, K]). The weight of a block GEMM's
/// transposed product (round_lhs) comes by its tensor map.
/// With skipPadding the slots' i32 token ids follow (!llvm.ptr<1>). A
/// persistent kernel (MXGemmConfig::persistent) takes one more
/// !llvm.ptr<1> last: an i32 tile counter, zero at launch.
/// What one argument of an MX GEMM kernel is: the kernel's launch ABI.
/// mxGemmKernelArgs lists them in the kernel's order, and the kernel
/// builder (the parameter types, the emitter's bindings) and the launch
/// record (which host buffer each one is) all read that one list.
enum class MXGemmArg {
  /// The operands: a tensor map, or (lhs_gather, round_lhs; round_rhs) the
  /// global address of the token rows the kernel gathers.
  Lhs,
  Rhs,
  /// The scales: rhs_codes's / lhs_codes's tensor maps of the scale bytes,
  /// or the fp8 and block_scale paths' global scale tables.
  RhsScales,
  LhsScales,
  /// A plain epilogue's result (tma_store: its tensor map).
  Result,
  BlockToExpert,
  Bias,
  /// The activation-backward epilogue's inputs and outputs (the first of
  /// its outputs where a plain epilogue's result is, the others after the
  /// slot affinities), and a checkpoint's slot token ids.
  GateUp,
  Affinities,
  DGateUp,
  DGateUpAlongN,
  DGateUpAlongM,
  H,
  ScaledH,
  Partials,
  CheckpointTokenIds,
  /// skipPadding: the GEMM's token ids; a persistent kernel's tile counter
  /// (a zeroed word of the launch, not a host buffer), always last.
  Tokens,
  TileCounter,
};

/// One kernel argument: its role, and whether it is a TMA descriptor
/// (else a global pointer).
struct MXGemmKernelArg {
  MXGemmArg role;
  bool tensorMap = false;
};

/// The kernel's arguments in order: its tensor maps, then its global
/// pointers, then the tile counter.
SmallVector<MXGemmKernelArg> mxGemmKernelArgs(const MXGemmProblem &problem,
                                              const MXGemmConfig &config);

struct MXGemmLaunch {
  gpu::GPUFuncOp kernel;
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> block;
  int64_t dynamicSharedMemory;
  /// The descriptor types the kernel reads tmapA and tmapB as; their
  /// `tensor` is the shared-memory tile, so its shape is the TMA box.
  nvgpu::TensorMapDescriptorType tensorMapA, tensorMapB;
  /// rhs_codes: the descriptor type of the rhs scale bytes' map (null
  /// otherwise).
  nvgpu::TensorMapDescriptorType tensorMapScales;
  /// lhs_codes: the descriptor type of the lhs scale bytes' map (null
  /// otherwise).
  nvgpu::TensorMapDescriptorType tensorMapScalesA;
  /// tma_store: the descriptor type of the result's map, the kernel's last
  /// (null otherwise).
  nvgpu::TensorMapDescriptorType tensorMapResult;
  /// Zeroed i32 words the kernel takes last: 1 (the tile counter) for a
  /// persistent kernel, else 0.
  int64_t counters = 0;
  /// The kernel's arguments (mxGemmKernelArgs).
  SmallVector<MXGemmKernelArg> args;

  /// The descriptor type of the tensor-map argument `role`.
  nvgpu::TensorMapDescriptorType tensorMapOf(MXGemmArg role) const;
};

/// The setmaxnreg registers a producer warpgroup needs to dequantize rhs
/// codes (MXGemmConfig::rhsCodes) without spilling (ptxas -v: none at 40
/// for every kernel the table and rhs-codes make).
constexpr int64_t kRhsCodesProducerRegisters = 40;

/// The setmaxnreg registers the producer thread of a lhs_codes kernel
/// needs to issue its TMA loads (the codes, the scale bytes and the rhs)
/// without spilling (ptxas -v: 8 bytes at 24, none at 32 for the kernels
/// the table and lhs-codes make).
constexpr int64_t kLhsCodesProducerRegisters = 32;
/// lhs_gather: the producer registers (setmaxnreg) its cp.async copies need
/// without spilling: eight rows' offsets per thread besides the ring's
/// state (ptxas -v: the recompute GEMM spilled 8 bytes at 40, none at 48).
constexpr int64_t kLhsGatherProducerRegisters = 48;
/// rhs_gather: the same for the 16 rows a thread copies of a 256-slot
/// tile, their token ids held across the tile (ptxas -v: none spilled at
/// 56 at the test layers and the three reference shapes, the consumers
/// keeping 224 with no C7512; at 40 and 48 even ids packed two a register
/// spilled 12-108 bytes).
constexpr int64_t kRhsGatherProducerRegisters = 56;
/// tma_store: the chunk buffers per consumer warpgroup that
/// moe-gpu-kernel-config gives a GEMM (the two 8 KB buffers of each that
/// fit beside four 128x256x64 stages).
constexpr int64_t kDefaultStoreBuffers = 2;

/// round_lhs / round_rhs: the producer registers (setmaxnreg) the copies
/// and the rounding of a 32-slot block of a column pair (a batch of
/// kRoundBatch words at a time) take without spilling beside the ring's
/// state (ptxas -v: none at the reference shapes and the test layers).
constexpr int64_t kRoundProducerRegisters = 64;

/// Whether convert-moe-to-nvgpu turns `op` into a GPU kernel: a
/// moe.block_matmul or moe.expert_matmul each of whose operands is either
/// FP8 codes (f8E4M3FN or f8E5M2) with scales or bf16 values without. The
/// MX paths fp8 and bf16 take codes of one type on both sides and no bias;
/// every other GPU GEMM runs on the Bf16Operands path.
bool isGPUGemm(Operation *op);

/// Whether the MX paths (fp8, bf16) can run `op`: codes of one FP8 type on
/// both sides, no bias.
bool isMXCodesGemm(Operation *op);

/// The problem of the GPU GEMM `op` (isGPUGemm) on `path`; with
/// `swapOperands` (#moe.gemm_config swap_operands) its transposed product:
/// M and N, the operands and their roundings exchanged, transposedResult
/// set (a block GEMM's kernel lhs is its weight, roundLhs the weight's
/// rounding: weightRoundedQuantize).
MXGemmProblem getMXGemmProblem(Operation *op, MXMmaPath path,
                               bool swapOperands = false);

/// The mx_quantize along K of a bf16 weight ([E, N, K], or [E, K, N] with
/// transpose_rhs) that makes `gemm`'s rhs codes with their scales (seen
/// through moe.fused boundaries), or null: what the transposed product
/// (swap_operands) reads raw and rounds in its consumers.
MXQuantizeOp weightRoundedQuantize(BlockMatmulOp gemm);

/// `v` seen through moe.fused boundaries: a region's block argument is the
/// region's input, a region's result the value its terminator yields
/// (inside a region the operands of its ops are its block arguments, which
/// convert-moe-to-nvgpu inlines).
Value throughFusedRegions(Value v);

/// The mx_quantize along the lhs's last axis of rows that a
/// moe.gather_rows gathers, which makes `gemm`'s lhs codes with their
/// scales (seen through moe.fused boundaries), or null: what lhs_gather
/// reads from the token rows.
MXQuantizeOp gatheredLhsQuantize(BlockMatmulOp gemm);

/// The mx_quantize along the slots (axis 0) of bf16 rows that a
/// moe.gather_rows gathers through `gemm`'s own token ids, which makes its
/// lhs (`rhs` false) or rhs codes with their scales (seen through moe.fused
/// boundaries), or null: what round_lhs / round_rhs gather and round.
MXQuantizeOp slotRoundedQuantize(ExpertMatmulOp gemm, bool rhs);

/// Whether the kernel of `config` can compute `problem` on `target`.
bool fitsMXGemm(const MXGemmProblem &problem, const MXGemmConfig &config,
                    const TargetInfo &target);
/// Whether the kernel of `config` can compute `problem` on `target`;
/// explains why not through `emitError`.
LogicalResult checkMXGemm(const MXGemmProblem &problem,
                              const MXGemmConfig &config,
                              const TargetInfo &target,
                              function_ref<InFlightDiagnostic()> emitError);

/// Whether the index arithmetic the block_scale kernels emit agrees with
/// the layouts of BlockScaleLayouts.h element for element: on sm_100a the
/// places of the scale words in the 512-byte atoms and of the atoms in
/// tensor memory; on sm_120a the ldmatrix rows and chunks that form the
/// A and B fragments of mma.sync m16n8k32 and the lanes that pass the
/// scales. The kernel builders compute with the same functions.
bool tcgen05IndexingAgrees();
bool mmaSyncIndexingAgrees();
/// The tile orders of #moe.gemm_config raster_m (rasterTile, MXGemmSm90.cpp)
/// visit every tile once, in bands of raster_m M tiles.
bool rasterIndexingAgrees();
/// round_lhs: the rows and chunks that the consumers' ldmatrix.x4.trans
/// lanes address in the M-major, 128B-swizzled slot-row stage (and the
/// ldmatrix.x4 lanes in a K-major weight stage, swap_operands of a block
/// GEMM) give each lane the elements of its wgmma A fragment (m64nNk16,
/// bf16) of each k16 step, and each matrix's 8 rows fall in 8 different
/// 16-byte bank groups.
bool roundLhsIndexingAgrees();
/// swap_operands: the shared-memory places of a warpgroup's wgmma
/// accumulator fragments (m64, 32 columns a chunk) in the transposed
/// staging buffer are where its two 128B-swizzled TMA boxes read elements
/// (row n, column m) of the op's result, each element once, and each
/// scalar store of a warp hits 32 different banks.
bool transposedStoreIndexingAgrees();

/// swap_operands of a block GEMM: the binary search of decodePairTile
/// gives each pair of every expert's blocks (an odd last one alone) its
/// expert, first block and second block, for expert block counts with
/// zeros, odd and even counts and up to 300 experts.
bool pairTileIndexingAgrees();

/// Output tiles of the problem: M tiles x N tiles (x experts).
int64_t numTiles(const MXGemmProblem &p, const MXGemmConfig &cfg);

/// Builds the kernel `name` of `config` for `problem` at the end of
/// `module`. The problem and config must pass checkMXGemm.
MXGemmLaunch buildMXGemmKernel(OpBuilder &builder, Location loc,
                               gpu::GPUModuleOp module, StringRef name,
                               const MXGemmProblem &problem,
                               const MXGemmConfig &config,
                               const TargetInfo &target);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_MXGEMM_H
