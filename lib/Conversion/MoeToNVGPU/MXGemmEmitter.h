//===- MXGemmEmitter.h - the builder of one MX GEMM kernel -------*- C++ -*-===//
//
// The kernel builder behind buildMXGemmKernel (MXGemm.h), private to this
// library: the parts every chip shares (arguments, shared memory, TMA ring,
// the contraction range of an expert) in MXGemmSm90.cpp with the sm_90a
// wgmma roles, and the sm_100a tcgen05 roles in MXGemmSm100.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_CONVERSION_MOETONVGPU_MXGEMMEMITTER_H
#define MOE_LIB_CONVERSION_MOETONVGPU_MXGEMMEMITTER_H

#include "DynamicSmem.h"
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::moe::gemm {

/// Bytes of one 128-byte-swizzle row; a code tile's K extent must equal it.
constexpr int64_t kSwizzleBytes = 128;
/// lhs_gather: the producer threads that copy each 128-byte lhs row of a
/// stage (KernelEmitter::gatherLhsStage).
constexpr int64_t kGatherLanesPerRow = 8;
/// round_lhs / round_rhs: the K tiles whose copies are in flight while the
/// producer warpgroup rounds an earlier one (KernelEmitter::
/// emitRoundingStages); fewer than the ring's stages.
constexpr int64_t kRoundLookahead = 2;
/// round_lhs / round_rhs: the words of a 32-slot block that the rounding
/// loads before it stores their rounded values (roundSlotBlocks).
constexpr int64_t kRoundBatch = 8;
/// The same for the bit rounding (mxRoundPairBits): 8 words spilled 24
/// bytes of P4's 64 producer registers (ptxas -v, 2026-12-04).
constexpr int64_t kRoundBitsBatch = 4;
/// Depth of a persistent kernel's ring of tile ids (producer -> consumers).
constexpr int64_t kTileSlots = 2;
/// The named barrier of the producer warpgroup's threads.
constexpr int64_t kProducerBarrier = 1;
/// The named barriers of the consumer warpgroups' turns at the tensor cores
/// (a ping-pong kernel's over tiles, k_turns' over K tiles):
/// warpgroup w waits on kTurnBarrier + w (0 is the CTA's, 1 the producer
/// warpgroup's, 2.. the consumer warp pairs').
constexpr int64_t kTurnBarrier = 8;
/// tma_store: consumer warpgroup w's named barrier before its TMA store of
/// a staged chunk is kStoreBarrier + w.
constexpr int64_t kStoreBarrier = 10;

/// Byte offsets of the shared-memory regions, relative to the 1024-aligned
/// base. Regions a path does not use are empty.
struct SmemLayout {
  int64_t a, b, scaleA, scaleB, aDq, bDq, counters, barriers, numBarriers,
      bytes;
  /// P1's epilogue rounding [dg | du] along M: each consumer warp's column
  /// amaxes, [warp][2 * tileN] f32 (0 bytes otherwise).
  int64_t columnAmax = 0;
  /// rhs_codes: the TMA ring's rhs code tiles, [stage][tileN rows][tileK
  /// bytes], and their scale bytes, [stage][tileN rows][tileK / 32], as
  /// the TMA writes them (no swizzle), and the first of the dequantStages
  /// "dequantized" barriers, then as many "dequantized tile free" ones,
  /// after the others (0 otherwise). `b` is then the converters' ring of
  /// dequantStages bf16 rhs tiles.
  int64_t bCodes = 0, bScales = 0, dequantized = 0;
  /// lhs_codes: the lhs scale bytes of each stage, [stage][tileM rows][2]
  /// as the TMA writes them (0 otherwise); `a` is then the ring's lhs code
  /// tiles, [stage][tileM rows][tileK bytes] in A-fragment order.
  int64_t aScales = 0;
  /// tma_store: each consumer warpgroup's tma_store chunk buffers,
  /// [warpgroup][buffer][mmaM rows][storeRowBytes], 1024-aligned (0
  /// otherwise).
  int64_t store = 0;
};

/// A memref in shared memory (address space 3).
MemRefType smemType(ArrayRef<int64_t> shape, Type elementType);

SmemLayout layoutOf(const MXGemmProblem &p, const MXGemmConfig &cfg);

/// CTAs of the kernel's grid when it is persistent: one per SM, or one per
/// tile when there are fewer tiles.
int64_t persistentCtas(const MXGemmProblem &p, const MXGemmConfig &cfg,
                       int64_t multiprocessors);

/// The exponent bias of a code type: 7 (e4m3) or 15 (e5m2).
int64_t exponentBias(Type elementType);
/// Registers per thread at a CTA's entry: the 64K register file split over
/// the threads of the ctasPerSM CTAs of an SM, a multiple of 8 (what
/// setmaxnreg redistributes within the CTA).
int64_t entryRegisters(const MXGemmConfig &cfg);

/// Plain integer arithmetic for the index functions the block_scale kernels
/// share with their checks (KernelEmitter::IROps is the IR form).
struct IntOps {
  int64_t div(int64_t x, int64_t y) { return x / y; }
  int64_t rem(int64_t x, int64_t y) { return x % y; }
  int64_t mul(int64_t x, int64_t y) { return x * y; }
  int64_t add(int64_t x, int64_t y) { return x + y; }
  int64_t subFrom(int64_t c, int64_t x) { return c - x; }
  int64_t min(int64_t x, int64_t y) { return std::min(x, y); }
  int64_t addc(int64_t x, int64_t c) { return x + c; }
  int64_t xori(int64_t x, int64_t y) { return x ^ y; }
  int64_t sub(int64_t x, int64_t y) { return x - y; }
  bool ltc(int64_t x, int64_t c) { return x < c; }
  bool lt(int64_t x, int64_t y) { return x < y; }
  bool le(int64_t x, int64_t y) { return x <= y; }
  bool both(bool x, bool y) { return x && y; }
  int64_t select(bool c, int64_t x, int64_t y) { return c ? x : y; }
  int64_t selectc(bool c, int64_t x, int64_t y) { return c ? x : y; }
};

/// The (M tile, N tile) at position `t` of a tilesM x tilesN tile order
/// (#moe.gemm_config raster_m), each times its tile size (the tile's origin
/// with sizes, its indices with 1): N fastest (rasterM = 1), or bands of
/// rasterM M tiles (fewer in the last band), M fastest within a band, then
/// N. (One op per statement: the same op order from every compiler.)
template <typename Ops, typename V>
std::pair<V, V> rasterTile(Ops o, V t, int64_t tilesM, int64_t tilesN,
                           int64_t rasterM, int64_t tileM = 1,
                           int64_t tileN = 1) {
  if (rasterM == 1) {
    V n = o.rem(t, tilesN);
    V n0 = o.mul(n, tileN);
    V rowOfTiles = o.div(t, tilesN);
    V m = o.rem(rowOfTiles, tilesM);
    V m0 = o.mul(m, tileM);
    return {m0, n0};
  }
  V band = o.div(t, rasterM * tilesN);
  V first = o.mul(band, rasterM);
  V inBand = o.rem(t, rasterM * tilesN);
  V left = o.subFrom(tilesM, first);
  V rows = o.min(left, rasterM);
  V row = o.rem(inBand, rows);
  V m = o.add(first, row);
  V m0 = o.mul(m, tileM);
  V n = o.div(inBand, rows);
  V n0 = o.mul(n, tileN);
  return {m0, n0};
}

/// Emits the kernel body. Holds the builder, the values every part shares,
/// and small helpers that materialize integer constants on demand.
class KernelEmitter {
public:
  /// `ctas`: the grid of a persistent kernel (cfg.persistent).
  KernelEmitter(OpBuilder &b, Location loc, const MXGemmProblem &p,
                const MXGemmConfig &cfg, MmaEmitter mma, int64_t ctas)
      : b(b), loc(loc), p(p), cfg(cfg), mma(mma), ctas(ctas),
        lay(layoutOf(p, cfg)),
        i1T(b.getI1Type()), i32T(b.getI32Type()), i64T(b.getI64Type()),
        f32T(b.getF32Type()), idxT(b.getIndexType()) {
    MLIRContext *ctx = b.getContext();
    accT = LLVM::LLVMStructType::getLiteral(ctx,
                                            SmallVector<Type>(accLen(), f32T));
    smemPtrT = LLVM::LLVMPointerType::get(ctx, 3);
    globalPtrT = LLVM::LLVMPointerType::get(ctx, 1);
    Attribute workgroup = gpu::AddressSpaceAttr::get(
        ctx, gpu::GPUDialect::getWorkgroupAddressSpace());
    barsT = nvgpu::MBarrierGroupType::get(ctx, workgroup, lay.numBarriers);
    // One 128-byte row per tile row: tileK codes, or tileK / 2 bf16s.
    // An M-major lhs arrives as tileM / 64 boxes of tileK rows x 64 M;
    // lhs codes as tileM rows of tileK bytes, unswizzled (a consumer thread
    // reads 16 bytes of a row, a warp 512 contiguous bytes).
    tileAT = cfg.lhsMMajor ? smemType({cfg.tileK, kSwizzleBytes}, b.getI8Type())
             : cfg.lhsCodes
                 ? smemType({cfg.tileM, cfg.tileK}, b.getI8Type())
                 : smemType({cfg.tileM, kSwizzleBytes}, b.getI8Type());
    // An N-major rhs arrives as tileN / 64 boxes of tileK rows x 64 N;
    // rhs codes as tileN rows of tileK bytes, unswizzled (the converters
    // read them in 16-byte chunks, a quarter-warp's 128 contiguous bytes).
    tileBT = cfg.rhsNMajor
                 ? smemType({cfg.tileK, kSwizzleBytes}, b.getI8Type())
                 : smemType({cfg.tileN, cfg.rhsCodes ? cfg.tileK
                                                     : kSwizzleBytes},
                            b.getI8Type());
    // lhs_gather: the producer warpgroup copies the lhs rows itself
    // (cp.async), so there is no lhs tensor map.
    if (!lhsCopied())
      tmapAT = tensorMapType(tileAT,
                             cfg.lhsCodes
                                 ? nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE
                                 : nvgpu::TensorMapSwizzleKind::SWIZZLE_128B);
    // round_lhs / round_rhs: the operand's slot rows come by cp.async too
    // (rhs_gather: the slot rows of a block GEMM's transposed product).
    if (!rhsCopied())
      tmapBT = tensorMapType(tileBT,
                             cfg.rhsCodes
                                 ? nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE
                                 : nvgpu::TensorMapSwizzleKind::SWIZZLE_128B);
    // rhs_codes: the K tile's scale bytes of the tile's rows, 16-byte rows
    // of 8 rhs rows each (the operand kernel's layout, MXOperandKernel.h).
    if (cfg.rhsCodes) {
      tileST = smemType({cfg.tileN * (cfg.tileK / 32) / 16, 16},
                        b.getI8Type());
      tmapST = tensorMapType(tileST, nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE);
    }
    // lhs_codes: the K tile's two scale bytes of each of the tile's rows,
    // 16-byte rows of 8 lhs rows each.
    if (cfg.lhsCodes) {
      tileSAT = smemType({cfg.tileM * (cfg.tileK / 32) / 16, 16},
                         b.getI8Type());
      tmapSAT =
          tensorMapType(tileSAT, nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE);
    }
    // tma_store: a chunk of a warpgroup's rows, mmaM rows of store_columns
    // f32 swizzled across their width (32, 64 or 128 bytes); an expert
    // GEMM's result is [E, M, N], so the box has the expert as its outer
    // dimension and the TMA clips the rows past M of each expert.
    // swap_operands: a chunk is store_columns (32) rows of the op's result
    // by a warpgroup's 64 columns, stored as two boxes of 32 f32 (128 B).
    if (cfg.tmaStore) {
      SmallVector<int64_t> box = {cfg.mmaM, cfg.storeRowBytes()};
      if (p.transposedResult)
        box = {cfg.storeColumns, kSwizzleBytes};
      if (p.kind == MXGemmKind::Expert)
        box.insert(box.begin(), 1);
      auto swizzle = cfg.storeRowBytes() == 32
                         ? nvgpu::TensorMapSwizzleKind::SWIZZLE_32B
                     : cfg.storeRowBytes() == 64
                         ? nvgpu::TensorMapSwizzleKind::SWIZZLE_64B
                         : nvgpu::TensorMapSwizzleKind::SWIZZLE_128B;
      tmapCT = tensorMapType(smemType(box, b.getI8Type()), swizzle);
    }
  }

  void emit(gpu::GPUFuncOp func);
  nvgpu::TensorMapDescriptorType getTensorMapA() const { return tmapAT; }
  nvgpu::TensorMapDescriptorType getTensorMapB() const { return tmapBT; }
  nvgpu::TensorMapDescriptorType getTensorMapScales() const { return tmapST; }
  nvgpu::TensorMapDescriptorType getTensorMapScalesA() const {
    return tmapSAT;
  }
  nvgpu::TensorMapDescriptorType getTensorMapResult() const { return tmapCT; }

private:
  // Fragment registers of one m64nN f32 wgmma accumulator per thread.
  int64_t accLen() const { return cfg.mmaN / 2; }
  /// The wgmma accumulators of a consumer warpgroup: one per M step of a
  /// ping-pong warpgroup's whole tile, else one (its own mmaM rows).
  int64_t mSteps() const { return cfg.pingpong ? cfg.tileM / cfg.mmaM : 1; }
  /// Ping-pong: warpgroup `warpgroup`'s turn at the tensor cores, a named
  /// barrier of both consumer warpgroups that the other one's arrival
  /// (`wait` false) completes.
  void turnBarrier(Value warpgroup, bool wait);
  bool isFp8() const { return p.path == MXMmaPath::Fp8WgmmaPromote; }
  bool isBf16Operands() const { return p.path == MXMmaPath::Bf16Operands; }
  /// Bytes of one operand element in global and shared memory.
  int64_t elementBytes() const { return isBf16Operands() ? 2 : 1; }
  // Rows of the rhs codes and scales.
  int64_t rowsB() const {
    return p.kind == MXGemmKind::Block ? p.numExperts * p.n : p.n;
  }

  nvgpu::TensorMapDescriptorType tensorMapType(
      MemRefType tile, nvgpu::TensorMapSwizzleKind swizzle =
                           nvgpu::TensorMapSwizzleKind::SWIZZLE_128B) {
    return nvgpu::TensorMapDescriptorType::get(
        b.getContext(), tile, swizzle,
        nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  }

  // Integer constants and arithmetic; the int64_t overloads materialize
  // the constant in the other operand's type.
  Value cst(Type t, int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(t, v));
  }
  Value idx(int64_t v) { return cst(idxT, v); }
  Value i32(int64_t v) { return cst(i32T, v); }
  Value i64(int64_t v) { return cst(i64T, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return add(x, cst(x.getType(), y)); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t y) { return mul(x, cst(x.getType(), y)); }
  Value divu(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value remu(Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value andi(Value x, int64_t y) {
    return arith::AndIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value ori(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value xori(Value x, Value y) { return arith::XOrIOp::create(b, loc, x, y); }
  Value shl(Value x, int64_t y) {
    return arith::ShLIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value shru(Value x, int64_t y) {
    return arith::ShRUIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value cmp(arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  }
  Value cmp(arith::CmpIPredicate pred, Value x, int64_t y) {
    return cmp(pred, x, cst(x.getType(), y));
  }
  Value eq(Value x, int64_t y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value toI64(Value v) { return arith::ExtUIOp::create(b, loc, i64T, v); }
  Value indexToI32(Value v) {
    return arith::IndexCastOp::create(b, loc, i32T, v);
  }
  Value i32ToIndex(Value v) {
    return arith::IndexCastOp::create(b, loc, idxT, v);
  }
  Value indexToI64(Value v) { return toI64(indexToI32(v)); }

  /// i64 shared-memory address -> !llvm.ptr<3>.
  Value smemPtr(Value addr) {
    return LLVM::IntToPtrOp::create(b, loc, smemPtrT, addr);
  }
  /// A shared address `off` bytes past the aligned base.
  Value smemAddr(Value off) { return add(alignedBase, off); }
  /// An invariant load of `type` from global memory.
  Value loadGlobal(Type type, Value ptr, unsigned alignment) {
    return LLVM::LoadOp::create(b, loc, type, ptr, alignment,
                                /*isVolatile=*/false,
                                /*isNonTemporal=*/false,
                                /*isInvariant=*/true);
  }
  /// Starts an epilogue's streams: with cfg.evictFirstOutputs, makes the
  /// L2 evict-first policy that loadStream and storeStream attach
  /// (createpolicy.fractional, one instruction per epilogue).
  void beginStreams();
  /// A load of data that no other tile of the kernel reads (loadGlobal's
  /// load, or with cfg.evictFirstOutputs ld.global.L2::cache_hint with the
  /// evict-first policy). `type` is f32, vector<2xf32> or bf16.
  Value loadStream(Type type, Value ptr, unsigned alignment);
  /// A store of an output element the kernel does not read again (with
  /// cfg.evictFirstOutputs st.global.L2::cache_hint). `value` is f32,
  /// vector<2xf32> or vector<2xbf16>.
  void storeStream(Value value, Value ptr, unsigned alignment);
  Value globalElement(Type type, Value base, Value index) {
    return LLVM::GEPOp::create(b, loc, globalPtrT, type, base,
                               ValueRange{index});
  }

  Value extract(Value st, int64_t i) {
    return LLVM::ExtractValueOp::create(b, loc, st, ArrayRef<int64_t>{i});
  }
  void arrive(Value barrier) {
    nvgpu::MBarrierArriveOp::create(
        b, loc, nvgpu::MBarrierTokenType::get(b.getContext()), bars, barrier);
  }
  /// A consumer warpgroup hands ring stage `stage` (index of its empty
  /// barrier) back: to its own producer, and in a cluster pair's second CTA
  /// also to the first one's, which multicasts the lhs tile into both. One
  /// arrival per warpgroup, by its first thread (`leader`): its
  /// wgmma.wait_group covers the warpgroup's collective MMAs, so their
  /// reads of the stage are over (CUTLASS's consumer release).
  void releaseStage(Value stage, Value leader);
  /// The arrivals an empty stage barrier of the bf16 consumers counts: one
  /// per consumer warpgroup that reads the stage.
  int64_t stageReleases() const {
    if (cfg.roundLhs)
      return 128 * cfg.consumerWarpgroups;
    return cfg.pingpong ? 1 : cfg.consumerWarpgroups;
  }
  /// barrier.cluster arrive and wait by every thread of the CTA.
  void syncCluster();
  void waitParity(Value barrier, Value parity) {
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, bars, parity,
                                           idx(cfg.waitTicks), barrier);
  }

  /// 2^(byte - 127) as f32, exactly: byte << 23 for 1..254, the subnormal
  /// 2^-127 for 0, NaN for 255.
  Value e8m0ToF32(Value byte);
  /// (slot, phase parity) of K tile `t` (index) in a ring `depth` deep;
  /// `flip` inverts the parity (a wait for a fresh "empty" barrier passes).
  std::pair<Value, Value> stageAndParity(Value t, int64_t depth, bool flip);
  /// The wgmma shared-memory descriptor of a 128B-swizzled tile at shared
  /// address `addr`: start address >> 4, LBO `leadingBytes`, SBO 1024 B
  /// (8 rows x 128 B), layout type 1 (128B swizzle) in bits 62-63. K-major
  /// tiles leave LBO unused (16 B); an N-major tile's LBO is the distance
  /// between its 64-column boxes (CUTLASS's canonical MN-major SW128
  /// layout ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))).
  Value matrixDescriptor(Value addr, int64_t leadingBytes = 16);
  /// Pins the registers of a wgmma result after wgmma.wait_group: an empty
  /// asm with side effects that ties them all, so that no read of them is
  /// scheduled above the wait (CUTLASS's fence_operand).
  Value pinRegisters(Value st);
  /// Inline PTX `text` (AT&T dialect operand syntax, $N) with `constraints`
  /// on `operands`; returns its result (null when `result` is null).
  Value inlinePtx(Type result, ValueRange operands, StringRef text,
                  StringRef constraints, bool sideEffects);
  /// Issues the TMA loads of K tile `t` (index) into stage `s`, expecting
  /// their bytes on full[s]. Thread 0 only. (lhs_gather: the rhs tile's;
  /// gatherLhsStage copies the lhs.)
  void loadTile(Value t, Value s);
  // lhs_gather: every thread of the producer warpgroup copies 16-byte
  // chunks of the tile's lhs rows from their slots' token rows with
  // cp.async (TMA would need one box per row, and one-row boxes issue at
  // about 110 cycles each: scripts/device/probes/tma_row_gather.cu). The
  // thread's chunks are chunks tid % L + L j of rows tid / L + (128 / L) i
  // (L = kGatherLanesPerRow): each warp instruction fills whole 32-byte
  // sectors of 32 / L rows, and a thread keeps the addresses of only
  // tileM L / 128 rows live (with L = 8, 8 rows, the 40 producer registers
  // spilled 8 bytes).
  /// Reads this thread's rows' token ids of the tile at m0 (gatherTokens).
  void loadGatherTokens();
  /// Copies this thread's chunks of K tile `t` (index) into stage `s` at
  /// their 128B-swizzled places (zeros for padding slots: source size 0),
  /// then makes full[s] track their completion (cp.async.mbarrier.arrive
  /// .noinc: full[s] counts one arrival per producer thread besides
  /// thread 0's expect_tx).
  void gatherLhsStage(Value t, Value s);
  /// rhs_gather: gatherLhsStage for the rhs of a block GEMM's transposed
  /// product, the tileN slot rows from n0 (of the tile's second block,
  /// padding unless secondBlock), through rhsTokens.
  void gatherRhsStage(Value t, Value s);
  /// This thread's rows' token ids of the tile's two blocks (i32, -1:
  /// padding), read once a tile.
  SmallVector<Value> loadRhsTokens();
  /// The copies of gatherLhsStage and gatherRhsStage: this thread's chunks
  /// of K tile `t` of the rows whose token ids are `tokens` (rows tid / L +
  /// gatherRowStep() i) from `rows` (bf16 [`sourceRows`, K]) into the
  /// stage at `region` + s * `tileRows` * 128, then full[s]'s arrival.
  void copyTokenRows(Value t, Value s, int64_t region, int64_t tileRows,
                     ArrayRef<Value> tokens, Value rows, int64_t sourceRows);
  /// The rows between a producer thread's rows in a stage.
  int64_t gatherRowStep() const {
    return 128 * cfg.producerWarpgroups / kGatherLanesPerRow;
  }
  /// The lhs rows of a stage each producer thread copies chunks of.
  int64_t gatherRowsPerThread() const {
    return cfg.tileM * kGatherLanesPerRow / (128 * cfg.producerWarpgroups);
  }
  // round_lhs / round_rhs (persistent Expert kernels): the operand is slot
  // rows gathered from token rows and MX-rounded along the slots (K). Every
  // producer thread copies 16-byte chunks of the K tile's slot rows from
  // their tokens' rows with cp.async into the 128B-swizzled M- or N-major
  // stage, in the layout the TMA box gives (chunk tid % 8 of the 128-byte
  // box rows (tid / 8 + 16 i, box) of each box: a warp instruction 4 rows'
  // whole 128 bytes). round_rhs: once the producer warpgroup's copies of
  // the stage have landed, it rounds 32-slot blocks of column pairs in
  // place and arrives on full[s]; the copies run kRoundLookahead K tiles
  // ahead of the rounding, so their latency overlaps the rounding of
  // earlier ones. round_lhs alone: the copies arrive on full[s] themselves
  // (as lhs_gather's) and the consumers round the lhs in their registers
  // (roundLhsStage).
  /// The token ids of this thread's slot rows of K tile `t` (index; a
  /// tile past the contraction reads the last slot's).
  SmallVector<Value> loadSlotTokens(Value t);
  /// Copies this thread's chunks of the slot rows whose token ids are
  /// `slotTokens` (loadSlotTokens) of each rounded operand into stage `s`
  /// (zeros for padding slots and columns
  /// past the operand's: source size 0).
  void copySlotRows(Value s, ArrayRef<Value> slotTokens);
  /// Rounds this thread's blocks of stage `s` of the rhs in place
  /// (round_rhs, roundSlotBlocks).
  void roundStage(Value s);
  /// Rounds the `columns`-wide stage tile at shared offset `stage` (i64):
  /// thread tid + 128 i takes the 32-slot block (tid + 128 i) / (columns /
  /// 2) of column pair (tid + 128 i) % (columns / 2), so a warp reads and
  /// writes 128 contiguous bytes of a row; the amax, the scale and the
  /// rounding are MXBuilders' and MXRounding's, as in the operand kernels.
  void roundSlotBlocks(Value stage, int64_t columns, MXQuantAttr quant);
  /// The FP8 codes of the bf16 pair `word` (i32, element 0 in the low
  /// half), element i scaled by `inverse_i` (buildEncodePair), placed for
  /// decodeCodeLanes: code 0 in the high byte of lane 0, code 1 of lane 1.
  Value encodeWordLanes(Value word, Value inverse0, Value inverse1,
                        Type codeType);
  /// The producer warpgroup's loop over the K tiles of the current output
  /// tile: the copies of K tile i (with thread 0's TMA load of the other
  /// operand when `tma`), the rounding of K tile i - kRoundLookahead
  /// (round_rhs).
  void emitRoundingStages(bool tma);
  bool roundsOperand() const {
    return (cfg.roundLhs && !p.pairsBlocks()) || cfg.roundRhs;
  }
  /// The lhs / rhs rows come by the producer threads' cp.async, not TMA:
  /// lhs_gather's and an expert GEMM's round_lhs (a block GEMM's
  /// transposed product takes its weight by TMA), round_rhs's and
  /// rhs_gather's.
  bool lhsCopied() const {
    return cfg.lhsGather || (cfg.roundLhs && !p.pairsBlocks());
  }
  bool rhsCopied() const { return cfg.roundRhs || cfg.rhsGather; }
  /// Every producer thread copies operand rows (lhs_gather, rhs_gather,
  /// round_lhs, round_rhs) and arrives on full[s] itself.
  bool producerCopies() const {
    return cfg.lhsGather || cfg.rhsGather || roundsOperand();
  }
  /// The shared i32 counters of a one-CTA-per-tile Expert kernel: blocks of
  /// lower experts, the expert's blocks, and with skipPadding its K tiles
  /// that start at a token.
  int64_t numExpertCounters() const { return p.skipPadding ? 3 : 2; }
  /// Sets kBegin and kTiles: the whole K range (Block; none for a padding
  /// tile with skipPadding), or the slots of the grid's expert, counted by
  /// every thread of the CTA (Expert; with skipPadding up to its last K
  /// tile that starts at a token).
  void emitContractionRange();

  // Persistent kernels (cfg.persistent): CTA c computes output tile c
  // first, then the tiles it takes from the launch's zeroed counter (tile
  // = ctas + atomicAdd(counter, 1)) until one is past the last: the tiles
  // in flight stay a window of about one per CTA in the grid form's order,
  // as the hardware's in-order dispatch keeps them, so they share operands
  // in L2. The producer thread takes the ids and passes each to the
  // consumers through a ring of kTileSlots shared words (one mbarrier pair
  // per slot). Each role keeps the count of K tiles it has streamed
  // through the TMA ring (ringBase), whose stage and phase continue from
  // one output tile to the next.
  /// Expert: every thread of the CTA fills the shared table of each
  /// expert's first block and block count, and with skipPadding its K
  /// tiles that start at a token (integer atomics: the same table
  /// whatever the order).
  void emitExpertTable();
  /// pairsBlocks: every thread of the CTA fills the shared table of each
  /// expert's first block and first pair (16 bits each, entry E their
  /// totals), counting the experts' blocks with integer atomics in the
  /// tma_store buffers (the same table whatever the order).
  void emitPairTable();
  /// `body(i)` for i = tid, tid + threads, ... below `count` (index).
  void forStrided(int64_t count, function_ref<void(Value)> body);
  /// `body(block, owner)` (index, i32) for this thread's strided share of
  /// the blocks whose owner is an expert.
  void forOwnedBlocks(function_ref<void(Value, Value)> body);
  /// Sets m0, n0, expertId, kBegin and kTiles of output tile `w` (i32):
  /// N fastest, then M, then the expert (pairsBlocks: decodePairTile).
  void decodeTile(Value w);
  /// pairsBlocks: tile w is M tile w % tilesM of pair w / tilesM, the
  /// pairs of each expert's blocks in order, expert after expert (the
  /// table of emitPairTable; the expert by a binary search of the first
  /// pairs). Sets m0, n0 (the pair's first slot), expertId, secondBlock,
  /// and the whole K range.
  void decodePairTile(Value w);
  /// The tile ids of a persistent kernel: numTiles, or pairsBlocks's
  /// count of the expert table (i32).
  Value tileCountValue();
  /// m0 and n0 of the tile at position `t` of one expert's (or a block
  /// GEMM's) tile order: N fastest, or with raster_m in bands of rasterM M
  /// tiles, M fastest within a band.
  void setTileOrigin(Value t);
  /// Producer: tile `w` into slot j % kTileSlots once it is free.
  void publishTile(Value j, Value w);
  /// Consumers: the tile id of slot j % kTileSlots, once published; the
  /// slot goes back to the producer.
  Value receiveTile(Value j);
  /// A loop over the tile ids the producer thread publishes, up to one
  /// past the last: sets ringBase and the tile (decodeTile), then `body`
  /// with the tile's slot count j (index). Returns the tiles received.
  Value forEachReceivedTile(function_ref<void(Value j)> body);
  /// Shared address of the ring of tile ids.
  int64_t tileIdsOffset() const {
    return lay.counters + p.expertTableBytes();
  }
  /// skipPadding: how many of `block`'s (i64) K tiles (i32) start at a slot that
  /// holds a token (tokens fill a block from its first slot).
  Value tokenTiles(Value block);
  /// Sets rowB0, the tile's first rhs row (after m0, n0 are set).
  void setRhsRow0();
  /// The single-thread TMA producer of a persistent bf16-operands kernel.
  void emitPersistentProducerBf16Operands();
  /// rhs_codes: warps 1-3 of the producer warpgroup dequantize every K tile
  /// of the ring (each output tile's, persistent: in the order the tile ids
  /// arrive) from the stage's codes into its swizzled bf16 rhs tile, then
  /// arrive on its "dequantized" barrier.
  void emitRhsDequant();
  /// Dequantizes the rhs codes in ring stage `s` with their scale bytes
  /// into bf16 tile `d` of the dequantStages-deep ring.
  void dequantizeRhsStage(Value s, Value d);
  /// rhs_codes: hands the bf16 tile of ring position `g` back to the
  /// converters (one arrival per consumer warpgroup, by `leader`).
  void releaseDequantized(Value g, Value leader);
  /// Threads of warps 1-3 of the producer warpgroup.
  static constexpr int64_t kRhsConverters = 96;
  /// The result matrix of the tile's expert (Expert) or the result (Block).
  Value resultBase();

  /// A consumer thread's place in the m64nN accumulator: its warpgroup
  /// among the consumers, its lane quad, and its fragment row in the tile
  /// (64 * warpgroup + 16 * warp + lane / 4, or without the warpgroup's
  /// term in a ping-pong kernel; the other half is 8 rows on).
  struct ConsumerLane {
    Value warpgroup, quad, rowInTile;
    /// Thread 0 of the warpgroup.
    Value leader;
  };
  ConsumerLane consumerLane();
  /// lhs_codes: a consumer thread's A fragments of the lhs code tile in
  /// ring stage `d` (i64): for each M step of its warpgroup, the 16 b32
  /// registers of the 4 k16 steps (a0..a3 of step j at 4 j), decoded with
  /// the scale bytes of its rows.
  SmallVector<SmallVector<Value>> decodeLhsStage(Value d,
                                                 const ConsumerLane &lane);
  /// round_lhs: a consumer thread's A fragments of the M-major bf16 slot
  /// rows of its warpgroup in a ring stage (`boxes`, the i64 shared offset
  /// of the warpgroup's first 64-column box), rounded along the slots (K):
  /// ldmatrix.trans of each k16 step, then per row and 32-slot block the
  /// amax (the row's lane quad, shfl.xor 1 and 2), MXBuilders' scale byte
  /// (one of the quad's four per lane, shared by two more shuffles) and
  /// inverse, and the pair conversion, as the operand kernels round; the
  /// decode with one bf16 factor unless the warp's vote needs two. The
  /// layout of decodeLhsStage's result.
  SmallVector<SmallVector<Value>> roundLhsStage(Value boxes);
  /// The A operand of the wgmmas comes from registers (lhs_codes,
  /// round_lhs).
  bool registerA() const { return cfg.lhsCodes || cfg.roundLhs; }

  bool isBlockScale() const { return p.path == MXMmaPath::BlockScale; }
  /// IntOps on IR values (unsigned division of non-negative i32 indices).
  struct IROps {
    KernelEmitter &e;
    Value div(Value x, int64_t y) { return e.divu(x, y); }
    Value rem(Value x, int64_t y) { return e.remu(x, y); }
    Value mul(Value x, int64_t y) { return e.mul(x, y); }
    Value add(Value x, Value y) { return e.add(x, y); }
    Value div(Value x, Value y) {
      return arith::DivUIOp::create(e.b, e.loc, x, y);
    }
    Value rem(Value x, Value y) {
      return arith::RemUIOp::create(e.b, e.loc, x, y);
    }
    Value subFrom(int64_t c, Value x) {
      return e.sub(e.cst(x.getType(), c), x);
    }
    Value min(Value x, int64_t y) {
      return arith::MinUIOp::create(e.b, e.loc, x, e.cst(x.getType(), y));
    }
    Value addc(Value x, int64_t c) { return e.add(x, e.cst(x.getType(), c)); }
    Value xori(Value x, Value y) { return e.xori(x, y); }
    Value sub(Value x, Value y) { return e.sub(x, y); }
    Value ltc(Value x, int64_t c) {
      return e.cmp(arith::CmpIPredicate::ult, x, c);
    }
    Value lt(Value x, Value y) {
      return e.cmp(arith::CmpIPredicate::ult, x, y);
    }
    Value le(Value x, Value y) {
      return e.cmp(arith::CmpIPredicate::ule, x, y);
    }
    Value both(Value x, Value y) { return e.andi(x, y); }
    Value select(Value c, Value x, Value y) { return e.select(c, x, y); }
    Value selectc(Value c, Value x, int64_t y) {
      return e.select(c, x, e.cst(x.getType(), y));
    }
  };
  /// block_scale (MXGemmSm100.cpp): the 512-byte scale atoms of B per
  /// stage, and the tensor-memory columns the kernel allocates.
  int64_t scaleAtomsB() const;
  int64_t tmemColumns() const;
  /// The TMA loads and the scale atoms of each K tile.
  void emitProducerBlockScale();
  /// The tcgen05.mma issuer and the epilogue from tensor memory.
  void emitConsumerTcgen05();
  /// block_scale on sm_120a (MXGemmSm120.cpp): the warps' mma.sync
  /// mainloop and their fragments' stores.
  void emitConsumerMmaSync();
  /// Opens the producer's loop over the K tiles at the insertion point and
  /// leaves it inside: waits for the stage to be empty, and thread 0
  /// issues the tile's TMA loads. Returns the tile (index) and its stage.
  std::pair<Value, Value> beginProducerTile();
  void emitProducerFp8();
  void emitConsumerFp8();
  void emitProducerBf16();
  void emitProducerBf16Operands();
  /// A producer loop over the tile's K tiles: waits until the ring stage
  /// of K tile t (index) is empty, then `body(t, stage)`.
  void forEachEmptyStage(function_ref<void(Value t, Value s)> body);
  /// The bf16 wgmma mainloop over a ring of bf16 K tiles: `depth` stages,
  /// full barriers at `fullBase`, empty ones at `emptyBase`, each tile
  /// `stride` bytes apart and `panels` 128-byte panels deep.
  void emitConsumerBf16(int64_t depth, int64_t fullBase, int64_t emptyBase,
                        int64_t offA, int64_t offB, int64_t strideA,
                        int64_t strideB, int64_t panels);
  /// The bf16x2 words of 16 codes (one 16-byte chunk) times 2^(s - 127).
  SmallVector<Value> dequantizeChunk(Value chunk, ArrayRef<Value> factors);
  /// The two bf16x2 words of the 4 codes of `word` (i32): codes 0, 1 and
  /// codes 2, 3, each times the bf16Factors `factors` of its scale, for
  /// codes of `codeType`.
  /// The bf16x2 word of the two codes of `codeType` in the high bytes of
  /// the 16-bit lanes of `lanes` (i32), times the bf16x2 factors `factors`
  /// (bf16Factors, or per lane).
  Value decodeCodeLanes(Value lanes, ArrayRef<Value> factors, Type codeType);
  std::pair<Value, Value> dequantizeWord(Value word, ArrayRef<Value> factors,
                                         Type codeType);
  /// bf16x2 factors whose product is 2^(s - 127 + 127 - bias): one when the
  /// warp's scales allow, else two (and NaN for s = 255), for codes of
  /// `codeType` (the rhs's when null).
  SmallVector<Value> bf16Factors(Value scaleByte, bool twoFactors,
                                 Type codeType = Type());
  /// One bf16 wgmma m64nNk16 with A from the 4 b32 registers `a` and B
  /// from shared memory (descriptor `descB`, N-major when `transB`):
  /// inline PTX, as the NVVM op takes only descriptors.
  /// `startAt` (i1, or null): start the accumulator (scale-d 0) where it
  /// holds, known at run time (`accumulate` is then ignored).
  Value wgmmaRegisterA(Value acc, ArrayRef<Value> a, Value descB,
                       bool accumulate, bool transB, Value startAt = Value());
  void storeAccumulator(Value acc, Value rowInTile, Value quad);
  /// tma_store: the consumer thread's accumulator of its warpgroup's mmaM
  /// rows staged through shared memory chunk by chunk, each chunk stored
  /// by the warpgroup's leader with a TMA store.
  void storeAccumulatorTma(Value acc, const ConsumerLane &lane);
  /// storeAccumulatorTma of a transposed problem (swap_operands): each
  /// chunk's columns become rows of the op's result.
  void storeAccumulatorTmaTransposed(Value acc, const ConsumerLane &lane);
  /// tma_store: after a warpgroup's threads wrote a chunk buffer, the
  /// fence towards the TMA's proxy, the leader's wait for that buffer's
  /// earlier store, and the warpgroup's barrier; the leader then stores it.
  void publishStoreChunk(const ConsumerLane &lane);
  /// tma_store: the leader's wait for its warpgroup's TMA stores before the
  /// CTA exits (their shared-memory sources must stay until read).
  void finishTmaStores(const ConsumerLane &lane);
  /// Emits `body` under `if (leader)`, the insertion point restored after.
  void onLeader(Value leader, function_ref<void()> body);
  /// A block problem's bias row of the tile's expert (bias[e, :]), and its
  /// f32 pair at column `col` (i64) + 8 jb (bf16 widens exactly).
  Value biasRowOfTile();
  Value biasPairAt(Value biasRow, Value col, int64_t jb);
  /// The GatedActBwd epilogue of a consumer thread's dA fragment.
  void storeGatedActBwd(Value acc, Value rowInTile, Value quad);
  /// A consumer thread's [dg | du] values (f32) of its two rows r and
  /// column pairs jb (element e of a pair, half 0: dg, 1: du), with the
  /// store guard and the f32 element index of dg of each (r, jb).
  struct DGateUpFragment {
    int64_t pairs = 0;
    SmallVector<Value> values, insides, gIndices;
    size_t at(int64_t half, int64_t r, int64_t jb, int64_t e) const {
      return ((half * 2 + r) * pairs + jb) * 2 + e;
    }
  };
  /// The epilogue's MX roundings of [dg | du] (MXGemmEpilogue) for the
  /// column pairs jb0 .. jb0 + 3 of the fragment.
  void roundDGateUpAlongN(const DGateUpFragment &frag, int64_t jb0);
  void roundDGateUpAlongM(const DGateUpFragment &frag, Value quad,
                          int64_t jb0);
  /// The consumer warp (0 .. 4 * consumer warpgroups - 1) of this thread.
  Value consumerWarp();
  /// A named barrier of this consumer warp and its pair (warp ^ 1).
  void joinWarpPair();
  /// Rounds the pair (r, jb) of `half` (element e with inverse[e] and
  /// factor[e] of its block's scale) to its MX values of `quant` and stores
  /// them as bf16 into `out` ([M, 2N], the layout of [dg | du]).
  void roundAndStorePair(const DGateUpFragment &frag, int64_t half, int64_t r,
                         int64_t jb, std::array<Value, 2> inverse,
                         std::array<Value, 2> factor, MXQuantAttr quant,
                         Value out);
  /// The tile's gate and up rows into L2, so that the epilogue's loads hit
  /// there, issued by `threads` threads of which this one is `thread`
  /// (i32): the producer warpgroup once thread 0 has issued its TMA loads
  /// (one CTA per tile), or the consumers as a persistent CTA's tile
  /// starts.
  void emitEpiloguePrefetch(Value thread, int64_t threads);

  OpBuilder &b;
  Location loc;
  const MXGemmProblem &p;
  const MXGemmConfig &cfg;
  /// The chip's MMA instructions (block_scale: tcgen05 or mma.sync).
  MmaEmitter mma;
  /// The grid of a persistent kernel.
  int64_t ctas;
  SmemLayout lay;
  Type i1T, i32T, i64T, f32T, idxT;
  Type accT, smemPtrT, globalPtrT;
  nvgpu::MBarrierGroupType barsT;
  MemRefType tileAT, tileBT, tileST, tileSAT;
  nvgpu::TensorMapDescriptorType tmapAT, tmapBT, tmapST, tmapSAT, tmapCT;

  // Kernel arguments and the values both roles use.
  Value tmapA, tmapB, tmapS, tmapSA, tmapC, scalesA, scalesB, result,
      blockToExpert, bias;
  // The GatedActBwd epilogue's operands and extra outputs (or null).
  Value gateUp, affinities, hOut, scaledHOut, partialsOut, tokenIds;
  // The slots' token ids of a skipPadding kernel (or null).
  Value tokens;
  // lhs_gather: the lhs token rows (!llvm.ptr<1>), and the token ids of
  // this producer thread's rows of the current tile (i32, -1: padding).
  Value lhsRows;
  /// round_rhs: the global address of the rhs's source rows.
  Value rhsRows;
  SmallVector<Value> gatherTokens;
  // rhs_gather: this producer thread's rows' token ids of the current
  // tile (loadRhsTokens).
  SmallVector<Value> rhsTokens;
  // [dg | du]'s MX values along N and along M (or null).
  Value dGateUpAlongNOut, dGateUpAlongMOut;
  // The epilogue's L2 evict-first policy (i64; null unless
  // cfg.evictFirstOutputs, set by beginStreams).
  Value streamPolicy;
  Value tid, isThread0, m0, n0, rowB0, smem, alignedBase, alignPad, bars;
  // The expert (i32) of an Expert tile (and of a pairsBlocks one).
  Value expertId;
  // pairsBlocks: the tile's second block belongs to its expert (i1), and
  // the first lhs row of the tile: the expert's first K row (M-major
  // weight) or its row m0 (K-major).
  Value secondBlock, rowA0;
  // A cluster pair's first CTA (i1; null without clusters).
  Value isClusterLeader;
  // First K element (index) and number of K tiles (index) of this tile.
  Value kBegin, kTiles;
  // K tiles this role streamed through the ring before this output tile
  // (index; null in a kernel of one tile per CTA).
  Value ringBase;
  // A persistent kernel's tile counter (!llvm.ptr<1> to i32).
  Value tileCounter;
};

} // namespace mlir::moe::gemm

#endif // MOE_LIB_CONVERSION_MOETONVGPU_MXGEMMEMITTER_H
