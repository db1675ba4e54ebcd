//===- MXGemmSm90.cpp - IR builders of the sm_90a MX GEMM kernels ---------===//
//
// The C++ form of the H200-verified prototype (bench/prototypes/mxgemm_sm90 at
// commit 360947c: gen_mxgemm.py, variants fp8 and bf16), grown by the
// Bf16Operands path. One CTA computes a tileM x tileN fp32 tile. Path
// Fp8WgmmaPromote:
//
//   warpgroup 0 (producer, setmaxnreg decrease)      warpgroups 1.. (consumers)
//   for each K tile t, stage s = t % stages:         for each K tile t:
//     wait empty[s]                                    wait full[s]
//     thread 0: expect_tx full[s], TMA A and B         for each 32-block j of t:
//     all: E8M0 scale words -> f32 factors in smem       wgmma (scale-d = 0) -> P[j%2]
//     arrive full[s]                                     wait_group 1, pin P[(j-1)%2]
//                                                        acc = fma(P, fa*fb, acc)
//                                                      wait_group 0, arrive empty[s],
//                                                      promote the last block
//                                                    store acc (8-byte stores)
//
// Path Bf16Dequant (two producer warpgroups: one converts A, one B):
//
//   producers, for each K tile t:                    consumers, for each K tile t:
//     thread 0: refill stage of tile t+stages-1        wait dqfull[d]
//       (wait empty, expect_tx, TMA A and B)           8 bf16 wgmma m64n128k16
//     wait full[s], wait dqempty[d]                    wait_group 1, arrive
//     load the next tile's scale bytes                   dqempty of tile t-1
//     q -> bf16 q * 2^(s-127) into the swizzled       store acc
//       K-major bf16 tile d = t % dequantStages
//     fence.proxy.async, arrive dqfull[d], empty[s]
//
// Path Bf16Operands (the operands are bf16 values already, MXOperandKernel):
//
//   producer warpgroup, thread 0:                    consumers, for each K tile t:
//     for each K tile t, s = t % stages:               wait full[s]
//       wait empty[s], expect_tx, TMA A and B          4 bf16 wgmma m64n128k16
//       (64 bf16 = one 128B panel per row)             wait_group 1, arrive
//                                                        empty of tile t-1
//                                                      store acc (+ bias)
//
// Persistent (one CTA per SM, tiles from a counter; the producer hands
// their ids to the consumers through a ring of shared words) and, with
// `pingpong`, each consumer warpgroup computes every other tile whole (one
// wgmma per 64-row M step and k16 step), the two taking turns at the
// tensor cores by named barriers so that one's epilogue overlaps the
// other's mainloop (CUTLASS's ping-pong order).
//
// The dequantization is exact: the code's sign, exponent and mantissa bits
// are placed into a bf16 (a power-of-two multiple of the code's value), and
// one or two bf16 multiplications by powers of two give q * 2^(s-127). It
// stays exact while the result is a normal bf16, i.e. unless a block's
// scale byte is below about 10 (values under 2^-117; docs/numerics.md).
//
// Shared memory is one dynamic array aligned to 1024 bytes at run time:
//   fp8:  [A tiles][B tiles][A scale factors][B scale factors][mbarriers]
//   bf16: [A tiles][B tiles][A bf16 tiles][B bf16 tiles][counters][mbarriers]
// Partial tiles: TMA fills rows and columns outside the tensors with zeros,
// scale bytes outside them read as 127 (factor 1), and stores outside C
// are skipped.
//
// MLIR 22 pitfalls this code works around (the prototype's README has the
// evidence): tensor maps are passed as !llvm.ptr and cast in the body
// (gpu.func cannot take the nvgpu type); global buffers are !llvm.ptr<1>
// (bare-pointer memrefs must be static); dynamic smem is a public
// zero-size memref.global (gpu.dynamic_shared_memory becomes a 1-byte
// static array); barriers live in that array (nvgpu.mbarrier.create makes a
// static global); wgmma is nvvm.wgmma.mma_async with hand-built
// descriptors (nvgpu.warpgroup.mma always accumulates); its results are
// pinned after the wait with an empty side-effecting asm (LLVM would hoist
// their reads above it); no fp8 wgmma stays in flight across the loop
// back-edge (ptxas would serialize them, C7514); the first bf16 tile is
// peeled so no zero-initialized accumulator reaches a wgmma (C7520);
// setmaxnreg needs nvvm.maxntid and nvvm.minctasm = 1 (C7508).
//
//===----------------------------------------------------------------------===//
#include "MXGemmEmitter.h"
#include "moe/Conversion/MoeToNVGPU/LhsCodeLayout.h"
#include "moe/Conversion/MoeToNVGPU/MXRounding.h"
#include "moe/Dialect/Moe/Utils/MXBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gemm;

MemRefType gemm::smemType(ArrayRef<int64_t> shape, Type elementType) {
  return MemRefType::get(shape, elementType, MemRefLayoutAttrInterface(),
                         IntegerAttr::get(IntegerType::get(
                                              elementType.getContext(), 64),
                                          3));
}

int64_t moe::numTiles(const MXGemmProblem &p, const MXGemmConfig &cfg) {
  // (A block GEMM's transposed product: at most this many; the kernel
  // counts its pairs of blocks.)
  if (p.pairsBlocks())
    return (p.m + cfg.tileM - 1) / cfg.tileM * p.maxBlockPairs();
  return (p.m + cfg.tileM - 1) / cfg.tileM * ((p.n + cfg.tileN - 1) / cfg.tileN) *
         (p.kind == MXGemmKind::Expert ? p.numExperts : 1);
}

int64_t gemm::persistentCtas(const MXGemmProblem &p, const MXGemmConfig &cfg,
                             int64_t multiprocessors) {
  return std::min(numTiles(p, cfg), multiprocessors);
}

SmemLayout gemm::layoutOf(const MXGemmProblem &p, const MXGemmConfig &cfg) {
  MXMmaPath path = p.path;
  SmemLayout l = {};
  int64_t blocksPerTile = cfg.tileK / 32;
  l.a = 0;
  if (path == MXMmaPath::Bf16Operands) {
    // [stage][rows][128 B] bf16 panels, as the TMA writes them.
    // rhs_codes: the rhs's bf16 tiles are the converters' ring of
    // dequantStages tiles instead, then the TMA ring's codes and scale
    // bytes (the bf16 tiles first: they need 1024-byte alignment).
    // lhs_codes: the lhs stages hold tileK code bytes per row, and their
    // scale bytes follow the rhs tiles.
    int64_t bTiles = cfg.rhsCodes ? cfg.dequantStages : cfg.stages;
    int64_t rowBytesA = cfg.lhsCodes ? cfg.tileK : kSwizzleBytes;
    l.b = l.a + cfg.stages * cfg.tileM * rowBytesA;
    l.scaleA = l.scaleB = l.aDq = l.bDq = l.counters =
        l.b + bTiles * cfg.tileN * kSwizzleBytes;
    if (cfg.lhsCodes) {
      l.aScales = l.counters;
      l.scaleA = l.scaleB = l.aDq = l.bDq = l.counters =
          l.aScales + cfg.stages * cfg.tileM * (cfg.tileK / 32);
    }
    if (cfg.rhsCodes) {
      l.bCodes = l.counters;
      l.bScales = l.bCodes + cfg.stages * cfg.tileN * cfg.tileK;
      l.scaleA = l.scaleB = l.aDq = l.bDq = l.counters =
          l.bScales + cfg.stages * cfg.tileN * (cfg.tileK / 32);
    }
    // tma_store: the consumer warpgroups' chunk buffers (1024-aligned for
    // the 128B swizzle).
    if (cfg.tmaStore) {
      l.store = llvm::alignTo(l.counters, 1024);
      l.scaleA = l.scaleB = l.aDq = l.bDq = l.counters =
          l.store + cfg.consumerWarpgroups * cfg.tmaStore * cfg.mmaM *
                        cfg.storeRowBytes();
    }
    // Three i32 counters (the expert's first block, blocks and token K
    // tiles), or a persistent kernel's table of every expert's (Expert)
    // and its ring of tile ids.
    int64_t counterBytes =
        cfg.persistent
            ? p.expertTableBytes() + llvm::alignTo(4 * kTileSlots, 16)
            : 16;
    l.barriers = l.counters + llvm::alignTo(counterBytes, 16);
    // full[s], empty[s], then a persistent kernel's full and empty
    // barrier of each tile slot.
    l.numBarriers = 2 * cfg.stages + (cfg.persistent ? 2 * kTileSlots : 0);
    // rhs_codes: dequantized[d], the converters' arrivals, and
    // dequantEmpty[d] (dequantized + dequantStages + d), the consumers'.
    if (cfg.rhsCodes) {
      l.dequantized = l.numBarriers;
      l.numBarriers += 2 * cfg.dequantStages;
    }
    l.bytes = l.barriers + l.numBarriers * 8;
    if (p.epilogue.dGateUpAlongM) {
      l.columnAmax = llvm::alignTo(l.bytes, 16);
      l.bytes = l.columnAmax + 4 * 4 * cfg.consumerWarpgroups * 2 * cfg.tileN;
    }
    l.bytes += 1024;
    return l;
  }
  l.b = l.a + cfg.stages * cfg.tileM * cfg.tileK;
  l.scaleA = l.b + cfg.stages * cfg.tileN * cfg.tileK;
  if (path == MXMmaPath::BlockScale) {
    // [stage] 512-byte scale atoms of A (one: tileM = 128) and of B;
    // two i32 expert counters and the tensor-memory address.
    int64_t atomsB = (cfg.tileN + 127) / 128;
    l.scaleB = l.scaleA + cfg.stages * 512;
    l.aDq = l.bDq = l.counters = l.scaleB + cfg.stages * atomsB * 512;
    l.barriers = l.counters + 16;
    // full[s], empty[s], and the accumulator's "done".
    l.numBarriers = 2 * cfg.stages + 1;
    l.bytes = l.barriers + l.numBarriers * 8 + 1024;
    return l;
  }
  if (path == MXMmaPath::Fp8WgmmaPromote) {
    // [stage][block][row] f32.
    l.scaleB = l.scaleA + cfg.stages * blocksPerTile * cfg.tileM * 4;
    // [stage][block][lane quad][scaleTableStride] f32.
    l.aDq = l.bDq = l.counters =
        l.scaleB + cfg.stages * blocksPerTile * 4 * cfg.scaleTableStride * 4;
    l.barriers = l.counters;
    l.numBarriers = 2 * cfg.stages;
  } else {
    l.scaleB = l.aDq = l.scaleA;
    // bf16 tiles: two bytes per code.
    l.bDq = l.aDq + cfg.dequantStages * cfg.tileM * cfg.tileK * 2;
    l.counters = l.bDq + cfg.dequantStages * cfg.tileN * cfg.tileK * 2;
    // Two i32 counters (the expert's blocks), padded to 16 bytes.
    l.barriers = l.counters + 16;
    l.numBarriers = 2 * cfg.stages + 2 * cfg.dequantStages;
  }
  // Slack for aligning the base to 1024 bytes at run time.
  l.bytes = l.barriers + l.numBarriers * 8 + 1024;
  return l;
}

int64_t gemm::entryRegisters(const MXGemmConfig &cfg) {
  return (65536 / (cfg.threads() * cfg.ctasPerSM)) & ~int64_t(7);
}

int64_t gemm::exponentBias(Type elementType) {
  return isa<Float8E5M2Type>(elementType) ? 15 : 7;
}


Value KernelEmitter::e8m0ToF32(Value byte) {
  Value bits = select(eq(byte, 0), i32(0x00400000), shl(byte, 23));
  bits = select(eq(byte, 255), i32(0x7FC00000), bits);
  return arith::BitcastOp::create(b, loc, f32T, bits);
}

std::pair<Value, Value> KernelEmitter::stageAndParity(Value t, int64_t depth,
                                                      bool flip) {
  Value stage = remu(t, depth);
  Value parity = andi(indexToI32(divu(t, depth)), 1);
  if (flip)
    parity = xori(parity, i32(1));
  return {stage, arith::TruncIOp::create(b, loc, i1T, parity)};
}

Value KernelEmitter::matrixDescriptor(Value addr, int64_t leadingBytes) {
  uint64_t hi = (uint64_t(leadingBytes >> 4) << 16) |
                (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
  Value lo = shru(andi(addr, 0x3FFFF), 4);
  return arith::OrIOp::create(b, loc, lo, i64(static_cast<int64_t>(hi)));
}

Value KernelEmitter::pinRegisters(Value st) {
  SmallVector<Value> regs;
  std::string constraints;
  for (int64_t i = 0; i < accLen(); ++i) {
    regs.push_back(extract(st, i));
    constraints += i ? ",=f" : "=f";
  }
  for (int64_t i = 0; i < accLen(); ++i)
    constraints += "," + std::to_string(i);
  return inlinePtx(accT, regs, /*text=*/"", constraints,
                   /*sideEffects=*/true);
}

Value KernelEmitter::inlinePtx(Type result, ValueRange operands,
                               StringRef text, StringRef constraints,
                               bool sideEffects) {
  auto dialect =
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT);
  auto op = LLVM::InlineAsmOp::create(
      b, loc, result ? TypeRange(result) : TypeRange(), operands, text,
      constraints, sideEffects, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None, dialect,
      /*operand_attrs=*/ArrayAttr());
  return result ? op.getResult(0) : Value();
}

void KernelEmitter::loadTile(Value t, Value s) {
  // Tiles are one 128-byte row per operand row: tileK codes or bf16s
  // (rhs_codes: tileK code bytes per rhs row).
  // (lhs_codes: tileK code bytes per lhs row.)
  int64_t rowBytesB = cfg.tileK * elementBytes();
  int64_t rowBytes = cfg.lhsCodes ? cfg.tileK : rowBytesB;
  if (cfg.rhsCodes)
    rowBytesB = cfg.tileK;
  int64_t scaleBytes = cfg.rhsCodes ? cfg.tileN * (cfg.tileK / 32) : 0;
  int64_t scaleBytesA = cfg.lhsCodes ? cfg.tileM * (cfg.tileK / 32) : 0;
  // (lhs_gather, round_lhs, round_rhs, rhs_gather: those rows arrive by
  // cp.async, which full[s] counts as arrivals, not bytes.)
  int64_t tileBytes = (lhsCopied() ? 0 : cfg.tileM * rowBytes) +
                      (rhsCopied() ? 0 : cfg.tileN * rowBytesB) + scaleBytes +
                      scaleBytesA;
  nvgpu::MBarrierArriveExpectTxOp::create(b, loc, bars, idx(tileBytes), s,
                                          /*predicate=*/Value());
  // The tensor maps are over bytes: the K coordinate is a byte offset.
  Value kElement = add(kBegin, mul(t, cfg.tileK));
  Value kkB = mul(kElement, elementBytes());
  Value kk = cfg.lhsCodes ? kElement : kkB;
  if (cfg.rhsCodes)
    kkB = kElement;
  Value stageA = add(add(alignPad, mul(s, cfg.tileM * rowBytes)), lay.a);
  Value stageB = add(add(alignPad, mul(s, cfg.tileN * rowBytesB)),
                     cfg.rhsCodes ? lay.bCodes : lay.b);
  // A cluster pair shares the lhs tile: the first CTA loads it into both
  // (multicast, each CTA's full barrier counting its bytes), the other
  // none.
  Value maskA, predA;
  if (cfg.clusterN > 1) {
    maskA = cst(b.getI16Type(), (1 << cfg.clusterN) - 1);
    predA = isClusterLeader;
  }
  // Coordinates innermost first: [k, row]. An M- or N-major operand's rows
  // are K: box h holds columns 64 h .. 64 h + 63 of the tile (bytes 128 h
  // on) of its tileK rows, which start at row `kRow0` + k.
  auto loadMajor = [&](Value stage, Value tmap, MemRefType tileT,
                       Value col0, Value kRow0, int64_t columns, Value mask,
                       Value pred) {
    Value row = add(kRow0, add(kBegin, mul(t, cfg.tileK)));
    for (int64_t h = 0; h < columns / 64; ++h) {
      Value at = add(stage, h * cfg.tileK * kSwizzleBytes);
      Value view = memref::ViewOp::create(b, loc, tileT, smem, at, {});
      Value col = i32ToIndex(mul(add(col0, 64 * h), elementBytes()));
      nvgpu::TmaAsyncLoadOp::create(b, loc, view, bars, tmap,
                                    ValueRange{col, row}, s, mask, pred);
    }
  };
  // (pairsBlocks: the lhs is the weight of the tile's expert, from its
  // first K row (M-major) or its row m0 (K-major): rowA0.)
  if (lhsCopied()) {
    // (copySlotRows or gatherLhsStage copies the lhs.)
  } else if (cfg.lhsMMajor) {
    loadMajor(stageA, tmapA, tileAT, m0, rowA0 ? i32ToIndex(rowA0) : idx(0),
              cfg.tileM, maskA, predA);
  } else {
    Value va = memref::ViewOp::create(b, loc, tileAT, smem, stageA, {});
    nvgpu::TmaAsyncLoadOp::create(
        b, loc, va, bars, tmapA, ValueRange{kk, i32ToIndex(rowA0 ? rowA0 : m0)},
        s, maskA, predA);
  }
  if (cfg.lhsCodes) {
    // The scale bytes of K tile kt of rows m0 .. m0 + tileM - 1: 16-byte
    // rows of 8 lhs rows each, K tile after K tile.
    Value kt = divu(indexToI32(kElement), cfg.tileK);
    Value row = divu(add(mul(kt, i32(p.m)), m0), 8);
    Value at = add(add(alignPad, mul(s, scaleBytesA)), lay.aScales);
    Value vs = memref::ViewOp::create(b, loc, tileSAT, smem, at, {});
    nvgpu::TmaAsyncLoadOp::create(b, loc, vs, bars, tmapSA,
                                  ValueRange{idx(0), i32ToIndex(row)}, s,
                                  /*multicastMask=*/Value(),
                                  /*predicate=*/Value());
  }
  if (cfg.rhsCodes) {
    // The scale bytes of K tile kt of rows rowB0 .. rowB0 + tileN - 1:
    // 16-byte rows of 8 rhs rows each, K tile after K tile.
    Value kt = divu(indexToI32(kElement), cfg.tileK);
    Value row = divu(add(mul(kt, i32(rowsB())), rowB0), 8);
    Value at = add(add(alignPad, mul(s, scaleBytes)), lay.bScales);
    Value vs = memref::ViewOp::create(b, loc, tileST, smem, at, {});
    nvgpu::TmaAsyncLoadOp::create(b, loc, vs, bars, tmapS,
                                  ValueRange{idx(0), i32ToIndex(row)}, s,
                                  /*multicastMask=*/Value(),
                                  /*predicate=*/Value());
  }
  // (rhs_gather: gatherRhsStage copies the rhs.)
  if (cfg.rhsGather)
    return;
  if (!cfg.rhsNMajor) {
    Value vb = memref::ViewOp::create(b, loc, tileBT, smem, stageB, {});
    nvgpu::TmaAsyncLoadOp::create(b, loc, vb, bars, tmapB,
                                  ValueRange{kkB, i32ToIndex(rowB0)}, s,
                                  /*multicastMask=*/Value(),
                                  /*predicate=*/Value());
    return;
  }
  // N-major: the expert's K rows (rowB0) of the tile's N columns.
  // (round_rhs: copySlotRows copies them.)
  if (cfg.roundRhs)
    return;
  loadMajor(stageB, tmapB, tileBT, n0, i32ToIndex(rowB0), cfg.tileN,
            /*mask=*/Value(), /*pred=*/Value());
}

void KernelEmitter::loadGatherTokens() {
  // Rows tid / L + (threads / L) i of the tile (m0 is a multiple of its
  // rows, which lie in one block of slots).
  int64_t rowStep = gatherRowStep();
  Value row0 = divu(tid, kGatherLanesPerRow);
  gatherTokens.clear();
  for (int64_t i = 0; i < gatherRowsPerThread(); ++i) {
    Value slot = add(add(m0, row0), i * rowStep);
    gatherTokens.push_back(
        loadGlobal(i32T, globalElement(i32T, tokens, toI64(slot)), 4));
  }
}

void KernelEmitter::gatherLhsStage(Value t, Value s) {
  copyTokenRows(t, s, lay.a, cfg.tileM, gatherTokens, lhsRows, p.lhsGatherRows);
}

SmallVector<Value> KernelEmitter::loadRhsTokens() {
  // Rows tid / L + (threads / L) i of the tile's two blocks of slots from
  // n0; the second block's are padding when it is another expert's.
  int64_t rowStep = gatherRowStep();
  Value row0 = divu(tid, kGatherLanesPerRow);
  SmallVector<Value> ids;
  for (int64_t i = 0; i < cfg.tileN / rowStep; ++i) {
    Value slot = add(add(n0, row0), i * rowStep);
    // (Clamped: a last block's pair reads within the slots.)
    bool second = i * rowStep >= p.blockSize;
    if (second)
      slot = arith::MinUIOp::create(b, loc, slot, i32(p.n - 1));
    Value token = loadGlobal(i32T, globalElement(i32T, tokens, toI64(slot)), 4);
    if (second)
      token = select(secondBlock, token, i32(-1));
    ids.push_back(token);
  }
  return ids;
}

void KernelEmitter::gatherRhsStage(Value t, Value s) {
  copyTokenRows(t, s, lay.b, cfg.tileN, rhsTokens, rhsRows, p.rhsGatherRows);
}

void KernelEmitter::copyTokenRows(Value t, Value s, int64_t region,
                                  int64_t tileRows, ArrayRef<Value> tokens,
                                  Value rows, int64_t sourceRows) {
  int64_t L = kGatherLanesPerRow, chunks = kSwizzleBytes / 16;
  int64_t rowStep = gatherRowStep();
  Value lane = remu(tid, L);
  Value row0 = divu(tid, L);
  // The 128B swizzle moves chunk c of row r to chunk c ^ (r % 8) of the
  // row (the stage is 1024-byte aligned); the thread's rows share r % 8.
  Value rowPhase = remu(row0, 8);
  Value stage = add(mul(indexToI64(s), tileRows * kSwizzleBytes), region);
  Value rowAt = add(stage, mul(toI64(row0), kSwizzleBytes));
  // Byte offset of the thread's first chunk in a token row: K tile t's
  // 128 bytes.
  Value kByte = mul(indexToI64(add(kBegin, mul(t, cfg.tileK))),
                    elementBytes());
  Value col = add(kByte, mul(toI64(lane), 16));
  int64_t rowBytes = p.k * elementBytes();
  // The K tile's chunk of row 0; each row's offset from it is loop
  // invariant, and 32 bits wide where the token rows allow, so that the
  // thread's 8 rows cost few registers beside the ring's state (with 64-bit
  // row addresses and 40 producer registers the recompute GEMM spilled 8
  // bytes, ptxas -v; kLhsGatherProducerRegisters).
  Value chunk0 = globalElement(b.getI8Type(), rows, col);
  bool narrow = sourceRows * rowBytes < (int64_t(1) << 31);
  for (auto [i, token] : llvm::enumerate(tokens)) {
    Value isToken = cmp(arith::CmpIPredicate::sge, token, i32(0));
    // A padding slot copies 0 source bytes (16 zeros) from row 0.
    Value row = arith::SelectOp::create(b, loc, isToken, token, i32(0));
    Value srcBytes = arith::SelectOp::create(b, loc, isToken, i32(16), i32(0));
    Value rowOffset =
        narrow ? toI64(mul(row, i32(rowBytes))) : mul(toI64(row), rowBytes);
    Value rowChunk0 = globalElement(b.getI8Type(), chunk0, rowOffset);
    for (int64_t j = 0; j < chunks / L; ++j) {
      Value chunk = add(lane, i32(j * L));
      Value at = add(add(rowAt, int64_t(i) * rowStep * kSwizzleBytes),
                     mul(toI64(xori(chunk, rowPhase)), 16));
      Value src = j ? globalElement(b.getI8Type(), rowChunk0, i64(j * L * 16))
                    : rowChunk0;
      NVVM::CpAsyncOp::create(b, loc, smemPtr(smemAddr(at)), src,
                              /*size=*/16u, NVVM::LoadCacheModifierKind::CG,
                              srcBytes);
    }
  }
  Value full = smemPtr(smemAddr(add(mul(indexToI64(s), 8), lay.barriers)));
  NVVM::CpAsyncMBarrierArriveOp::create(b, loc, full, /*noinc=*/true);
}

SmallVector<Value> KernelEmitter::loadSlotTokens(Value t) {
  // Rows tid / 8 + 16 i of the K tile; a tile past the contraction (the
  // lookahead's, or an expert without tiles) reads within the slots.
  Value row0 = divu(tid, kGatherLanesPerRow);
  Value first = add(kBegin, mul(t, idx(cfg.tileK)));
  SmallVector<Value> ids;
  for (int64_t i = 0; i < cfg.tileK / gatherRowStep(); ++i) {
    Value slot = add(indexToI32(first), add(row0, i32(i * gatherRowStep())));
    slot = arith::MinUIOp::create(b, loc, slot, i32(p.k - 1));
    ids.push_back(loadGlobal(i32T, globalElement(i32T, tokens, toI64(slot)), 4));
  }
  return ids;
}

void KernelEmitter::copySlotRows(Value s, ArrayRef<Value> slotTokens) {
  int64_t L = kGatherLanesPerRow, rowStep = gatherRowStep();
  Value lane = remu(tid, L);
  Value row0 = divu(tid, L);
  // The 128B swizzle moves chunk c of row r to chunk c ^ (r % 8); the
  // thread's rows share r % 8.
  Value chunkAt = mul(toI64(xori(lane, remu(row0, 8))), 16);
  Value rowAt = mul(toI64(row0), kSwizzleBytes);
  Value s64 = indexToI64(s);
  auto copy = [&](Value rows, int64_t columns, Value col0, int64_t tileColumns,
                  int64_t region) {
    Value stage = add(add(mul(s64, tileColumns * kSwizzleBytes), region),
                      add(rowAt, chunkAt));
    // Box h holds columns col0 + 64 h .. + 63: the thread's chunk of each.
    for (int64_t h = 0; h < tileColumns / 64; ++h) {
      Value col = add(add(col0, i32(64 * h)), mul(lane, 8));
      Value inside = cmp(arith::CmpIPredicate::ult, col, i32(columns));
      for (size_t i = 0; i < slotTokens.size(); ++i) {
        Value token = slotTokens[i];
        Value copies = andi(inside, cmp(arith::CmpIPredicate::sge, token,
                                        i32(0)));
        // A padding slot or a chunk past the row copies 0 source bytes
        // (16 zeros) from the first row.
        Value row = select(copies, token, i32(0));
        Value at = add(mul(toI64(row), columns * 2),
                       mul(toI64(select(copies, col, i32(0))), 2));
        Value src = globalElement(b.getI8Type(), rows, at);
        Value dst = add(stage, (h * cfg.tileK + int64_t(i) * rowStep) *
                                   kSwizzleBytes);
        NVVM::CpAsyncOp::create(b, loc, smemPtr(smemAddr(dst)), src,
                                /*size=*/16u, NVVM::LoadCacheModifierKind::CG,
                                select(copies, i32(16), i32(0)));
      }
    }
  };
  if (cfg.roundLhs)
    copy(lhsRows, p.m, m0, cfg.tileM, lay.a);
  if (cfg.roundRhs)
    copy(rhsRows, p.n, n0, cfg.tileN, lay.b);
}

Value KernelEmitter::encodeWordLanes(Value word, Value inverse0,
                                     Value inverse1, Type codeType) {
  // The bf16 halves widened exactly (their bits in the f32's top half).
  Value x0 = arith::BitcastOp::create(b, loc, f32T, shl(word, 16)).getResult();
  Value x1 =
      arith::BitcastOp::create(b, loc, f32T, andi(word, -65536)).getResult();
  Value codes = buildEncodePair(b, loc, x0, x1, inverse0, inverse1, codeType);
  Value pair = arith::ExtUIOp::create(
      b, loc, i32T, LLVM::BitcastOp::create(b, loc, b.getI16Type(), codes));
  // Code 0 into the high byte of lane 0, code 1 of lane 1.
  return inlinePtx(i32T, pair, "prmt.b32 $0, $1, 0, 0x1404;", "=r,r",
                   /*sideEffects=*/false);
}

void KernelEmitter::roundSlotBlocks(Value stage, int64_t columns,
                                    MXQuantAttr quant) {
  MLIRContext *ctx = b.getContext();
  Type codeType = getMXElementType(ctx, quant.getElement());
  int64_t pairs = columns / 2, blocks = cfg.tileK / 32;
  // RCEIL blocks round on the bits (mxRoundPairBits) unless one of the
  // warp's does not fit (mxBitsBlockFits); that warp converts.
  bool bitRounding = hasMXBitRounding(quant.getRule());
  for (int64_t i = 0; i < pairs * blocks / 128; ++i) {
    Value unit = add(tid, i32(128 * i));
    Value pair = remu(unit, pairs);
    Value block = divu(unit, pairs);
    // Column pair `pair` is word pair % 32 of the 128-byte rows of box
    // pair / 32: chunk (pair % 32) / 4, byte 4 (pair % 4) of the chunk.
    Value inBox = remu(pair, 32);
    Value chunk = divu(inBox, 4);
    Value base =
        add(stage, add(mul(toI64(divu(pair, 32)), cfg.tileK * kSwizzleBytes),
                       add(mul(toI64(block), 32 * kSwizzleBytes),
                           mul(toI64(remu(inBox, 4)), 4))));
    // Row 32 block + j, whose swizzle phase is j % 8.
    auto wordAt = [&](int64_t j) {
      Value chunkJ = mul(toI64(xori(chunk, i32(j % 8))), 16);
      return smemPtr(smemAddr(add(base, add(chunkJ, i64(j * kSwizzleBytes)))));
    };
    // Two passes over the block's 32 words, the amaxes first: the words
    // are read twice from shared memory rather than held (with them and
    // their halves live, the 64 producer registers spilled 1.3 KB, ptxas
    // -v). The amaxes of both columns at once (buildPairAmax).
    Value packed = buildPackedAmax(b, loc, 32, [&](int64_t j) -> Value {
      return LLVM::LoadOp::create(b, loc, i32T, wordAt(j), 4);
    });
    // In batches of `batch` words (kRoundBatch, kRoundBitsBatch), each
    // batch's loads before its stores: ptxas cannot tell the swizzled
    // addresses apart, so a load after a store waits for it (word by word,
    // the rounding of a stage took about 7000 cycles, four times the MMAs',
    // H200 2026-12-04).
    auto roundWords = [&](function_ref<Value(Value)> round, int64_t batch) {
      SmallVector<Value> words;
      for (int64_t j = 0; j < 32; ++j) {
        if (j % batch == 0)
          for (int64_t k = j; k < j + batch; ++k)
            words.push_back(LLVM::LoadOp::create(b, loc, i32T, wordAt(k), 4));
        LLVM::StoreOp::create(b, loc, round(words[j]), wordAt(j), 4);
      }
    };
    auto convert = [&]() {
      auto [amax0, amax1] = widenPackedAmax(b, loc, packed);
      Value amax[2] = {amax0, amax1}, scaleBytes[2], inverses[2];
      for (int64_t q = 0; q < 2; ++q) {
        scaleBytes[q] = buildScaleByte(b, loc, amax[q], quant.getElement(),
                                       quant.getRule());
        inverses[q] = buildInverseScale(b, loc, scaleBytes[q]);
      }
      // The codes decode into bf16 lanes by their bits times 2^(s - 127) in
      // one or two bf16 multiplies (decodeCodeLanes, the rhs_codes decode):
      // the exact values buildDecodePairToBf16 gives, without the conversion
      // pipe's f16 and f32 round trips. Each lane takes its column's factors.
      SmallVector<Value> factors[2];
      for (int64_t q = 0; q < 2; ++q)
        factors[q] =
            bf16Factors(arith::ExtUIOp::create(b, loc, i32T, scaleBytes[q]),
                        /*twoFactors=*/true, codeType);
      SmallVector<Value> laneFactors;
      for (int64_t f = 0; f < 2; ++f)
        laneFactors.push_back(
            ori(andi(factors[0][f], 0xFFFF), andi(factors[1][f], -65536)));
      roundWords(
          [&](Value word) {
            Value lanes =
                encodeWordLanes(word, inverses[0], inverses[1], codeType);
            return decodeCodeLanes(lanes, laneFactors, codeType);
          },
          kRoundBatch);
    };
    if (!bitRounding) {
      convert();
      continue;
    }
    auto ifOp = scf::IfOp::create(
        b, loc, TypeRange(),
        buildWarpMXBitsMisfit(b, loc, packed, quant.getElement()),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    convert();
    b.setInsertionPointToStart(ifOp.elseBlock());
    // Each lane is its own column's block.
    Value bound = buildMXThresholdPair(b, loc, packed, quant.getElement());
    roundWords(
        [&](Value word) {
          return buildMXRoundPairBits(b, loc, word, bound,
                                      quant.getElement());
        },
        kRoundBitsBatch);
  }
}

void KernelEmitter::roundStage(Value s) {
  Value s64 = indexToI64(s);
  roundSlotBlocks(add(mul(s64, cfg.tileN * kSwizzleBytes), lay.b), cfg.tileN,
                  p.roundRhs);
}

void KernelEmitter::emitRoundingStages(bool tma) {
  // round_lhs alone: the consumers round, and each thread's copies arrive
  // on full[s] when they land (lhs_gather's arrival), with no lookahead.
  bool rounds = cfg.roundRhs;
  int64_t L = rounds ? kRoundLookahead : 0;
  OpBuilder::InsertionGuard guard(b);
  auto loop = scf::ForOp::create(b, loc, idx(0), add(kTiles, idx(L)), idx(1),
                                 loadSlotTokens(idx(0)));
  b.setInsertionPointToStart(loop.getBody());
  Value i = loop.getInductionVar();
  SmallVector<Value> slotTokens(loop.getRegionIterArgs());
  // The ring position of K tile t (after the earlier output tiles').
  auto position = [&](Value t) { return ringBase ? add(ringBase, t) : t; };
  {
    // K tile i into its stage once the consumers have freed it.
    OpBuilder::InsertionGuard inner(b);
    auto copies = scf::IfOp::create(
        b, loc, cmp(arith::CmpIPredicate::ult, i, kTiles), false);
    b.setInsertionPointToStart(copies.thenBlock());
    auto [s, parity] = stageAndParity(position(i), cfg.stages, /*flip=*/true);
    waitParity(add(s, cfg.stages), parity);
    if (tma)
      loadTile(i, s);
    copySlotRows(s, slotTokens);
    if (!rounds) {
      Value full = smemPtr(smemAddr(add(mul(indexToI64(s), 8), lay.barriers)));
      NVVM::CpAsyncMBarrierArriveOp::create(b, loc, full, /*noinc=*/true);
    }
  }
  // One group per iteration (empty past the last K tile), so that the
  // wait below counts K tiles.
  if (rounds)
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
  SmallVector<Value> next = loadSlotTokens(add(i, idx(1)));
  if (!rounds) {
    scf::YieldOp::create(b, loc, next);
    return;
  }
  {
    // K tile i - L: this thread's copies have landed (at most L groups
    // pending), then the warpgroup's (its named barrier); rounded, it is
    // handed to the async proxy of the wgmmas and to the consumers.
    OpBuilder::InsertionGuard inner(b);
    auto rounds = scf::IfOp::create(
        b, loc, cmp(arith::CmpIPredicate::uge, i, idx(L)), false);
    b.setInsertionPointToStart(rounds.thenBlock());
    Value s =
        stageAndParity(position(sub(i, idx(L))), cfg.stages, /*flip=*/false)
            .first;
    NVVM::CpAsyncWaitGroupOp::create(b, loc, L);
    // barrier.sync without .aligned: thread 0 reaches it from its own loop
    // (it publishes the tiles), the rest of warp 0 from theirs, and bar.sync
    // (barrier.sync.aligned) needs a warp's threads at one instruction (it
    // hung, H200 2026-12-04).
    std::string sync = ("barrier.sync " + Twine(kProducerBarrier) + ", " +
                        Twine(128 * cfg.producerWarpgroups) + ";")
                           .str();
    inlinePtx(Type(), ValueRange(), sync, "~{memory}", /*sideEffects=*/true);
    roundStage(s);
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
    arrive(s);
  }
  scf::YieldOp::create(b, loc, next);
}

void KernelEmitter::onLeader(Value leader, function_ref<void()> body) {
  OpBuilder::InsertionGuard g(b);
  auto leaderIf = scf::IfOp::create(b, loc, leader, /*withElseRegion=*/false);
  b.setInsertionPointToStart(leaderIf.thenBlock());
  body();
}

void KernelEmitter::releaseStage(Value stage, Value leader) {
  // round_lhs: every consumer thread read the stage's lhs rows itself
  // (ldmatrix), so each one releases it after its reads, ordered before
  // the producer's copies into it by the barrier itself (not only through
  // the warpgroup's wgmmas, which compute-sanitizer racecheck cannot see).
  if (cfg.roundLhs)
    return arrive(stage);
  onLeader(leader, [&] {
    arrive(stage);
    if (cfg.clusterN == 1)
      return;
    // The first CTA of the pair refills this stage of both CTAs (its lhs
    // tile): its empty barrier counts this CTA's consumers too.
    // (One value per statement: the same op order from every compiler.)
    Value yes = cst(i1T, 1);
    Value second = arith::XOrIOp::create(b, loc, isClusterLeader, yes);
    auto ifOp = scf::IfOp::create(b, loc, second, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value offset = mul(indexToI64(stage), 8);
    Value local = smemPtr(smemAddr(add(offset, lay.barriers)));
    Value rank0 = i32(0);
    Value remote = NVVM::MapaOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext(), 7), local, rank0);
    NVVM::MBarrierArriveOp::create(b, loc, /*res=*/Type(), remote,
                                   /*count=*/Value(),
                                   NVVM::MemScopeKind::CLUSTER);
  });
}

void KernelEmitter::releaseDequantized(Value g, Value leader) {
  if (!cfg.rhsCodes)
    return;
  int64_t D = cfg.dequantStages;
  releaseStage(add(remu(g, D), lay.dequantized + D), leader);
}

void KernelEmitter::syncCluster() {
  NVVM::ClusterArriveOp::create(b, loc, /*aligned=*/UnitAttr());
  NVVM::ClusterWaitOp::create(b, loc, /*aligned=*/UnitAttr());
}

Value KernelEmitter::tokenTiles(Value block) {
  Value count = i32(0);
  for (int64_t j = 0; j < p.blockSize / cfg.tileK; ++j) {
    Value slot = add(mul(block, p.blockSize), j * cfg.tileK);
    Value token = loadGlobal(i32T, globalElement(i32T, tokens, slot), 4);
    count = add(count, arith::ExtUIOp::create(
                           b, loc, i32T,
                           cmp(arith::CmpIPredicate::sge, token, i32(0))));
  }
  return count;
}

void KernelEmitter::emitContractionRange() {
  if (p.kind == MXGemmKind::Block) {
    kBegin = idx(0);
    kTiles = idx((p.k + cfg.tileK - 1) / cfg.tileK);
    if (p.skipPadding) {
      // The tile's rows lie in one block (tileM divides B): if its first
      // slot is padding, so are the rest.
      // (One value per statement: the same op order from every compiler.)
      Value token = loadGlobal(i32T, globalElement(i32T, tokens, toI64(m0)), 4);
      Value none = idx(0);
      Value padding = cmp(arith::CmpIPredicate::slt, token, i32(0));
      kTiles = arith::SelectOp::create(b, loc, padding, none, kTiles);
    }
    return;
  }
  // Blocks come grouped by expert in increasing order (the runtime checks
  // the routing before a launch), so the grid's expert owns the blocks
  // [#blocks of lower experts, + #its blocks). Every thread counts a strided
  // share; shared-memory integer atomics sum the shares, so the result does
  // not depend on their order.
  // The grid's z is the expert.
  expertId = indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::z));
  Value expert = expertId;
  // (blocks below, own blocks, own K tiles that start at a token)
  auto loop = scf::ForOp::create(b, loc, i32ToIndex(tid), idx(p.numBlocks),
                                 idx(cfg.threads()),
                                 ValueRange{i32(0), i32(0), i32(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value block = indexToI64(loop.getInductionVar());
    Value owner =
        loadGlobal(i32T, globalElement(i32T, blockToExpert, block), 4);
    Value below = arith::ExtUIOp::create(
        b, loc, i32T, cmp(arith::CmpIPredicate::ult, owner, expert));
    Value isOwn = cmp(arith::CmpIPredicate::eq, owner, expert);
    Value own = arith::ExtUIOp::create(b, loc, i32T, isOwn);
    Value ownTiles = loop.getRegionIterArg(2);
    if (p.skipPadding) {
      auto ifOp = scf::IfOp::create(b, loc, i32T, isOwn,
                                    /*withElseRegion=*/true);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(b, loc, add(ownTiles, tokenTiles(block)));
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, ownTiles);
      b.setInsertionPointAfter(ifOp);
      ownTiles = ifOp.getResult(0);
    }
    scf::YieldOp::create(b, loc,
                         ValueRange{add(loop.getRegionIterArg(0), below),
                                    add(loop.getRegionIterArg(1), own),
                                    ownTiles});
  }
  Value counters[3];
  for (int64_t c = 0; c < numExpertCounters(); ++c)
    counters[c] = smemPtr(smemAddr(i64(lay.counters + 4 * c)));
  for (int64_t c = 0; c < numExpertCounters(); ++c)
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, counters[c],
                              loop.getResult(c),
                              LLVM::AtomicOrdering::monotonic);
  gpu::BarrierOp::create(b, loc);
  Value firstBlock = LLVM::LoadOp::create(b, loc, i32T, counters[0], 4);
  kBegin = i32ToIndex(mul(firstBlock, p.blockSize));
  if (p.skipPadding) {
    kTiles = i32ToIndex(LLVM::LoadOp::create(b, loc, i32T, counters[2], 4));
    return;
  }
  Value blocks = LLVM::LoadOp::create(b, loc, i32T, counters[1], 4);
  kTiles = i32ToIndex(mul(blocks, p.blockSize / cfg.tileK));
}

Value KernelEmitter::resultBase() {
  if (p.kind != MXGemmKind::Expert)
    return result;
  return globalElement(f32T, result, mul(toI64(expertId), p.m * p.n));
}

void KernelEmitter::forStrided(int64_t count,
                               function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, i32ToIndex(tid), idx(count),
                                 idx(cfg.threads()));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
}

void KernelEmitter::forOwnedBlocks(function_ref<void(Value, Value)> body) {
  // Blocks come grouped by expert in increasing order (the runtime checks
  // the routing before a launch); an owner outside [0, E) counts nowhere.
  forStrided(p.numBlocks, [&](Value block) {
    Value owner = loadGlobal(
        i32T, globalElement(i32T, blockToExpert, indexToI64(block)), 4);
    Value valid = cmp(arith::CmpIPredicate::ult, owner, p.numExperts);
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body(block, owner);
  });
}

void KernelEmitter::emitExpertTable() {
  // counts[e] at counters + 4 e, first[e] at counters + 4 (E + e), and
  // with skipPadding the K tiles that start at a token at counters +
  // 4 (2 E + e).
  int64_t E = p.numExperts;
  auto entry = [&](int64_t table, Value e) {
    return smemPtr(smemAddr(add(i64(lay.counters + 4 * table * E),
                                mul(indexToI64(e), 4))));
  };
  forStrided(E, [&](Value e) {
    LLVM::StoreOp::create(b, loc, i32(0), entry(0, e), 4);
    if (p.skipPadding)
      LLVM::StoreOp::create(b, loc, i32(0), entry(2, e), 4);
  });
  gpu::BarrierOp::create(b, loc);
  forOwnedBlocks([&](Value block, Value owner) {
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                              entry(0, i32ToIndex(owner)), i32(1),
                              LLVM::AtomicOrdering::monotonic);
    if (p.skipPadding) {
      Value tiles = tokenTiles(indexToI64(block));
      Value at = entry(2, i32ToIndex(owner));
      LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, at, tiles,
                                LLVM::AtomicOrdering::monotonic);
    }
  });
  gpu::BarrierOp::create(b, loc);
  forStrided(E, [&](Value e) {
    auto sum = scf::ForOp::create(b, loc, idx(0), e, idx(1),
                                  ValueRange{i32(0)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(sum.getBody());
      Value count =
          LLVM::LoadOp::create(b, loc, i32T, entry(0, sum.getInductionVar()), 4);
      scf::YieldOp::create(b, loc, add(sum.getRegionIterArg(0), count));
    }
    LLVM::StoreOp::create(b, loc, sum.getResult(0), entry(1, e), 4);
  });
  gpu::BarrierOp::create(b, loc);
}

void KernelEmitter::emitPairTable() {
  int64_t E = p.numExperts;
  // Each expert's blocks, counted in the tma_store buffers (no epilogue
  // has used them yet).
  auto count = [&](Value e) {
    return smemPtr(smemAddr(add(mul(indexToI64(e), 4), lay.store)));
  };
  forStrided(E,
          [&](Value e) { LLVM::StoreOp::create(b, loc, i32(0), count(e), 4); });
  gpu::BarrierOp::create(b, loc);
  forOwnedBlocks([&](Value block, Value owner) {
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                              count(i32ToIndex(owner)), i32(1),
                              LLVM::AtomicOrdering::monotonic);
  });
  gpu::BarrierOp::create(b, loc);
  // Entry e (e = E: the totals): the blocks and the pairs of the experts
  // below e (each expert's blocks in pairs, an odd last one alone), 16
  // bits each (fitsMXGemm: fewer than 2^16 blocks).
  forStrided(E + 1, [&](Value e) {
    auto sum = scf::ForOp::create(b, loc, idx(0), e, idx(1),
                                  ValueRange{i32(0), i32(0)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(sum.getBody());
      Value blocks =
          LLVM::LoadOp::create(b, loc, i32T, count(sum.getInductionVar()), 4);
      Value pairs = divu(add(blocks, 1), 2);
      scf::YieldOp::create(b, loc,
                           ValueRange{add(sum.getRegionIterArg(0), blocks),
                                      add(sum.getRegionIterArg(1), pairs)});
    }
    Value word = ori(sum.getResult(0), shl(sum.getResult(1), 16));
    Value at = smemPtr(smemAddr(add(mul(indexToI64(e), 4), lay.counters)));
    LLVM::StoreOp::create(b, loc, word, at, 4);
  });
  gpu::BarrierOp::create(b, loc);
}

void KernelEmitter::setTileOrigin(Value t) {
  int64_t tilesN = (p.n + cfg.tileN - 1) / cfg.tileN;
  int64_t tilesM = (p.m + cfg.tileM - 1) / cfg.tileM;
  std::tie(m0, n0) = rasterTile(IROps{*this}, t, tilesM, tilesN, cfg.rasterM,
                                cfg.tileM, cfg.tileN);
}

bool moe::rasterIndexingAgrees() {
  IntOps o;
  // Every order is a permutation of the tiles. rasterM = 1 is N fastest,
  // row of tiles after row. Otherwise the positions of each band are its
  // (up to) rasterM M tiles times every N tile, and the next position
  // within a band is the next M tile of the same N tile, or the first M
  // tile of the band and the next N tile.
  for (int64_t tilesM : {1, 5, 8, 13, 64})
    for (int64_t tilesN : {1, 3, 16})
      for (int64_t rasterM : {1, 2, 4, 8, 16}) {
        std::vector<int> seen(tilesM * tilesN, 0);
        int64_t prevM = -1, prevN = -1;
        for (int64_t t = 0; t < tilesM * tilesN; ++t) {
          auto [m, n] = rasterTile(o, t, tilesM, tilesN, rasterM);
          if (m < 0 || m >= tilesM || n < 0 || n >= tilesN ||
              seen[m * tilesN + n]++)
            return false;
          int64_t first = t / (rasterM * tilesN) * rasterM;
          bool bandStart = t % (rasterM * tilesN) == 0;
          bool next = rasterM == 1
                          ? m == t / tilesN && n == t % tilesN
                      : bandStart
                          ? m == first && n == 0
                          : (m == prevM + 1 && n == prevN) ||
                                (m == first && n == prevN + 1);
          if (!next || m < first || m >= first + rasterM)
            return false;
          prevM = m;
          prevN = n;
        }
      }
  return true;
}

void KernelEmitter::decodeTile(Value w) {
  if (p.pairsBlocks())
    return decodePairTile(w);
  int64_t tilesN = (p.n + cfg.tileN - 1) / cfg.tileN;
  int64_t tilesM = (p.m + cfg.tileM - 1) / cfg.tileM;
  // Experts outermost, then the expert's tile order.
  setTileOrigin(cfg.rasterM == 1 ? w : remu(w, tilesM * tilesN));
  // A block GEMM's tiles all take the whole K range.
  if (p.kind == MXGemmKind::Block)
    return emitContractionRange();
  expertId = cfg.rasterM == 1 ? divu(divu(w, tilesN), tilesM)
                              : divu(w, tilesM * tilesN);
  int64_t E = p.numExperts;
  Value at = mul(toI64(expertId), 4);
  // Row `table` of emitExpertTable's table, for this expert.
  auto load = [&](int64_t table) -> Value {
    Value entry = add(at, i64(lay.counters + 4 * table * E));
    return LLVM::LoadOp::create(b, loc, i32T, smemPtr(smemAddr(entry)), 4);
  };
  // Its K tiles: all of its blocks', or with skipPadding those that start
  // at a token.
  Value count = p.skipPadding ? Value() : load(0);
  Value first = load(1);
  kBegin = i32ToIndex(mul(first, p.blockSize));
  kTiles = i32ToIndex(p.skipPadding ? load(2)
                                    : mul(count, p.blockSize / cfg.tileK));
}

namespace {
/// pairsBlocks: where pair `pair` (of every expert's blocks in pairs, an
/// odd last one alone, expert after expert) is: its expert, the last one
/// whose first pair is at most `pair` (one with pairs: an expert without
/// any has the next one's first pair), by a branch-free binary search over
/// the E first pairs; its first block; whether the expert has the block
/// after it. `load(table, e)` reads expert e's blocks (table 0), first
/// block (1) or first pair (2) (emitPairTable's). Written once for
/// integers (pairTileIndexingAgrees) and IR values (decodePairTile).
/// (One op per statement: the same op order from every compiler.)
template <typename V, typename C> struct PairPlace {
  V expert, block;
  C second;
};
template <typename Ops, typename V, typename Load>
auto pairPlace(Ops &o, V pair, V zero, int64_t E, Load load) {
  V expert = zero;
  for (int64_t step = llvm::PowerOf2Ceil(E) / 2; step >= 1; step /= 2) {
    V probe = o.addc(expert, step);
    auto inside = o.ltc(probe, E);
    V at = o.selectc(inside, probe, E - 1);
    V firstPair = load(2, at);
    auto before = o.le(firstPair, pair);
    auto take = o.both(inside, before);
    expert = o.select(take, probe, expert);
  }
  V firstPair = load(2, expert);
  V local = o.sub(pair, firstPair);
  V twice = o.mul(local, 2);
  V first = load(1, expert);
  V block = o.add(first, twice);
  V blocks = load(0, expert);
  V next = o.addc(twice, 1);
  auto second = o.lt(next, blocks);
  return PairPlace<V, decltype(second)>{expert, block, second};
}
} // namespace

bool moe::pairTileIndexingAgrees() {
  IntOps o;
  // Block counts of every expert (zeros among them, odd and even), each
  // expert's pairs in order: pair q's place is the q-th of the list.
  std::vector<std::vector<int64_t>> cases = {{1},
                                             {2},
                                             {0, 3},
                                             {3, 0, 0, 5, 1},
                                             {0, 0, 0, 4},
                                             {4, 0, 0, 0},
                                             {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}};
  std::vector<int64_t> many;
  for (int64_t e = 0; e < 300; ++e)
    many.push_back((e * 7 + e / 3) % 10 * (e % 11 != 4));
  cases.push_back(many);
  for (const std::vector<int64_t> &counts : cases) {
    int64_t E = counts.size();
    std::vector<int64_t> table(3 * E);
    std::vector<std::array<int64_t, 3>> places;
    for (int64_t e = 0, block = 0; e < E; ++e) {
      table[e] = counts[e];
      table[E + e] = block;
      table[2 * E + e] = places.size();
      for (int64_t j = 0; j < counts[e]; j += 2)
        places.push_back({e, block + j, j + 1 < counts[e]});
      block += counts[e];
    }
    auto load = [&](int64_t row, int64_t e) {
      assert(e >= 0 && e < E && "the search reads inside the table");
      return table[row * E + e];
    };
    for (int64_t q = 0; q < static_cast<int64_t>(places.size()); ++q) {
      auto got = pairPlace(o, q, int64_t(0), E, load);
      if (got.expert != places[q][0] || got.block != places[q][1] ||
          got.second != bool(places[q][2]))
        return false;
    }
  }
  return true;
}

void KernelEmitter::decodePairTile(Value w) {
  int64_t E = p.numExperts, tilesM = (p.m + cfg.tileM - 1) / cfg.tileM;
  // emitPairTable's entry e (i32): the blocks and pairs below expert e.
  auto word = [&](Value e) -> Value {
    Value at = add(mul(toI64(e), 4), lay.counters);
    return LLVM::LoadOp::create(b, loc, i32T, smemPtr(smemAddr(at)), 4);
  };
  // Row `table` of pairPlace's table: e's blocks (the next entry's first
  // block less its own), first block or first pair.
  auto load = [&](int64_t table, Value e) -> Value {
    Value first = andi(word(e), 0xFFFF);
    if (table == 1)
      return first;
    if (table == 2)
      return shru(word(e), 16);
    Value next = andi(word(add(e, 1)), 0xFFFF);
    return sub(next, first);
  };
  Value pair = divu(w, tilesM);
  m0 = mul(remu(w, tilesM), cfg.tileM);
  assert(pairTileIndexingAgrees() && "pairsBlocks tile order");
  IROps ops{*this};
  auto place = pairPlace(ops, pair, i32(0), E, load);
  expertId = place.expert;
  secondBlock = place.second;
  n0 = mul(place.block, p.blockSize);
  kBegin = idx(0);
  kTiles = idx((p.k + cfg.tileK - 1) / cfg.tileK);
}

Value KernelEmitter::tileCountValue() {
  if (!p.pairsBlocks())
    return i32(numTiles(p, cfg));
  // The pairs of every expert (emitPairTable's totals), times the M tiles.
  Value at = i64(lay.counters + 4 * p.numExperts);
  Value total = LLVM::LoadOp::create(b, loc, i32T, smemPtr(smemAddr(at)), 4);
  return mul(shru(total, 16), (p.m + cfg.tileM - 1) / cfg.tileM);
}

void KernelEmitter::publishTile(Value j, Value w) {
  int64_t full = 2 * cfg.stages, empty = full + kTileSlots;
  auto [slot, parity] = stageAndParity(j, kTileSlots, /*flip=*/true);
  waitParity(add(slot, empty), parity);
  Value at = add(i64(tileIdsOffset()), mul(indexToI64(slot), 4));
  LLVM::StoreOp::create(b, loc, w, smemPtr(smemAddr(at)), 4);
  arrive(add(slot, full));
}

Value KernelEmitter::receiveTile(Value j) {
  int64_t full = 2 * cfg.stages, empty = full + kTileSlots;
  auto [slot, parity] = stageAndParity(j, kTileSlots, /*flip=*/false);
  waitParity(add(slot, full), parity);
  Value at = add(i64(tileIdsOffset()), mul(indexToI64(slot), 4));
  Value w = LLVM::LoadOp::create(b, loc, i32T, smemPtr(smemAddr(at)), 4);
  arrive(add(slot, empty));
  return w;
}

void KernelEmitter::setRhsRow0() {
  // The rhs rows of this tile: its expert's n rows (Block) or the shared
  // rhs (Expert). An N-major rhs of an expert GEMM: rows are slots from
  // row 0.
  rowB0 = cfg.rhsNMajor ? i32(0) : n0;
  // pairsBlocks: the rhs is slot rows from n0; the lhs the expert's
  // weight, [E * K, M] (M-major) or [E * M, K].
  if (p.pairsBlocks()) {
    rowA0 = cfg.lhsMMajor ? mul(expertId, i32(p.k))
                          : add(mul(expertId, i32(p.m)), m0);
    return;
  }
  if (p.kind != MXGemmKind::Block)
    return;
  Value blockIdx = divu(toI64(m0), p.blockSize);
  Value expert =
      loadGlobal(i32T, globalElement(i32T, blockToExpert, blockIdx), 4);
  // N-major: the expert's first K row; K-major: its first N row of this
  // tile.
  rowB0 = cfg.rhsNMajor ? mul(expert, i32(p.k))
                        : add(mul(expert, i32(p.n)), n0);
}

void KernelEmitter::emitPersistentProducerBf16Operands() {
  // Thread 0 streams every tile's K tiles through the ring; the others of
  // the warpgroup have nothing to do. (lhs_gather: they receive the tile
  // ids as the consumers do and copy their lhs rows of each K tile;
  // round_lhs / round_rhs: and copy and round the operand's slot rows.)
  auto ifOp = scf::IfOp::create(b, loc, isThread0,
                                /*withElseRegion=*/producerCopies());
  OpBuilder::InsertionGuard guard(b);
  if (roundsOperand()) {
    b.setInsertionPointToStart(ifOp.elseBlock());
    forEachReceivedTile([&](Value) { emitRoundingStages(/*tma=*/false); });
  } else if (cfg.lhsGather) {
    b.setInsertionPointToStart(ifOp.elseBlock());
    forEachReceivedTile([&](Value) {
      loadGatherTokens();
      forEachEmptyStage([&](Value t, Value s) { gatherLhsStage(t, s); });
    });
  } else if (cfg.rhsGather) {
    b.setInsertionPointToStart(ifOp.elseBlock());
    forEachReceivedTile([&](Value) {
      rhsTokens = loadRhsTokens();
      forEachEmptyStage([&](Value t, Value s) { gatherRhsStage(t, s); });
    });
  }
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value first =
      indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  Value count = tileCountValue();
  // (slot count j, ring position, tile): publish the tile, stop after
  // publishing one past the last.
  scf::WhileOp::create(
      b, loc, TypeRange{idxT, idxT, i32T}, ValueRange{idx(0), idx(0), first},
      [&](OpBuilder &, Location, ValueRange args) {
        publishTile(args[0], args[2]);
        Value more = cmp(arith::CmpIPredicate::ult, args[2], count);
        scf::ConditionOp::create(b, loc, more, args);
      },
      [&](OpBuilder &, Location, ValueRange args) {
        // The next tile's id is taken first, its atomic's latency hidden
        // behind this tile's loads.
        Value taken = LLVM::AtomicRMWOp::create(
            b, loc, LLVM::AtomicBinOp::add, tileCounter, i32(1),
            LLVM::AtomicOrdering::monotonic);
        ringBase = args[1];
        decodeTile(args[2]);
        setRhsRow0();
        if (cfg.lhsGather)
          loadGatherTokens();
        if (cfg.rhsGather)
          rhsTokens = loadRhsTokens();
        if (roundsOperand())
          emitRoundingStages(/*tma=*/true);
        else
          forEachEmptyStage([&](Value t, Value s) {
            loadTile(t, s);
            if (cfg.lhsGather)
              gatherLhsStage(t, s);
            if (cfg.rhsGather)
              gatherRhsStage(t, s);
          });
        scf::YieldOp::create(b, loc,
                             ValueRange{add(args[0], idx(1)),
                                        add(ringBase, kTiles),
                                        add(taken, i32(ctas))});
      });
}

void KernelEmitter::dequantizeRhsStage(Value s, Value d) {
  // Converter ct takes the 16-byte code chunks q = ct + 96 j of the
  // tileN x tileK code tile: row q / 4, chunk c = q % 4 = ct % 4 (96 is a
  // multiple of 4), so its scale column and swizzle phase stay fixed. A
  // quarter-warp reads 128 contiguous bytes; its two 16-byte bf16 stores
  // per chunk go to chunks 2c and 2c + 1 of an even and an odd row, whose
  // 128-byte swizzle phases differ in parity: eight different bank groups.
  // The decode is the bf16 path's (dequantizeChunk: the code's bits placed
  // in a bf16, times one or two bf16 powers of two), about two
  // instructions per element: the cvt.f16x2 form (buildDecodePairToBf16)
  // takes twice that, more than three warps keep up with at 820 TF.
  Type i8T = b.getI8Type();
  int64_t chunksPerRow = cfg.tileK / 16;
  int64_t blocksPerRow = cfg.tileK / 32;
  int64_t chunks = cfg.tileN * chunksPerRow;
  int64_t rowsPerRound = kRhsConverters / chunksPerRow;
  Value ct = sub(tid, i32(32));
  Value c64 = toI64(remu(ct, chunksPerRow));
  Value s64 = indexToI64(s);
  Value codesBase =
      smemAddr(add(mul(s64, cfg.tileN * cfg.tileK), lay.bCodes));
  // Row r's scale byte of the chunk's 32-element block.
  Value scalesBase = smemAddr(add(add(mul(s64, cfg.tileN * blocksPerRow),
                                      lay.bScales),
                                  divu(c64, 2)));
  Value bf16Base = smemAddr(
      add(mul(indexToI64(d), cfg.tileN * kSwizzleBytes), lay.b));
  auto vec4 = VectorType::get({4}, i32T);
  int64_t bigScale = 127 + exponentBias(p.elementType);
  // A loop, not unrolled rounds: the converters have the few registers
  // setmaxnreg leaves the producer warpgroup.
  int64_t rounds = llvm::divideCeil(chunks, kRhsConverters);
  auto loop = scf::ForOp::create(b, loc, i32(0), i32(rounds), i32(1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value j = loop.getInductionVar();
  // The last round's converters are whole warps (chunks is a multiple of
  // 32).
  if (chunks % kRhsConverters) {
    Value q = add(ct, mul(j, kRhsConverters));
    auto ifOp = scf::IfOp::create(b, loc,
                                  cmp(arith::CmpIPredicate::ult, q, chunks),
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
  }
  Value r64 = toI64(add(divu(ct, chunksPerRow), mul(j, rowsPerRound)));
  Value src = add(codesBase, add(mul(r64, cfg.tileK), mul(c64, 16)));
  Value chunk = LLVM::LoadOp::create(b, loc, vec4, smemPtr(src), 16);
  Value byte = LLVM::LoadOp::create(
      b, loc, i8T, smemPtr(add(scalesBase, mul(r64, blocksPerRow))), 1);
  Value scale = arith::ExtUIOp::create(b, loc, i32T, byte);
  Value phase = remu(r64, 8);
  auto convert = [&](bool twoFactors) {
    SmallVector<Value> words =
        dequantizeChunk(chunk, bf16Factors(scale, twoFactors));
    for (int64_t half = 0; half < 2; ++half) {
      Value v = LLVM::UndefOp::create(b, loc, vec4);
      for (int64_t u = 0; u < 4; ++u)
        v = LLVM::InsertElementOp::create(b, loc, v, words[4 * half + u],
                                          i32(u));
      Value at = add(mul(c64, 2), half);
      Value dst = add(bf16Base, add(mul(r64, kSwizzleBytes),
                                    mul(xori(at, phase), 16)));
      LLVM::StoreOp::create(b, loc, v, smemPtr(dst), 16);
    }
  };
  // One bf16 factor per code unless a scale byte of the warp needs two
  // (the branch is warp-uniform: whole warps take each round).
  Value anyBig = NVVM::VoteSyncOp::create(
      b, loc, i1T, i32(-1),
      cmp(arith::CmpIPredicate::ugt, scale, bigScale),
      NVVM::VoteSyncKind::any);
  auto ifOp = scf::IfOp::create(b, loc, anyBig, /*withElseRegion=*/true);
  b.setInsertionPointToStart(ifOp.thenBlock());
  convert(/*twoFactors=*/true);
  b.setInsertionPointToStart(ifOp.elseBlock());
  convert(/*twoFactors=*/false);
}

void KernelEmitter::emitRhsDequant() {
  OpBuilder::InsertionGuard guard(b);
  auto converters = scf::IfOp::create(
      b, loc, cmp(arith::CmpIPredicate::uge, tid, i32(32)),
      /*withElseRegion=*/false);
  b.setInsertionPointToStart(converters.thenBlock());
  // The K tiles of the current output tile, at ring positions ringBase on.
  auto kLoop = [&] {
    OpBuilder::InsertionGuard g(b);
    auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1));
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value t = loop.getInductionVar();
    Value at = ringBase ? add(ringBase, t) : t;
    auto [s, parity] = stageAndParity(at, cfg.stages, /*flip=*/false);
    waitParity(s, parity);
    // The bf16 tile the MMAs of K tile `at` - dequantStages read is free.
    int64_t D = cfg.dequantStages;
    auto [d, freeParity] = stageAndParity(at, D, /*flip=*/true);
    waitParity(add(d, lay.dequantized + D), freeParity);
    dequantizeRhsStage(s, d);
    // The generic-proxy stores must be visible to wgmma (async proxy).
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
    arrive(add(d, lay.dequantized));
  };
  if (!cfg.persistent)
    return kLoop();
  // Persistent: every tile id the producer thread publishes, as the
  // consumers receive them.
  forEachReceivedTile([&](Value) {
    setRhsRow0();
    kLoop();
  });
}

Value KernelEmitter::forEachReceivedTile(function_ref<void(Value j)> body) {
  Value count = tileCountValue();
  // (slot count j, ring position): receive a tile, stop at one past the
  // last.
  auto loop = scf::WhileOp::create(
      b, loc, TypeRange{idxT, idxT, i32T}, ValueRange{idx(0), idx(0)},
      [&](OpBuilder &, Location, ValueRange args) {
        Value w = receiveTile(args[0]);
        Value more = cmp(arith::CmpIPredicate::ult, w, count);
        scf::ConditionOp::create(b, loc, more,
                                 ValueRange{args[0], args[1], w});
      },
      [&](OpBuilder &, Location, ValueRange args) {
        ringBase = args[1];
        decodeTile(args[2]);
        body(args[0]);
        scf::YieldOp::create(
            b, loc, ValueRange{add(args[0], idx(1)), add(ringBase, kTiles)});
      });
  // The slot count at the end: the tiles received.
  return loop.getResult(0);
}

KernelEmitter::ConsumerLane KernelEmitter::consumerLane() {
  Value ct = sub(tid, i32(128 * cfg.producerWarpgroups));
  Value warpgroup = divu(ct, 128);
  Value inWarpgroup = remu(ct, 128);
  Value warp = divu(inWarpgroup, 32);
  Value lane = remu(inWarpgroup, 32);
  Value rowInTile = add(mul(warp, 16), divu(lane, 4));
  if (!cfg.pingpong)
    rowInTile = add(mul(warpgroup, cfg.mmaM), rowInTile);
  return {warpgroup, remu(lane, 4), rowInTile, eq(inWarpgroup, 0)};
}

void KernelEmitter::turnBarrier(Value warpgroup, bool wait) {
  Value id = add(warpgroup, i32(kTurnBarrier));
  Value threads = i32(2 * 128);
  if (wait) {
    NVVM::BarrierOp::create(b, loc, /*res=*/Type(), id, threads,
                            /*reductionOp=*/nullptr,
                            /*reductionPredicate=*/Value());
    return;
  }
  NVVM::BarrierArriveOp::create(b, loc, id, threads);
}

std::pair<Value, Value> KernelEmitter::beginProducerTile() {
  auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1));
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value t = loop.getInductionVar();
  auto [s, parity] = stageAndParity(t, cfg.stages, /*flip=*/true);
  waitParity(add(s, cfg.stages), parity);
  // Thread 0: expect both tiles' bytes on full[s] and issue the two loads.
  auto tma = scf::IfOp::create(b, loc, isThread0, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(tma.thenBlock());
    loadTile(t, s);
  }
  return {t, s};
}

void KernelEmitter::emitProducerFp8() {
  int64_t blocksPerTile = cfg.tileK / 32;
  // The 4 E8M0 bytes of one row and K tile (tileK = 128) are one aligned
  // 32-bit word.
  int64_t wordsPerRow = p.k / cfg.tileK;

  OpBuilder::InsertionGuard guard(b);
  auto [t, s] = beginProducerTile();
  // Every producer thread turns one row's scale word of A and of B into
  // f32 factors. A: SA[s][j][row]. B: SB[s][j][q * stride + 2 * (c / 8) +
  // c % 2] for column c, q = (c % 8) / 2, the order in which a consumer
  // lane quad q reads its 32 columns.
  Value t32 = indexToI32(t);
  Value s64 = indexToI64(s);
  Value rowA = add(m0, tid);
  Value rowB = add(rowB0, tid);
  Value slotB;
  {
    Value c8 = divu(tid, 8);
    Value cm = remu(tid, 8);
    slotB = add(mul(divu(cm, 2), cfg.scaleTableStride),
                add(mul(c8, 2), remu(cm, 2)));
  }
  struct Side {
    Value row, table, slot;
    int64_t offset, rowsPerBlock;
  };
  Side sides[] = {{rowA, scalesA, tid, lay.scaleA, cfg.tileM},
                  {rowB, scalesB, slotB, lay.scaleB, 4 * cfg.scaleTableStride}};
  for (const Side &side : sides) {
    Value w = toI64(add(mul(side.row, i32(wordsPerRow)), t32));
    Value word = loadGlobal(i32T, globalElement(i32T, side.table, w), 4);
    Value slot64 = toI64(side.slot);
    for (int64_t j = 0; j < blocksPerTile; ++j) {
      Value byte = andi(shru(word, 8 * j), 255);
      Value f = e8m0ToF32(byte);
      Value el = add(mul(add(mul(s64, blocksPerTile), j), side.rowsPerBlock),
                     slot64);
      Value addr = smemAddr(add(mul(el, 4), side.offset));
      LLVM::StoreOp::create(b, loc, f, smemPtr(addr), /*alignment=*/4);
    }
  }
  arrive(s);
}

void KernelEmitter::beginStreams() {
  streamPolicy = Value();
  if (!cfg.evictFirstOutputs)
    return;
  streamPolicy =
      inlinePtx(i64T, {}, "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;",
                "=l", /*sideEffects=*/false);
}

// ld.global.nc / st.global with .L2::cache_hint: the evict-first forms on sm_90a
// (`.L2::evict_first` without a policy takes only 256-bit vectors there).
Value KernelEmitter::loadStream(Type type, Value ptr, unsigned alignment) {
  if (!streamPolicy)
    return loadGlobal(type, ptr, alignment);
  Value address = LLVM::PtrToIntOp::create(b, loc, i64T, ptr);
  auto load = [&](Type result, StringRef text, StringRef constraints) {
    return inlinePtx(result, {address, streamPolicy}, text, constraints,
                     /*sideEffects=*/false);
  };
  if (type == f32T)
    return load(f32T, "ld.global.nc.L2::cache_hint.f32 $0, [$1], $2;",
                "=f,l,l");
  if (type.isBF16()) {
    Value bits = load(b.getI16Type(),
                      "ld.global.nc.L2::cache_hint.b16 $0, [$1], $2;", "=h,l,l");
    return LLVM::BitcastOp::create(b, loc, type, bits);
  }
  assert(type == VectorType::get({2}, f32T) && "a stream of f32 pairs");
  auto pairT = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32T, f32T});
  Value both = load(pairT, "ld.global.nc.L2::cache_hint.v2.f32 {$0, $1}, [$2], $3;",
                    "=f,=f,l,l");
  Value vec = LLVM::UndefOp::create(b, loc, type);
  for (int64_t e = 0; e < 2; ++e)
    vec = LLVM::InsertElementOp::create(b, loc, vec, extract(both, e), i32(e));
  return vec;
}

void KernelEmitter::storeStream(Value value, Value ptr, unsigned alignment) {
  if (!streamPolicy) {
    LLVM::StoreOp::create(b, loc, value, ptr, alignment);
    return;
  }
  Value address = LLVM::PtrToIntOp::create(b, loc, i64T, ptr);
  auto store = [&](ValueRange operands, StringRef text,
                   StringRef constraints) {
    inlinePtx(Type(), operands, text, constraints, /*sideEffects=*/true);
  };
  Type type = value.getType();
  if (type == f32T)
    return store({address, value, streamPolicy},
                 "st.global.L2::cache_hint.f32 [$0], $1, $2;", "l,f,l");
  auto vecT = cast<VectorType>(type);
  if (vecT.getElementType().isBF16()) {
    Value bits = LLVM::BitcastOp::create(b, loc, i32T, value);
    return store({address, bits, streamPolicy},
                 "st.global.L2::cache_hint.b32 [$0], $1, $2;", "l,r,l");
  }
  assert(vecT == VectorType::get({2}, f32T) && "a stream of f32 pairs");
  auto lane = [&](int64_t e) {
    return LLVM::ExtractElementOp::create(b, loc, value, i32(e)).getResult();
  };
  store({address, lane(0), lane(1), streamPolicy},
        "st.global.L2::cache_hint.v2.f32 [$0], {$1, $2}, $3;", "l,f,f,l");
}

void KernelEmitter::storeAccumulator(Value acc, Value rowInTile, Value quad) {
  beginStreams();
  if (p.epilogue.kind == MXGemmEpilogue::Kind::GatedActBwd)
    return storeGatedActBwd(acc, rowInTile, quad);
  // Partial tiles (TMA zero-filled them) store only the rows and columns
  // inside C; N is even, so a column pair is inside or outside as a whole.
  bool guardRows = p.m % cfg.tileM != 0;
  bool guardCols = p.n % cfg.tileN != 0;
  Value n64 = i64(p.n);
  Value base = resultBase();
  // Block problems with a bias add bias[e, n] of the tile's expert.
  Value biasRow = bias ? biasRowOfTile() : Value();
  Value row32 = add(m0, rowInTile);
  Value col32 = add(n0, mul(quad, 2));
  Value row = toI64(row32);
  Value col = toI64(col32);
  Value base0 = add(mul(row, n64), col);
  Value base1 = add(base0, 8 * p.n);
  auto vecT = VectorType::get({2}, f32T);
  for (int64_t jb = 0; jb < accLen() / 4; ++jb) {
    for (int64_t r = 0; r < 2; ++r) {
      int64_t i = 4 * jb + 2 * r;
      Value inside;
      auto both = [&](Value c) { inside = inside ? andi(inside, c) : c; };
      if (guardRows)
        both(cmp(arith::CmpIPredicate::ult, add(row32, 8 * r), p.m));
      if (guardCols)
        both(cmp(arith::CmpIPredicate::ult, add(col32, 8 * jb), p.n));
      OpBuilder::InsertionGuard g(b);
      if (inside) {
        auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
        b.setInsertionPointToStart(ifOp.thenBlock());
      }
      Value vec = LLVM::UndefOp::create(b, loc, vecT);
      vec = LLVM::InsertElementOp::create(b, loc, vec, extract(acc, i), i32(0));
      vec = LLVM::InsertElementOp::create(b, loc, vec, extract(acc, i + 1),
                                          i32(1));
      if (biasRow)
        vec = LLVM::FAddOp::create(b, loc, vec, biasPairAt(biasRow, col, jb));
      Value ix = add(r ? base1 : base0, 8 * jb);
      storeStream(vec, globalElement(f32T, base, ix), /*alignment=*/8);
    }
  }
}

Value KernelEmitter::biasRowOfTile() {
  Value blockIdx = divu(toI64(m0), p.blockSize);
  Value expert = toI64(
      loadGlobal(i32T, globalElement(i32T, blockToExpert, blockIdx), 4));
  return globalElement(p.biasType, bias, mul(expert, p.n));
}

Value KernelEmitter::biasPairAt(Value biasRow, Value col, int64_t jb) {
  auto vecT = VectorType::get({2}, f32T);
  Value ptr = globalElement(p.biasType, biasRow, add(col, 8 * jb));
  if (p.biasType == f32T)
    return loadGlobal(vecT, ptr, 8);
  Value pair = loadGlobal(VectorType::get({2}, p.biasType), ptr, 4);
  return LLVM::FPExtOp::create(b, loc, vecT, pair);
}

void KernelEmitter::publishStoreChunk(const ConsumerLane &lane) {
  // The TMA reads the chunk through the async proxy. Before the barrier
  // that releases the warpgroup, the leader waits until the store of the
  // buffer that the next chunk fills (tma_store chunks back) has read it:
  // at most tma_store - 2 of the earlier stores still reading.
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  onLeader(lane.leader, [&] {
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, cfg.tmaStore - 2,
                                         b.getUnitAttr());
  });
  NVVM::BarrierOp::create(b, loc, /*res=*/Type(),
                          add(lane.warpgroup, i32(kStoreBarrier)), i32(128),
                          /*reductionOp=*/nullptr,
                          /*reductionPredicate=*/Value());
}

namespace {
// swap_operands: the byte offset, in a warpgroup's 8 KB chunk buffer (two
// 128B-swizzled boxes of 32 rows x 32 f32), of the accumulator element of
// row r0 + 8 r (r0 = 16 w + g, 0..63) and chunk column 2 q + e (+ 8 jj:
// 1024 bytes further): box r0 / 32, row 2 q + e, 16-byte unit
// ((r0 % 32) / 4 + 2 r) ^ (2 q + e) (the row's swizzle phase whatever jj),
// f32 r0 % 4 of it. Written once for integers
// (transposedStoreIndexingAgrees) and IR values.
// (One op per statement: the same op order from every compiler.)
template <typename Ops, typename V>
V transposedStoreOffset(Ops &o, V r0, V quad, int64_t r, int64_t e) {
  V twice = o.mul(quad, 2);
  V row = o.addc(twice, e);
  V inBox = o.rem(r0, 32);
  V unit0 = o.div(inBox, 4);
  V unitR = o.addc(unit0, 2 * r);
  V unit = o.xori(unitR, row);
  V box = o.div(r0, 32);
  V boxBytes = o.mul(box, 32 * kSwizzleBytes);
  V rowBytes = o.mul(row, kSwizzleBytes);
  V upper = o.add(boxBytes, rowBytes);
  V unitBytes = o.mul(unit, 16);
  V word = o.rem(r0, 4);
  V wordBytes = o.mul(word, 4);
  V lower = o.add(unitBytes, wordBytes);
  return o.add(upper, lower);
}
} // namespace

bool moe::transposedStoreIndexingAgrees() {
  IntOps o;
  std::vector<int> seen(64 * 32, 0);
  for (int64_t w = 0; w < 4; ++w)
    for (int64_t jj = 0; jj < 4; ++jj)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t e = 0; e < 2; ++e) {
          unsigned banks = 0;
          for (int64_t g = 0; g < 8; ++g)
            for (int64_t q = 0; q < 4; ++q) {
              // The wgmma accumulator: row 16 w + g + 8 r, column 8 jj +
              // 2 q + e of the chunk (PTX ISA, wgmma D fragments, f32).
              int64_t m = 16 * w + g + 8 * r, n = 8 * jj + 2 * q + e;
              int64_t at = transposedStoreOffset(o, 16 * w + g, q, r, e) +
                           8 * jj * kSwizzleBytes;
              if (at < 0 || at >= 64 * 32 * 4 || at % 4)
                return false;
              // What a box reads there: its row, the 16-byte unit the
              // swizzle moved (unit ^ row % 8), the f32 in it.
              int64_t box = at / (32 * kSwizzleBytes);
              int64_t inBox = at % (32 * kSwizzleBytes);
              int64_t row = inBox / kSwizzleBytes;
              int64_t unit = (inBox % kSwizzleBytes) / 16 ^ (row % 8);
              int64_t column = 32 * box + 4 * unit + (inBox % 16) / 4;
              if (row != n || column != m || seen[at / 4]++)
                return false;
              banks |= 1u << ((at / 4) % 32);
            }
          if (banks != 0xFFFFFFFFu)
            return false;
        }
  return true;
}

void KernelEmitter::storeAccumulatorTmaTransposed(Value acc,
                                                   const ConsumerLane &lane) {
  assert((!bias || p.pairsBlocks()) && cfg.storeColumns == 32 &&
         cfg.mmaM == 64 &&
         "swap_operands: 32-column chunks of 64-row MMAs, a block's bias");
  // The op's result is [E, N, M] ([N, M] of a block GEMM, whose N are
  // slots): chunk c is its rows n0 + 32 c .. + 31 by the warpgroup's 64
  // columns, two 128B-swizzled boxes of 32 rows x 32 f32. Thread (g, q) of
  // warp w holds columns 16 w + g and + 8 (box w / 2) of rows 8 jj + 2 q
  // and + 1. One scalar store (jj, r, e) of the warp
  // writes rows 2 q + e (swizzle phases e, e + 2, e + 4, e + 6) of 8
  // consecutive f32 (units u, u + 1, u even): 8 distinct 16-byte units,
  // conflict-free.
  int64_t columns = cfg.storeColumns;
  int64_t boxBytes = columns * kSwizzleBytes;
  Value r0 = sub(lane.rowInTile, mul(lane.warpgroup, cfg.mmaM));
  // The thread's four byte offsets in a buffer (transposedStoreOffset);
  // each store is a constant 8 jj rows further.
  assert(transposedStoreIndexingAgrees() && "swap_operands staging");
  IROps ops{*this};
  Value at[2][2];
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t e = 0; e < 2; ++e)
      at[r][e] = toI64(transposedStoreOffset(ops, r0, lane.quad, r, e));
  Value warpgroupBytes = mul(toI64(lane.warpgroup),
                             cfg.tmaStore * cfg.mmaM * cfg.storeRowBytes());
  Value buffers = add(warpgroupBytes, lay.store);
  beginStreams();
  Value colCoord = add(m0, mul(lane.warpgroup, cfg.mmaM));
  int64_t chunks = cfg.mmaN / columns;
  // A block GEMM's bias is per weight row, the thread's rows r0 and r0 + 8
  // of the warpgroup's (past the expert's M: zeros, never stored).
  Value biasOfRow[2];
  if (bias) {
    Value biasRow = globalElement(p.biasType, bias, mul(toI64(expertId), p.m));
    for (int64_t r = 0; r < 2; ++r) {
      Value row = add(colCoord, add(r0, i32(8 * r)));
      Value inside = cmp(arith::CmpIPredicate::ult, row, i32(p.m));
      Value at = toI64(select(inside, row, i32(0)));
      Value value =
          loadGlobal(p.biasType, globalElement(p.biasType, biasRow, at),
                     p.biasType == f32T ? 4 : 2);
      if (p.biasType != f32T)
        value = LLVM::FPExtOp::create(b, loc, f32T, value);
      biasOfRow[r] = value;
    }
  }
  // pairsBlocks: the chunks of the second block (slots n0 + B on) only
  // when it is the expert's; the TMA clips nothing between two blocks.
  int64_t chunksPerBlock = p.pairsBlocks() ? p.blockSize / columns : chunks;
  for (int64_t c = 0; c < chunks; ++c) {
    Value buffer = add(buffers, (c % cfg.tmaStore) * cfg.mmaM *
                                    cfg.storeRowBytes());
    for (int64_t jj = 0; jj < columns / 8; ++jj) {
      int64_t jb = c * columns / 8 + jj;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t e = 0; e < 2; ++e) {
          Value value = extract(acc, 4 * jb + 2 * r + e);
          if (bias)
            value = LLVM::FAddOp::create(b, loc, value, biasOfRow[r]);
          Value offset = add(add(buffer, at[r][e]), 8 * jj * kSwizzleBytes);
          LLVM::StoreOp::create(b, loc, value, smemPtr(smemAddr(offset)), 4);
        }
    }
    // Then the leader's two box stores, as one group.
    publishStoreChunk(lane);
    onLeader(lane.leader, [&] {
      for (int64_t h = 0; h < 2; ++h) {
        SmallVector<Value> coords = {mul(add(colCoord, i32(32 * h)), 4),
                                     add(n0, i32(c * columns))};
        if (!p.pairsBlocks())
          coords.push_back(expertId);
        NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
            b, loc, tmapC, smemPtr(smemAddr(add(buffer, h * boxBytes))), coords,
            /*l2CacheHint=*/streamPolicy, NVVM::TMAStoreMode::TILE,
            /*predicate=*/c < chunksPerBlock ? Value() : secondBlock);
      }
      NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
    });
  }
}

void KernelEmitter::storeAccumulatorTma(Value acc, const ConsumerLane &lane) {
  if (p.transposedResult)
    return storeAccumulatorTmaTransposed(acc, lane);
  auto vecT = VectorType::get({2}, f32T);
  // The thread's rows in its warpgroup's mmaM (rowInTile less the
  // warpgroup's offset): r0 and r0 + 8. A chunk row is R = storeRowBytes
  // bytes, R / 16 units of 16 bytes, and the TMA's R-byte swizzle XORs the
  // unit with bits 7.. of the byte offset, i.e. with (r0 / (128 / R)) %
  // (R / 16): the same phase for r0 + 8 (R = 32: 1 bit, 64: 2, 128: 3). A
  // lane quad's pair of columns 8 jj + 2 q of the chunk is unit 2 jj + q / 2
  // of its row, bytes 8 (q % 2) of it. A warp's store then covers 8 rows
  // of 32 bytes in two wavefronts: conflict-free at every width.
  int64_t rowBytes = cfg.storeRowBytes();
  int64_t columns = cfg.storeColumns;
  Value r0 = sub(lane.rowInTile, mul(lane.warpgroup, cfg.mmaM));
  Value phase = toI64(andi(divu(r0, 128 / rowBytes),
                           i32(rowBytes / 16 - 1)));
  Value half = toI64(divu(lane.quad, 2));
  Value inUnit = toI64(mul(andi(lane.quad, i32(1)), 8));
  Value rowBytes0 = mul(toI64(r0), rowBytes);
  Value buffers = add(i64(lay.store), mul(toI64(lane.warpgroup),
                                          cfg.tmaStore * cfg.mmaM * rowBytes));
  Value col = toI64(add(n0, mul(lane.quad, 2)));
  Value biasRow = bias ? biasRowOfTile() : Value();
  // (evict_first_outputs: the stores' L2 policy.)
  beginStreams();
  // Box coordinates, innermost first: the byte column, the row (of the
  // expert's M rows), the expert.
  Value rowCoord = add(m0, mul(lane.warpgroup, cfg.mmaM));
  int64_t chunks = cfg.mmaN / columns;
  for (int64_t c = 0; c < chunks; ++c) {
    Value buffer = add(buffers, (c % cfg.tmaStore) * cfg.mmaM * rowBytes);
    for (int64_t jj = 0; jj < columns / 8; ++jj) {
      int64_t jb = c * columns / 8 + jj;
      Value unit = xori(add(half, i64(2 * jj)), phase);
      Value inRow = add(mul(unit, 16), inUnit);
      for (int64_t r = 0; r < 2; ++r) {
        int64_t i = 4 * jb + 2 * r;
        Value vec = LLVM::UndefOp::create(b, loc, vecT);
        vec = LLVM::InsertElementOp::create(b, loc, vec, extract(acc, i),
                                            i32(0));
        vec = LLVM::InsertElementOp::create(b, loc, vec, extract(acc, i + 1),
                                            i32(1));
        if (biasRow)
          vec = LLVM::FAddOp::create(b, loc, vec, biasPairAt(biasRow, col, jb));
        Value at = add(buffer, add(add(rowBytes0, r * 8 * rowBytes), inRow));
        LLVM::StoreOp::create(b, loc, vec, smemPtr(smemAddr(at)), 8);
      }
    }
    publishStoreChunk(lane);
    onLeader(lane.leader, [&] {
      SmallVector<Value> coords = {
          mul(add(n0, i32(c * columns)), 4), rowCoord};
      if (p.kind == MXGemmKind::Expert)
        coords.push_back(expertId);
      NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
          b, loc, tmapC, smemPtr(smemAddr(buffer)), coords,
          /*l2CacheHint=*/streamPolicy, NVVM::TMAStoreMode::TILE,
          /*predicate=*/Value());
      NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
    });
  }
}

void KernelEmitter::finishTmaStores(const ConsumerLane &lane) {
  onLeader(lane.leader, [&] {
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, /*read=*/UnitAttr());
  });
}

void KernelEmitter::storeGatedActBwd(Value acc, Value rowInTile,
                                     Value quad) {
  // Thread fragment: rows row32 and row32 + 8, column pairs col32 + 8 jb.
  // Each element meets g = gate_up[row, col] and u = gate_up[row, N + col]
  // (the recompute's or the checkpoint's f32 rows) and a[row]; the math is
  // buildGatedActBwd's, so the values are those of the host lowering's
  // moe.gated_act_bwd. Loads of a partial tile read a clamped (valid)
  // address and its stores are skipped.
  const MXGemmEpilogue &epi = p.epilogue;
  bool guardRows = p.m % cfg.tileM != 0;
  bool guardCols = p.n % cfg.tileN != 0;
  int64_t partials = (p.n + cfg.tileN - 1) / cfg.tileN;
  auto vecT = VectorType::get({2}, f32T);
  Type bf16T = b.getBF16Type();
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value row32 = add(m0, rowInTile);
  Value col32 = add(n0, mul(quad, 2));
  int64_t pairs = accLen() / 4;
  // [dg | du] of the fragment, for its MX roundings.
  DGateUpFragment frag;
  frag.pairs = pairs;
  frag.values.resize(2 * 2 * pairs * 2);
  frag.insides.resize(2 * pairs);
  frag.gIndices.resize(2 * pairs);
  auto lane = [&](Value vec, int64_t i) {
    return LLVM::ExtractElementOp::create(b, loc, vec, i32(i));
  };
  auto pair = [&](Value x, Value y) {
    Value vec = LLVM::UndefOp::create(b, loc, vecT);
    vec = LLVM::InsertElementOp::create(b, loc, vec, x, i32(0));
    return LLVM::InsertElementOp::create(b, loc, vec, y, i32(1)).getResult();
  };
  auto minu = [&](Value x, int64_t bound) {
    return arith::MinUIOp::create(b, loc, x, cst(x.getType(), bound));
  };
  auto storeIf = [&](Value inside, Value vec, Value base, Value index) {
    OpBuilder::InsertionGuard g(b);
    if (inside) {
      auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
      b.setInsertionPointToStart(ifOp.thenBlock());
    }
    storeStream(vec, globalElement(f32T, base, index), /*alignment=*/8);
  };

  // What each of the two rows needs.
  struct Row {
    Value inside, index, a, gateRow, hRow, partial, ckptBase, mask;
    SmallVector<Value> gs, us;
  };
  Row rows[2];
  auto setUpRow = [&](int64_t r) {
    Row &row = rows[r];
    Value rowR = add(row32, 8 * r);
    if (guardRows)
      row.inside = cmp(arith::CmpIPredicate::ult, rowR, p.m);
    row.index = toI64(guardRows ? minu(rowR, p.m - 1) : rowR);
    row.a = loadGlobal(f32T, globalElement(f32T, affinities, row.index), 4);
    row.gateRow = mul(row.index, 2 * p.n);
    row.hRow = mul(row.index, p.n);
    row.partial = zero;
    // The checkpoint's g and u of column `col`: bf16 (exactly f32), times
    // the slot's mask as moe.scale_rows multiplies it (1 or 0).
    if (epi.gateUpCheckpoint) {
      int64_t B = p.blockSize;
      row.ckptBase =
          add(mul(divu(row.index, B), 2 * p.n * B), remu(row.index, B));
      Value id =
          loadGlobal(i32T, globalElement(i32T, tokenIds, row.index), 4);
      row.mask = arith::UIToFPOp::create(
          b, loc, f32T,
          arith::ExtUIOp::create(b, loc, i32T,
                                 cmp(arith::CmpIPredicate::sge, id, 0)));
    }
  };
  // The column pair of jb: its store guard and dg's element index.
  auto column = [&](int64_t r, int64_t jb) {
    Value colJ = add(col32, 8 * jb);
    Value inside = rows[r].inside;
    if (guardCols) {
      Value c = cmp(arith::CmpIPredicate::ult, colJ, p.n);
      inside = inside ? andi(inside, c) : c;
    }
    Value col = toI64(guardCols ? minu(colJ, p.n - 2) : colJ);
    frag.insides[r * pairs + jb] = inside;
    frag.gIndices[r * pairs + jb] = add(rows[r].gateRow, col);
    return col;
  };
  // Issues the g and u loads of row r's pairs [jb0, jb1), all in flight
  // together (the math waits once, not once per column pair).
  auto loadRow = [&](int64_t r, int64_t jb0, int64_t jb1) {
    Row &row = rows[r];
    row.gs.clear();
    row.us.clear();
    for (int64_t jb = jb0; jb < jb1; ++jb) {
      Value col = column(r, jb);
      if (epi.gateUpCheckpoint) {
        for (int64_t half = 0; half < 2; ++half) {
          Value vec = LLVM::UndefOp::create(b, loc, vecT);
          for (int64_t e = 0; e < 2; ++e) {
            Value index = add(row.ckptBase,
                              mul(add(col, half * p.n + e), p.blockSize));
            Value v =
                loadStream(bf16T, globalElement(bf16T, gateUp, index), 2);
            Value f = arith::MulFOp::create(
                b, loc, arith::ExtFOp::create(b, loc, f32T, v), row.mask);
            vec = LLVM::InsertElementOp::create(b, loc, vec, f, i32(e));
          }
          (half ? row.us : row.gs).push_back(vec);
        }
        continue;
      }
      Value gIndex = frag.gIndices[r * pairs + jb];
      row.gs.push_back(
          loadStream(vecT, globalElement(f32T, gateUp, gIndex), 8));
      row.us.push_back(loadStream(
          vecT, globalElement(f32T, gateUp, add(gIndex, p.n)), 8));
    }
  };
  // The math of row r's pairs [jb0, jb1) and the stores of f32 [dg | du],
  // h and a * h.
  auto computeRow = [&](int64_t r, int64_t jb0, int64_t jb1) {
    Row &row = rows[r];
    for (int64_t jb = jb0; jb < jb1; ++jb) {
      Value inside = frag.insides[r * pairs + jb];
      Value gIndex = frag.gIndices[r * pairs + jb];
      Value uIndex = add(gIndex, p.n);
      Value col = sub(gIndex, row.gateRow);
      Value g = row.gs[jb - jb0], u = row.us[jb - jb0];
      GatedActGrads grads[2];
      for (int64_t e = 0; e < 2; ++e) {
        Value dA = extract(acc, 4 * jb + 2 * r + e);
        grads[e] = buildGatedActBwd(b, loc, epi.activation, epi.clamp,
                                    lane(g, e), lane(u, e), dA, row.a);
        // The partial sum of the row's <dA, h> over this tile, in column
        // order; columns outside N add nothing.
        Value product = arith::MulFOp::create(b, loc, dA, grads[e].h);
        if (guardCols)
          product = select(inside, product, zero);
        row.partial = arith::AddFOp::create(b, loc, row.partial, product);
        frag.values[frag.at(0, r, jb, e)] = grads[e].dGate;
        frag.values[frag.at(1, r, jb, e)] = grads[e].dUp;
      }
      if (result) {
        storeIf(inside, pair(grads[0].dGate, grads[1].dGate), result, gIndex);
        storeIf(inside, pair(grads[0].dUp, grads[1].dUp), result, uIndex);
      }
      Value hIndex = add(row.hRow, col);
      if (hOut)
        storeIf(inside, pair(grads[0].h, grads[1].h), hOut, hIndex);
      if (scaledHOut) {
        // moe.scale_rows: a * h.
        Value ah0 = arith::MulFOp::create(b, loc, row.a, grads[0].h);
        Value ah1 = arith::MulFOp::create(b, loc, row.a, grads[1].h);
        storeIf(inside, pair(ah0, ah1), scaledHOut, hIndex);
      }
    }
  };
  // The quad's four column sets hold the tile's columns: butterfly sums
  // (each lane adds the same two terms, so all four get the same bits),
  // stored by lane 0 of the quad.
  auto storePartial = [&](int64_t r) {
    if (!partialsOut)
      return;
    Row &row = rows[r];
    Value partial = row.partial;
    for (int64_t offset : {1, 2}) {
      Value other = gpu::ShuffleOp::create(b, loc, partial, i32(offset),
                                           i32(32), gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      partial = arith::AddFOp::create(b, loc, partial, other);
    }
    Value first = eq(quad, 0);
    Value inside = row.inside ? andi(row.inside, first) : first;
    OpBuilder::InsertionGuard g(b);
    auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value tileN = divu(toI64(n0), cfg.tileN);
    Value index = add(mul(row.index, partials), tileN);
    storeStream(partial, globalElement(f32T, partialsOut, index),
                /*alignment=*/4);
  };

  if (!epi.dGateUpAlongN && !epi.dGateUpAlongM) {
    // One row at a time, up to 16 pairs (64 g and u registers) together:
    // all of an m64n128 fragment's, and half of an m64n256 one's, whose
    // 128 accumulator registers leave no room for all 32 (ptxas spills).
    // A ping-pong warpgroup's second accumulator is live through the
    // first one's epilogue: 8 pairs, or 4 of the checkpoint's bf16 loads
    // (one address each; 8 spill at I = 256, ptxas -v).
    int64_t chunk = std::min<int64_t>(
        pairs, mSteps() == 1 ? 16 : epi.gateUpCheckpoint ? 4 : 8);
    for (int64_t r = 0; r < 2; ++r) {
      setUpRow(r);
      for (int64_t jb0 = 0; jb0 < pairs; jb0 += chunk) {
        int64_t jb1 = std::min(pairs, jb0 + chunk);
        loadRow(r, jb0, jb1);
        computeRow(r, jb0, jb1);
      }
      storePartial(r);
    }
    return;
  }
  // Rounding: 32 columns (four pairs) of both rows at a time, so that a
  // 32-column block (along N) and a column's rows (along M) are complete
  // while few values are live.
  for (int64_t r = 0; r < 2; ++r)
    setUpRow(r);
  for (int64_t jb0 = 0; jb0 < pairs; jb0 += 4) {
    for (int64_t r = 0; r < 2; ++r)
      loadRow(r, jb0, jb0 + 4);
    for (int64_t r = 0; r < 2; ++r)
      computeRow(r, jb0, jb0 + 4);
    if (epi.dGateUpAlongN)
      roundDGateUpAlongN(frag, jb0);
    if (epi.dGateUpAlongM)
      roundDGateUpAlongM(frag, quad, jb0);
  }
  for (int64_t r = 0; r < 2; ++r)
    storePartial(r);
  // A persistent CTA's next tile overwrites the column amaxes: both warps
  // of each pair have read them first.
  if (epi.dGateUpAlongM && cfg.persistent)
    joinWarpPair();
}

void KernelEmitter::roundDGateUpAlongN(const DGateUpFragment &frag,
                                       int64_t jb0) {
  // The 32-column block of pairs jb0 .. jb0 + 3 of the four lanes of the
  // quad (the block's amax by two xor shuffles), in dg and du, both rows.
  MXQuantAttr quant = p.epilogue.dGateUpAlongN;
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t r = 0; r < 2; ++r) {
      Value amax = zero;
      for (int64_t jb = jb0; jb < jb0 + 4; ++jb)
        for (int64_t e = 0; e < 2; ++e)
          amax = buildAmaxStep(b, loc, amax,
                               frag.values[frag.at(half, r, jb, e)]);
      amax = buildLaneAmax(b, loc, amax, {1, 2});
      auto [inverse, factor] = buildBlockScale(b, loc, amax, quant);
      for (int64_t jb = jb0; jb < jb0 + 4; ++jb)
        roundAndStorePair(frag, half, r, jb, {inverse, inverse},
                          {factor, factor}, quant, dGateUpAlongNOut);
    }
}

void KernelEmitter::roundAndStorePair(const DGateUpFragment &frag,
                                      int64_t half, int64_t r, int64_t jb,
                                      std::array<Value, 2> inverse,
                                      std::array<Value, 2> factor,
                                      MXQuantAttr quant, Value out) {
  Type codeType = getMXElementType(b.getContext(), quant.getElement());
  auto [v0, v1] = buildRoundPairToBf16(
      b, loc, frag.values[frag.at(half, r, jb, 0)],
      frag.values[frag.at(half, r, jb, 1)], inverse[0], inverse[1], factor[0],
      factor[1], codeType);
  Type bf16T = b.getBF16Type();
  Value vec = LLVM::UndefOp::create(b, loc, VectorType::get({2}, bf16T));
  vec = LLVM::InsertElementOp::create(b, loc, vec, v0, i32(0));
  vec = LLVM::InsertElementOp::create(b, loc, vec, v1, i32(1));
  Value index = frag.gIndices[r * frag.pairs + jb];
  if (half)
    index = add(index, p.n);
  OpBuilder::InsertionGuard g(b);
  if (Value inside = frag.insides[r * frag.pairs + jb]) {
    auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
  }
  storeStream(vec, globalElement(bf16T, out, index), /*alignment=*/4);
}

Value KernelEmitter::consumerWarp() {
  return divu(sub(tid, i32(128 * cfg.producerWarpgroups)), 32);
}

void KernelEmitter::joinWarpPair() {
  // Named barriers 2 .. 2 + consumer warps / 2 (0 is the CTA's, 1 the
  // producer warpgroup's).
  NVVM::BarrierOp::create(b, loc, /*res=*/Type(),
                          add(divu(consumerWarp(), 2), 2), i32(64),
                          /*reductionOp=*/nullptr,
                          /*reductionPredicate=*/Value());
}

void KernelEmitter::roundDGateUpAlongM(const DGateUpFragment &frag,
                                       Value quad, int64_t jb0) {
  // Blocks of 32 rows of a column, for the columns of pairs jb0 .. jb0 + 3:
  // rows r = 0, 1 of the thread, the 8 lane rows of its warp (xor shuffles
  // over lane bits 2..4), then the other warp of the pair (warps 2 i and
  // 2 i + 1 of the consumers hold rows 32 i .. 32 i + 31 of the tile),
  // whose 16-row amaxes come through shared memory: lanes 0..3 store their
  // warp's, a named barrier joins the pair, every lane reads the partner's.
  // Each group of pairs has its own words, so one barrier per group does.
  MXQuantAttr quant = p.epilogue.dGateUpAlongM;
  auto vecT = VectorType::get({2}, f32T);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value warp = consumerWarp();
  Value lane = remu(tid, 32);
  int64_t warpWords = 2 * cfg.tileN;
  auto amaxAddress = [&](Value w, int64_t half, int64_t jb) {
    Value word = add(mul(toI64(w), warpWords),
                     add(toI64(mul(quad, 2)), half * cfg.tileN + 8 * jb));
    return smemPtr(smemAddr(add(mul(word, 4), lay.columnAmax)));
  };
  // amax[(half * 4 + jb - jb0) * 2 + e]
  Value amax[16];
  auto slot = [&](int64_t half, int64_t jb, int64_t e) {
    return (half * 4 + jb - jb0) * 2 + e;
  };
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t jb = jb0; jb < jb0 + 4; ++jb)
      for (int64_t e = 0; e < 2; ++e) {
        Value m = zero;
        for (int64_t r = 0; r < 2; ++r)
          m = buildAmaxStep(b, loc, m, frag.values[frag.at(half, r, jb, e)]);
        amax[slot(half, jb, e)] = buildLaneAmax(b, loc, m, {4, 8, 16});
      }
  {
    OpBuilder::InsertionGuard g(b);
    auto ifOp =
        scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::ult, lane, 4),
                          /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t jb = jb0; jb < jb0 + 4; ++jb) {
        Value vec = LLVM::UndefOp::create(b, loc, vecT);
        for (int64_t e = 0; e < 2; ++e)
          vec = LLVM::InsertElementOp::create(b, loc, vec,
                                              amax[slot(half, jb, e)], i32(e));
        LLVM::StoreOp::create(b, loc, vec, amaxAddress(warp, half, jb),
                              /*alignment=*/8);
      }
  }
  joinWarpPair();
  Value partner = xori(warp, i32(1));
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t jb = jb0; jb < jb0 + 4; ++jb) {
      Value other = LLVM::LoadOp::create(b, loc, vecT,
                                         amaxAddress(partner, half, jb), 8);
      std::array<Value, 2> inverse, factor;
      for (int64_t e = 0; e < 2; ++e) {
        Value m = buildAmaxStep(
            b, loc, amax[slot(half, jb, e)],
            LLVM::ExtractElementOp::create(b, loc, other, i32(e)));
        std::tie(inverse[e], factor[e]) = buildBlockScale(b, loc, m, quant);
      }
      for (int64_t r = 0; r < 2; ++r)
        roundAndStorePair(frag, half, r, jb, inverse, factor, quant,
                          dGateUpAlongMOut);
    }
}

void KernelEmitter::emitEpiloguePrefetch(Value thread, int64_t threads) {
  // Full tiles only: a bulk prefetch is whole 16-byte units inside the
  // buffer.
  if (p.m % cfg.tileM || p.n % cfg.tileN)
    return;
  if (p.epilogue.gateUpCheckpoint) {
    // The tile's rows lie in one block (tileM divides B): the block's gate
    // and up columns n0 .. n0 + tileN are two contiguous runs of tileN * B
    // bf16 (with tileM < B, the CTAs of the block's other rows read the
    // rest of the runs). Thread 0 issues both.
    if (p.blockSize % cfg.tileM)
      return;
    OpBuilder::InsertionGuard g(b);
    auto ifOp = scf::IfOp::create(b, loc, eq(thread, 0),
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value block = divu(toI64(m0), p.blockSize);
    for (int64_t half = 0; half < 2; ++half) {
      Value index = mul(add(add(mul(block, 2 * p.n), half * p.n), toI64(n0)),
                        p.blockSize);
      NVVM::CpAsyncBulkPrefetchOp::create(
          b, loc, globalElement(b.getBF16Type(), gateUp, index),
          i32(cfg.tileN * p.blockSize * 2), /*l2CacheHint=*/Value());
    }
    return;
  }
  // The tile's f32 gate and up rows: row r by thread r % threads.
  Value size = i32(cfg.tileN * 4);
  auto prefetchRow = [&](Value row) {
    Value g = add(mul(toI64(row), 2 * p.n), toI64(n0));
    for (Value index : {g, add(g, p.n)})
      NVVM::CpAsyncBulkPrefetchOp::create(
          b, loc, globalElement(f32T, gateUp, index), size,
          /*l2CacheHint=*/Value());
  };
  for (int64_t r0 = 0; r0 < cfg.tileM; r0 += threads) {
    if (cfg.tileM - r0 >= threads) {
      prefetchRow(add(add(m0, thread), r0));
      continue;
    }
    // Fewer rows than threads: the rest would prefetch another tile's.
    OpBuilder::InsertionGuard g(b);
    auto ifOp = scf::IfOp::create(
        b, loc, cmp(arith::CmpIPredicate::ult, thread, i32(cfg.tileM - r0)),
        /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    prefetchRow(add(add(m0, thread), r0));
  }
}

void KernelEmitter::emitConsumerFp8() {
  int64_t S = cfg.stages;
  int64_t blocksPerTile = cfg.tileK / cfg.mmaK;
  int64_t stride = cfg.scaleTableStride;
  MLIRContext *ctx = b.getContext();
  ConsumerLane lane = consumerLane();
  Value quad = lane.quad, rowInTile = lane.rowInTile;
  Value aWarpgroupOff = mul(toI64(lane.warpgroup), cfg.mmaM * cfg.tileK);
  Value row64 = toI64(rowInTile);
  Value quad64 = toI64(quad);

  auto shape = NVVM::MMAShapeAttr::get(ctx, cfg.mmaM, cfg.mmaN, cfg.mmaK);
  auto wgmma = [&](Value descA, Value descB, Value inout) -> Value {
    return NVVM::WgmmaMmaAsyncOp::create(
        b, loc, accT, inout, descA, descB, shape, NVVM::WGMMATypes::e4m3,
        NVVM::WGMMATypes::e4m3, NVVM::WGMMATypes::f32,
        NVVM::WGMMAScaleOut::zero, NVVM::WGMMAScaleIn::one,
        NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, NVVM::MMALayout::col,
        /*satfinite=*/nullptr);
  };
  // The f32 factors of block j of stage s: this thread's two rows of A and
  // the 32 columns of its lane quad of B (vector<4xf32> loads).
  auto loadScales = [&](Value s64, int64_t j) {
    Value sj = add(mul(s64, blocksPerTile), j);
    Value baseA = smemAddr(add(mul(sj, cfg.tileM * 4), lay.scaleA));
    Value baseB = smemAddr(add(mul(sj, 4 * stride * 4), lay.scaleB));
    Value pa0 = add(baseA, mul(row64, 4));
    std::array<Value, 2> fa = {
        LLVM::LoadOp::create(b, loc, f32T, smemPtr(pa0), /*alignment=*/4),
        LLVM::LoadOp::create(b, loc, f32T, smemPtr(add(pa0, 8 * 4)),
                             /*alignment=*/4)};
    Value pb = add(baseB, mul(quad64, stride * 4));
    auto vec4 = VectorType::get({4}, f32T);
    SmallVector<Value> fb;
    for (int64_t k4 = 0; k4 < accLen() / 2 / 4; ++k4) {
      Value v = LLVM::LoadOp::create(b, loc, vec4, smemPtr(add(pb, 16 * k4)),
                                     /*alignment=*/16);
      for (int64_t u = 0; u < 4; ++u)
        fb.push_back(LLVM::ExtractElementOp::create(b, loc, v, i32(u)));
    }
    return std::make_pair(fa, fb);
  };
  // acc[i] = fma(P[i], fa[row half] * fb[column slot], acc[i]). Fragment i
  // of the accumulator: row half (i / 2) % 2, column slot 2 * (i / 4) +
  // i % 2 (column 8 * (i / 4) + 2 * quad + i % 2).
  auto promote = [&](Value acc, Value &partial, std::array<Value, 2> fa,
                     ArrayRef<Value> fb) {
    partial = pinRegisters(partial);
    for (int64_t i = 0; i < accLen(); ++i) {
      Value f = LLVM::FMulOp::create(b, loc, fa[(i / 2) % 2],
                                     fb[2 * (i / 4) + i % 2]);
      Value sum = LLVM::FMAOp::create(b, loc, extract(partial, i), f,
                                      extract(acc, i));
      acc = LLVM::InsertValueOp::create(b, loc, acc, sum,
                                        ArrayRef<int64_t>{i});
    }
    return acc;
  };

  Value zero = LLVM::ZeroOp::create(b, loc, accT);
  auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1),
                                 ValueRange{zero, zero, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = loop.getInductionVar();
    Value acc = loop.getRegionIterArg(0);
    std::array<Value, 2> partials = {loop.getRegionIterArg(1),
                                     loop.getRegionIterArg(2)};
    auto [s, parity] = stageAndParity(t, S, /*flip=*/false);
    waitParity(s, parity);
    Value s64 = indexToI64(s);
    Value stageOffA = mul(s64, cfg.tileM * cfg.tileK);
    Value stageOffB = mul(s64, cfg.tileN * cfg.tileK);
    Value descA =
        matrixDescriptor(smemAddr(add(add(stageOffA, aWarpgroupOff), lay.a)));
    Value descB = matrixDescriptor(smemAddr(add(stageOffB, lay.b)));
    // Block j is issued before block j - 1 is promoted, so the tensor cores
    // run while the FP32 pipe promotes. The last block is drained with
    // wait_group 0 inside the tile (C7514 otherwise).
    for (int64_t j = 0; j < blocksPerTile; ++j) {
      // Advance the start addresses by j * 32 bytes (16-byte units).
      Value da = j ? add(descA, 2 * j) : descA;
      Value db = j ? add(descB, 2 * j) : descB;
      NVVM::WgmmaFenceAlignedOp::create(b, loc);
      partials[j % 2] = wgmma(da, db, partials[j % 2]);
      NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
      if (j == 0)
        continue;
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);
      auto [fa, fb] = loadScales(s64, j - 1);
      acc = promote(acc, partials[(j - 1) % 2], fa, fb);
    }
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    auto [fa, fb] = loadScales(s64, blocksPerTile - 1);
    // The stage's smem is read completely: hand it back to the producer.
    arrive(add(s, S));
    acc = promote(acc, partials[(blocksPerTile - 1) % 2], fa, fb);
    scf::YieldOp::create(b, loc, ValueRange{acc, partials[0], partials[1]});
  }
  storeAccumulator(loop.getResult(0), rowInTile, quad);
}

SmallVector<Value> KernelEmitter::bf16Factors(Value scaleByte,
                                              bool twoFactors,
                                              Type codeType) {
  int64_t bias = exponentBias(codeType ? codeType : p.elementType);
  // The codes were placed into bf16 as q * 2^(bias - 127): the factors
  // multiply by 2^(s - 127) * 2^(127 - bias) = 2^(s - bias), whose bf16
  // exponent field is s + 127 - bias. It fits one bf16 up to s = 127 + bias.
  int64_t limit = 127 + bias;
  auto splat = [&](Value bits) { return ori(bits, shl(bits, 16)); };
  if (!twoFactors)
    return {splat(shl(add(scaleByte, 127 - bias), 7))};
  Value lo = arith::MinUIOp::create(b, loc, scaleByte, i32(limit));
  Value hi = arith::MaxUIOp::create(b, loc, scaleByte, i32(limit));
  Value first = shl(add(lo, 127 - bias), 7);
  // hi - limit + 127 = hi - bias; a NaN scale (255) makes a NaN factor.
  Value second = select(eq(scaleByte, 255), i32(0x7FC0), shl(sub(hi, i32(bias)), 7));
  return {splat(first), splat(second)};
}

SmallVector<Value> KernelEmitter::dequantizeChunk(Value chunk,
                                                  ArrayRef<Value> factors) {
  SmallVector<Value> words;
  for (int64_t w = 0; w < 4; ++w) {
    Value word = LLVM::ExtractElementOp::create(b, loc, chunk, i32(w));
    auto [low, high] = dequantizeWord(word, factors, p.elementType);
    words.push_back(low);
    words.push_back(high);
  }
  return words;
}

std::pair<Value, Value> KernelEmitter::dequantizeWord(Value word,
                                                      ArrayRef<Value> factors,
                                                      Type codeType) {
  // prmt puts codes 0, 1 (then 2, 3) into the high bytes of two 16-bit
  // lanes.
  SmallVector<Value, 2> words;
  for (StringRef selector : {"0x1404", "0x3424"}) {
    Value lanes =
        inlinePtx(i32T, word, ("prmt.b32 $0, $1, 0, " + selector + ";").str(),
                  "=r,r", /*sideEffects=*/false);
    words.push_back(decodeCodeLanes(lanes, factors, codeType));
  }
  return {words[0], words[1]};
}

Value KernelEmitter::decodeCodeLanes(Value lanes, ArrayRef<Value> factors,
                                     Type codeType) {
  bool e5m2 = exponentBias(codeType) == 15;
  // Sign stays in bit 15; exponent and mantissa move to the low bits of the
  // bf16 exponent field and the top of its mantissa.
  int64_t shift = e5m2 ? 3 : 4;
  int64_t mask = e5m2 ? 0x0FE00FE0 : 0x07F007F0;
  auto bf16x2 = VectorType::get({2}, b.getBF16Type());
  Value bits = ori(andi(lanes, static_cast<int64_t>(0x80008000)),
                   andi(shru(lanes, shift), mask));
  for (Value factor : factors) {
    Value x = LLVM::BitcastOp::create(b, loc, bf16x2, bits);
    Value f = LLVM::BitcastOp::create(b, loc, bf16x2, factor);
    Value product = LLVM::FMulOp::create(b, loc, x, f);
    bits = LLVM::BitcastOp::create(b, loc, i32T, product);
  }
  return bits;
}

SmallVector<SmallVector<Value>>
KernelEmitter::decodeLhsStage(Value d, const ConsumerLane &lane) {
  // Rows row and row + 8 of each M step: 16 code bytes each at byte 16 q
  // of the row (all four k16 steps of the lane, LhsCodeLayout.h), and the
  // row's two scale bytes (32-column blocks 0 and 1 of the K tile: k16
  // steps 0, 1 and 2, 3).
  Type codeType = p.lhsElementType;
  int64_t steps = mSteps();
  Value codesBase = smemAddr(add(mul(d, cfg.tileM * cfg.tileK), lay.a));
  Value scalesBase =
      smemAddr(add(mul(d, cfg.tileM * (cfg.tileK / 32)), lay.aScales));
  auto vec4 = VectorType::get({4}, i32T);
  // (The byte of column 2 q, the lane's first of k16 step 0.)
  Value quadBytes = toI64(lhsCodeByte(IROps{*this}, mul(lane.quad, 2)));
  SmallVector<Value> chunks, scales;
  for (int64_t m = 0; m < steps; ++m)
    for (int64_t half = 0; half < 2; ++half) {
      int64_t offset = m * cfg.mmaM + 8 * half;
      Value row = toI64(offset ? add(lane.rowInTile, offset) : lane.rowInTile);
      Value src = add(add(codesBase, mul(row, cfg.tileK)), quadBytes);
      chunks.push_back(LLVM::LoadOp::create(b, loc, vec4, smemPtr(src), 16));
      Value pair = LLVM::LoadOp::create(
          b, loc, b.getI16Type(),
          smemPtr(add(scalesBase, mul(row, cfg.tileK / 32))), 2);
      Value bytes = arith::ExtUIOp::create(b, loc, i32T, pair);
      scales.push_back(andi(bytes, 0xFF));
      scales.push_back(shru(bytes, 8));
    }
  // One bf16 factor per code unless a scale byte of the warp needs two
  // (warp-uniform: the vote's branch).
  Value largest = i32(0);
  for (Value scale : scales)
    largest = arith::MaxUIOp::create(b, loc, largest, scale);
  Value anyBig = NVVM::VoteSyncOp::create(
      b, loc, i1T, i32(-1),
      cmp(arith::CmpIPredicate::ugt, largest, 127 + exponentBias(codeType)),
      NVVM::VoteSyncKind::any);
  int64_t words = 16 * steps;
  auto decode = [&](bool twoFactors) {
    SmallVector<Value> regs(words);
    for (int64_t m = 0; m < steps; ++m)
      for (int64_t half = 0; half < 2; ++half) {
        int64_t at = 2 * m + half;
        SmallVector<Value> factors[2] = {
            bf16Factors(scales[2 * at], twoFactors, codeType),
            bf16Factors(scales[2 * at + 1], twoFactors, codeType)};
        for (int64_t j = 0; j < 4; ++j) {
          Value word =
              LLVM::ExtractElementOp::create(b, loc, chunks[at], i32(j));
          auto [low, high] = dequantizeWord(word, factors[j / 2], codeType);
          // a0 / a2: row g, columns 2q, 2q + 1 and 2q + 8, 2q + 9; a1 / a3
          // the same of row g + 8.
          regs[16 * m + 4 * j + half] = low;
          regs[16 * m + 4 * j + 2 + half] = high;
        }
      }
    return regs;
  };
  auto ifOp = scf::IfOp::create(b, loc, SmallVector<Type>(words, i32T), anyBig,
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, decode(/*twoFactors=*/true));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, decode(/*twoFactors=*/false));
  }
  SmallVector<SmallVector<Value>> fragments(steps);
  for (int64_t m = 0; m < steps; ++m)
    fragments[m] = llvm::to_vector_of<Value>(ifOp.getResults().slice(16 * m, 16));
  return fragments;
}

namespace {
// round_lhs: ldmatrix.x4.trans lane `l` addresses row l % 8 of matrix l / 8.
// Matrix j (a_j of a k16 step) is slot rows 8 (j / 2) .. 8 (j / 2) + 7 of
// the step, 16-byte chunk 2 w + j % 2 (8 M columns) of warp w's 16 rows of
// the warpgroup's 64-column box. Written once for integers
// (roundLhsIndexingAgrees) and IR values (roundLhsStage).
template <typename Ops, typename V> V roundLhsSlotRow(Ops &o, V lane) {
  return o.add(o.mul(o.div(o.div(lane, 8), 2), 8), o.rem(lane, 8));
}
template <typename Ops, typename V>
V roundLhsChunk(Ops &o, V lane, V warp) {
  return o.add(o.mul(warp, 2), o.rem(o.div(lane, 8), 2));
}
// The K-major lhs (a block GEMM's weight, swap_operands): ldmatrix.x4
// without .trans, lane `l` addresses row l % 8 of matrix l / 8; matrix j is
// rows 8 (j % 2) .. + 7 of warp w's 16 rows of the warpgroup's 64, 16-byte
// chunk 2 i + j / 2 (8 K columns) of k16 step i.
template <typename Ops, typename V> V roundLhsKRow(Ops &o, V lane, V warp) {
  V warpRows = o.mul(warp, 16);
  V inMatrix = o.rem(lane, 8);
  V matrix = o.div(lane, 8);
  V half = o.rem(matrix, 2);
  V halfRows = o.mul(half, 8);
  V rows = o.add(warpRows, inMatrix);
  return o.add(rows, halfRows);
}
template <typename Ops, typename V> V roundLhsKChunk(Ops &o, V lane) {
  return o.div(lane, 16);
}
} // namespace

bool moe::roundLhsIndexingAgrees() {
  IntOps o;
  for (int64_t warp = 0; warp < 4; ++warp) {
    for (int64_t lane = 0; lane < 32; ++lane) {
      int64_t g = lane / 4, q = lane % 4;
      // .trans: register j of lane (g, q) holds element g of rows 2 q
      // (its low half) and 2 q + 1 (its high half) of matrix j, which lanes
      // 8 j + 2 q and 8 j + 2 q + 1 address. The wgmma A fragment: a_j is
      // row g + 8 (j % 2) of the warp's 16, columns 2 q + 8 (j / 2) and the
      // next (PTX ISA, "Matrix fragments for wgmma.mma_async", .bf16).
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t half = 0; half < 2; ++half) {
          int64_t source = 8 * j + 2 * q + half;
          int64_t column = 8 * roundLhsChunk(o, source, warp) + g;
          if (column != 16 * warp + 8 * (j % 2) + g ||
              roundLhsSlotRow(o, source) != 8 * (j / 2) + 2 * q + half)
            return false;
        }
    }
    // The swizzle puts chunk c of slot row r at c ^ (r % 8) (a k16 step
    // starts at a multiple of 8 rows).
    for (int64_t j = 0; j < 4; ++j) {
      unsigned groups = 0;
      for (int64_t r = 0; r < 8; ++r) {
        int64_t lane = 8 * j + r;
        int64_t row = roundLhsSlotRow(o, lane);
        groups |= 1u << (roundLhsChunk(o, lane, warp) ^ (row % 8));
      }
      if (groups != 0xFF)
        return false;
    }
    // K-major: register j of lane (g, q) holds elements 2 q and 2 q + 1 of
    // row g of matrix j (lane 8 j + g's row), which must be a_j: row
    // g + 8 (j % 2) of the warp's 16, columns 8 (j / 2) + 2 q and the next
    // of the k16 step; each matrix's 8 rows in 8 bank groups of every step.
    for (int64_t lane = 0; lane < 32; ++lane) {
      int64_t g = lane / 4;
      for (int64_t j = 0; j < 4; ++j) {
        int64_t source = 8 * j + g;
        if (roundLhsKRow(o, source, warp) != 16 * warp + g + 8 * (j % 2) ||
            roundLhsKChunk(o, source) != j / 2)
          return false;
      }
    }
    for (int64_t step = 0; step < 4; ++step)
      for (int64_t j = 0; j < 4; ++j) {
        unsigned groups = 0;
        for (int64_t r = 0; r < 8; ++r) {
          int64_t lane = 8 * j + r;
          int64_t row = roundLhsKRow(o, lane, warp);
          groups |= 1u << ((2 * step + roundLhsKChunk(o, lane)) ^ (row % 8));
        }
        if (groups != 0xFF)
          return false;
      }
  }
  return true;
}

SmallVector<SmallVector<Value>> KernelEmitter::roundLhsStage(Value boxes) {
  MLIRContext *ctx = b.getContext();
  MXQuantAttr quant = p.roundLhs;
  Type codeType = getMXElementType(ctx, quant.getElement());
  int64_t steps = mSteps();
  // A box is 64 lhs rows (M) of 128 bytes by tileK slot rows (K), 128B
  // swizzled: chunk c of slot row r at r * 128 + (c ^ (r % 8)) * 16. Warp w
  // of the warpgroup takes the M rows 16 w .. 16 w + 15, chunks 2 w and
  // 2 w + 1; its ldmatrix.x4.trans of a k16 step gives each lane a0..a3
  // (roundLhsSlotRow, roundLhsChunk: roundLhsIndexingAgrees).
  assert(roundLhsIndexingAgrees() && "round_lhs ldmatrix rows vs wgmma A");
  IROps ops{*this};
  Value lane = remu(tid, 32);
  Value warp = remu(divu(tid, 32), 4);
  // The shared offset of this lane's row of k16 step i of M step m:
  // M-major, a constant 16 slot rows a step on; K-major (a block GEMM's
  // weight, ldmatrix without .trans), the swizzled chunk 2 i + j / 2 of
  // its row, (2 i) ^ (its chunk ^ row % 8).
  SmallVector<Value> stepOffsets;
  if (cfg.lhsMMajor) {
    Value slotRow = roundLhsSlotRow(ops, lane);
    Value chunk = roundLhsChunk(ops, lane, warp);
    Value rowBytes = mul(slotRow, kSwizzleBytes);
    Value unit = xori(chunk, remu(slotRow, 8));
    Value laneOff = toI64(add(rowBytes, mul(unit, 16)));
    for (int64_t i = 0; i < 4; ++i)
      stepOffsets.push_back(add(laneOff, i * 16 * kSwizzleBytes));
  } else {
    // (One op per statement: the same op order from every compiler.)
    Value row = roundLhsKRow(ops, lane, warp);
    Value chunk = roundLhsKChunk(ops, lane);
    Value phase = remu(row, 8);
    Value unit0 = xori(chunk, phase);
    Value rowOff = toI64(mul(row, kSwizzleBytes));
    for (int64_t i = 0; i < 4; ++i) {
      Value unit = xori(unit0, i32(2 * i));
      stepOffsets.push_back(add(rowOff, toI64(mul(unit, 16))));
    }
  }
  int64_t stepBytes =
      cfg.lhsMMajor ? cfg.tileK * kSwizzleBytes : cfg.mmaM * kSwizzleBytes;
  auto fragT =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(4, i32T));
  auto max16x2 = [&](Value x, Value y) { return buildMaxU16x2(b, loc, x, y); };
  auto prmt = [&](Value x, Value y, StringRef selector) {
    return inlinePtx(i32T, ValueRange{x, y},
                     ("prmt.b32 $0, $1, $2, " + selector + ";").str(), "=r,r,r",
                     /*sideEffects=*/false);
  };
  // RCEIL blocks round on the bits (mxRoundPairBits) unless a block of the
  // warp does not fit (mxBitsBlockFits: NaN, Inf, near bf16's overflow,
  // tiny and nonzero); the warp then takes the FP8 conversions below.
  bool bitRounding = hasMXBitRounding(quant.getRule());
  SmallVector<SmallVector<Value>> fragments(steps);
  for (int64_t m = 0; m < steps; ++m) {
    // All four k16 steps' loads first.
    SmallVector<Value> regs;
    for (int64_t i = 0; i < 4; ++i) {
      Value at = smemAddr(add(add(boxes, i64(m * stepBytes)), stepOffsets[i]));
      Value frag = NVVM::LdMatrixOp::create(
          b, loc, fragT, smemPtr(at), b.getI32IntegerAttr(4),
          NVVM::MMALayoutAttr::get(ctx, cfg.lhsMMajor ? NVVM::MMALayout::col
                                                      : NVVM::MMALayout::row),
          NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
          NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
      for (int64_t j = 0; j < 4; ++j)
        regs.push_back(extract(frag, j));
    }
    // 32-slot block k (k16 steps 2 k, 2 k + 1): row g's words are a0, a2
    // of both steps, row g + 8's a1, a3.
    int64_t blocks = cfg.tileK / 32;
    auto word = [&](int64_t k, int64_t step, int64_t r) {
      return 4 * (2 * k + step) + r;
    };
    SmallVector<Value> both;
    for (int64_t k = 0; k < blocks; ++k) {
      // (The amaxes by bf16 arithmetic, mxPairAmaxBits: the scale bytes
      // of buildAmaxStep's order, NaN above Inf.)
      Value rowG = buildMXPairAmaxBits(
          b, loc,
          {regs[word(k, 0, 0)], regs[word(k, 0, 2)], regs[word(k, 1, 0)],
           regs[word(k, 1, 2)]});
      Value rowG8 = buildMXPairAmaxBits(
          b, loc,
          {regs[word(k, 0, 1)], regs[word(k, 0, 3)], regs[word(k, 1, 1)],
           regs[word(k, 1, 3)]});
      // Row g's even and odd slots in the low lanes, row g + 8's in the
      // high ones: their maxima are the rows' amaxes, then the quad's.
      Value even = prmt(rowG, rowG8, "0x5410");
      Value odd = prmt(rowG, rowG8, "0x7632");
      Value pair = max16x2(even, odd);
      for (int32_t offset : {1, 2}) {
        Value other = gpu::ShuffleOp::create(b, loc, pair, i32(offset), i32(32),
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult();
        pair = max16x2(pair, other);
      }
      both.push_back(pair);
    }
    // Word i is row g + 8 ((i % 4) % 2)'s, of block i / 8.
    auto slowPath = [&]() -> SmallVector<Value> {
      // The quad shares its 2 rows x 2 blocks of scales: lane q computes the
      // scale byte of (row g + 8 (q % 2), block q / 2) from that amax (its
      // bits in the top half of an f32: the exact widening), and two xor
      // shuffles gather the four bytes into one word, byte q lane q's.
      Value q = remu(lane, 4);
      Value blockWord = select(eq(divu(q, 2), 0), both[0], both[blocks - 1]);
      Value amaxBits = select(eq(remu(q, 2), 0), shl(blockWord, 16),
                              andi(blockWord, -65536));
      Value scaleByte = buildScaleByte(
          b, loc, arith::BitcastOp::create(b, loc, f32T, amaxBits).getResult(),
          quant.getElement(), quant.getRule());
      Value bytes = arith::ShLIOp::create(
          b, loc, arith::ExtUIOp::create(b, loc, i32T, scaleByte), mul(q, 8));
      for (int32_t offset : {1, 2})
        bytes =
            ori(bytes, gpu::ShuffleOp::create(b, loc, bytes, i32(offset),
                                              i32(32), gpu::ShuffleMode::XOR)
                           .getShuffleResult());
      // Byte 2 k + h is (row g + 8 h, block k)'s.
      SmallVector<Value> scaleBytes, inverses;
      for (int64_t c = 0; c < 2 * blocks; ++c) {
        scaleBytes.push_back(andi(shru(bytes, 8 * c), 0xFF));
        inverses.push_back(buildInverseScale(
            b, loc,
            arith::TruncIOp::create(b, loc, b.getI8Type(), scaleBytes.back())));
      }
      // The codes of each word (its row's inverse).
      SmallVector<Value> lanes;
      for (int64_t i = 0; i < 16; ++i) {
        Value inverse = inverses[2 * (i / 8) + (i % 4) % 2];
        lanes.push_back(encodeWordLanes(regs[i], inverse, inverse, codeType));
      }
      // One bf16 factor per code unless a scale byte of the warp needs two
      // (bf16Factors; the vote is warp-uniform, as lhs_codes').
      Value largest = scaleBytes[0];
      for (Value byte : ArrayRef<Value>(scaleBytes).drop_front())
        largest = arith::MaxUIOp::create(b, loc, largest, byte);
      Value anyBig = NVVM::VoteSyncOp::create(
          b, loc, i1T, i32(-1),
          cmp(arith::CmpIPredicate::ugt, largest, 127 + exponentBias(codeType)),
          NVVM::VoteSyncKind::any);
      auto decode = [&](bool twoFactors) {
        SmallVector<SmallVector<Value>> factors;
        for (Value byte : scaleBytes)
          factors.push_back(bf16Factors(byte, twoFactors, codeType));
        SmallVector<Value> words;
        for (int64_t i = 0; i < 16; ++i)
          words.push_back(decodeCodeLanes(
              lanes[i], factors[2 * (i / 8) + (i % 4) % 2], codeType));
        return words;
      };
      auto ifOp = scf::IfOp::create(b, loc, SmallVector<Type>(16, i32T), anyBig,
                                    /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        scf::YieldOp::create(b, loc, decode(/*twoFactors=*/true));
        b.setInsertionPointToStart(ifOp.elseBlock());
        scf::YieldOp::create(b, loc, decode(/*twoFactors=*/false));
      }
      return llvm::to_vector_of<Value>(ifOp.getResults());
    };
    if (!bitRounding) {
      fragments[m] = slowPath();
      continue;
    }
    // A block of the warp's that does not fit sends it to the conversions.
    Value anyMisfit = buildWarpMXBitsMisfit(b, loc, both, quant.getElement());
    auto ifOp = scf::IfOp::create(b, loc, SmallVector<Type>(16, i32T),
                                  anyMisfit, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(b, loc, slowPath());
      b.setInsertionPointToStart(ifOp.elseBlock());
      // Both rows' bounds of each block, then each word's row's in both
      // lanes.
      SmallVector<Value> rowBounds;
      for (Value pair : both) {
        Value bound = buildMXThresholdPair(b, loc, pair, quant.getElement());
        rowBounds.push_back(prmt(bound, bound, "0x1010"));
        rowBounds.push_back(prmt(bound, bound, "0x3232"));
      }
      SmallVector<Value> words;
      for (int64_t i = 0; i < 16; ++i)
        words.push_back(buildMXRoundPairBits(
            b, loc, regs[i],
            rowBounds[2 * (i / 8) + (i % 4) % 2], quant.getElement()));
      scf::YieldOp::create(b, loc, words);
    }
    fragments[m] = llvm::to_vector_of<Value>(ifOp.getResults());
  }
  return fragments;
}

Value KernelEmitter::wgmmaRegisterA(Value acc, ArrayRef<Value> a, Value descB,
                                    bool accumulate, bool transB,
                                    Value startAt) {
  int64_t n = accLen();
  SmallVector<Value> operands;
  std::string constraints, text;
  llvm::raw_string_ostream os(text);
  for (int64_t i = 0; i < n; ++i) {
    operands.push_back(extract(acc, i));
    constraints += i ? ",=f" : "=f";
  }
  for (int64_t i = 0; i < n; ++i)
    constraints += "," + std::to_string(i);
  operands.append(a.begin(), a.end());
  // (startAt: scale-d 0 where it holds, from a register.)
  constraints += startAt ? ",r,r,r,r,l,r" : ",r,r,r,r,l,n";
  operands.push_back(descB);
  if (startAt) {
    Value start = arith::ExtUIOp::create(b, loc, i32T, startAt);
    Value one = i32(1);
    operands.push_back(arith::XOrIOp::create(b, loc, start, one));
  } else {
    operands.push_back(i32(accumulate ? 1 : 0));
  }
  // The accumulators tied to themselves, then a0..a3, the descriptor and
  // scale-d (a predicate, set from the immediate or register).
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << 2 * n + 5
     << ", 0;\nwgmma.mma_async.sync.aligned.m64n" << cfg.mmaN
     << "k16.f32.bf16.bf16 {";
  for (int64_t i = 0; i < n; ++i)
    os << (i ? ", $" : "$") << i;
  os << "}, {$" << 2 * n << ", $" << 2 * n + 1 << ", $" << 2 * n + 2 << ", $"
     << 2 * n + 3 << "}, $" << 2 * n + 4 << ", p, 1, 1, " << (transB ? 1 : 0)
     << ";\n}\n";
  return inlinePtx(accT, operands, text, constraints, /*sideEffects=*/true);
}

void KernelEmitter::emitProducerBf16() {
  int64_t S = cfg.stages;
  int64_t SD = cfg.dequantStages;
  int64_t rowsPerThread = cfg.tileM / 16;
  // A 128-row x 128-byte panel of a 128B-swizzled tile.
  int64_t panelBytes = cfg.tileM * kSwizzleBytes;
  MLIRContext *ctx = b.getContext();
  // Thread -> (rows rb + 16 i, 16-byte code chunk c of each row). A
  // quarter-warp takes chunks 0-3 of one row and 4-7 of the next (their
  // swizzle phases differ), so its 16-byte loads and its two 16-byte bf16
  // stores per chunk each hit 8 different bank groups.
  Value pt = remu(tid, 128);
  Value x16 = remu(pt, 16);
  Value qq = divu(x16, 8);
  Value hh = remu(divu(x16, 4), 2);
  Value rb = add(mul(divu(pt, 16), 2), hh);
  Value c = add(remu(x16, 4), mul(xori(hh, qq), 4));
  // Row % 8 (the swizzle phase) is the same for all rows of the thread.
  Value sw = remu(rb, 8);
  Value kbl = divu(c, 2);
  Value srcOff = toI64(mul(xori(c, sw), 16));
  Value cc0 = mul(remu(c, 4), 2);
  Value dstOff0 = toI64(mul(xori(cc0, sw), 16));
  Value dstOff1 = toI64(mul(xori(add(cc0, 1), sw), 16));
  Value panelOff = toI64(mul(divu(c, 4), panelBytes));
  Value rb64 = toI64(rb);

  // Warpgroup 0 converts A, warpgroup 1 converts B.
  Value isB = cmp(arith::CmpIPredicate::uge, tid, 128);
  Value row0 = select(isB, rowB0, m0);
  Value rowLimit = select(isB, i32(rowsB()), i32(p.m));
  Value table = LLVM::SelectOp::create(b, loc, isB, scalesB, scalesA);
  Value offS = select(isB, i64(lay.b), i64(lay.a));
  Value offD = select(isB, i64(lay.bDq), i64(lay.aDq));
  int64_t scaleColumns = p.k / 32;
  Value kb0 = divu(indexToI32(kBegin), 32);

  // The scale bytes of this thread's rows in K tile t32; bytes outside the
  // scale matrix read as 127 (their codes are TMA zero fill).
  auto loadScales = [&](Value t32) {
    SmallVector<Value> bytes;
    Value kb = add(add(kb0, mul(t32, cfg.tileK / 32)), kbl);
    Value kbInside = cmp(arith::CmpIPredicate::ult, kb, scaleColumns);
    for (int64_t i = 0; i < rowsPerThread; ++i) {
      Value row = add(row0, add(rb, 16 * i));
      Value inside =
          andi(kbInside, cmp(arith::CmpIPredicate::ult, row, rowLimit));
      Value ix = add(mul(toI64(row), scaleColumns), toI64(kb));
      ix = select(inside, ix, i64(0));
      Value byte = loadGlobal(b.getI8Type(),
                              globalElement(b.getI8Type(), table, ix), 1);
      bytes.push_back(
          select(inside, arith::ExtUIOp::create(b, loc, i32T, byte), i32(127)));
    }
    return bytes;
  };

  // Prologue: thread 0 fills stages 0 .. S-2.
  for (int64_t t = 0; t + 1 < S; ++t) {
    Value go = andi(isThread0, cmp(arith::CmpIPredicate::ult, idx(t), kTiles));
    auto ifOp = scf::IfOp::create(b, loc, go, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    loadTile(idx(t), idx(t));
  }
  SmallVector<Value> first = loadScales(i32(0));
  auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1), first);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value t = loop.getInductionVar();
  // Thread 0 refills the stage of tile t + S - 1 once it is free.
  {
    Value tn = add(t, S - 1);
    Value go = andi(isThread0, cmp(arith::CmpIPredicate::ult, tn, kTiles));
    auto ifOp = scf::IfOp::create(b, loc, go, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    auto [sn, parity] = stageAndParity(tn, S, /*flip=*/true);
    waitParity(add(sn, S), parity);
    loadTile(tn, sn);
  }
  auto [s, parity] = stageAndParity(t, S, /*flip=*/false);
  waitParity(s, parity);
  auto [d, parityD] = stageAndParity(t, SD, /*flip=*/true);
  waitParity(add(d, 2 * S + SD), parityD);
  // The next tile's scale bytes load while this tile converts (the last
  // iteration reloads its own).
  Value next = arith::MinUIOp::create(b, loc, indexToI32(add(t, 1)),
                                      indexToI32(sub(kTiles, idx(1))));
  SmallVector<Value> nextScales = loadScales(next);
  ValueRange scales = loop.getRegionIterArgs();

  Value s64 = indexToI64(s);
  Value d64 = indexToI64(d);
  Value stage = add(alignedBase, add(mul(s64, cfg.tileM * cfg.tileK), offS));
  Value dq = add(add(alignedBase, add(mul(d64, 2 * cfg.tileM * cfg.tileK),
                                      offD)),
                 panelOff);
  auto vec4 = VectorType::get({4}, i32T);
  auto convert = [&](bool twoFactors) {
    SmallVector<std::pair<Value, Value>> rows;
    // All loads first: independent 16-byte chunks in flight.
    for (int64_t i = 0; i < rowsPerThread; ++i) {
      Value rowOff = mul(add(rb64, 16 * i), kSwizzleBytes);
      Value src = add(add(stage, rowOff), srcOff);
      rows.push_back(
          {rowOff, LLVM::LoadOp::create(b, loc, vec4, smemPtr(src), 16)});
    }
    for (int64_t i = 0; i < rowsPerThread; ++i) {
      auto [rowOff, chunk] = rows[i];
      SmallVector<Value> words =
          dequantizeChunk(chunk, bf16Factors(scales[i], twoFactors));
      for (int64_t half = 0; half < 2; ++half) {
        Value vec = LLVM::UndefOp::create(b, loc, vec4);
        for (int64_t u = 0; u < 4; ++u)
          vec = LLVM::InsertElementOp::create(b, loc, vec, words[4 * half + u],
                                              i32(u));
        Value dst = add(add(dq, rowOff), half ? dstOff1 : dstOff0);
        LLVM::StoreOp::create(b, loc, vec, smemPtr(dst), 16);
      }
    }
  };
  // One bf16 factor per code unless a scale byte of the warp needs two.
  Value largest = scales[0];
  for (Value byte : scales.drop_front())
    largest = arith::MaxUIOp::create(b, loc, largest, byte);
  Value big = cmp(arith::CmpIPredicate::ugt, largest,
                  127 + exponentBias(p.elementType));
  Value anyBig = NVVM::VoteSyncOp::create(b, loc, i1T, i32(-1), big,
                                          NVVM::VoteSyncKind::any);
  auto ifOp = scf::IfOp::create(b, loc, anyBig, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    convert(/*twoFactors=*/true);
    b.setInsertionPointToStart(ifOp.elseBlock());
    convert(/*twoFactors=*/false);
  }
  // The generic-proxy stores must be visible to wgmma (async proxy).
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  arrive(add(d, 2 * S));
  arrive(add(s, S));
  scf::YieldOp::create(b, loc, nextScales);
}

void KernelEmitter::emitProducerBf16Operands() {
  // Thread 0 alone streams the K tiles through the ring; the others of the
  // warpgroup have nothing to do. (lhs_gather: all of them copy lhs rows.)
  OpBuilder::InsertionGuard guard(b);
  if (!cfg.lhsGather) {
    auto ifOp = scf::IfOp::create(b, loc, isThread0, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
  } else {
    loadGatherTokens();
  }
  forEachEmptyStage([&](Value t, Value s) {
    if (!cfg.lhsGather)
      return loadTile(t, s);
    {
      OpBuilder::InsertionGuard inner(b);
      auto tma =
          scf::IfOp::create(b, loc, isThread0, /*withElseRegion=*/false);
      b.setInsertionPointToStart(tma.thenBlock());
      loadTile(t, s);
    }
    gatherLhsStage(t, s);
  });
}

void KernelEmitter::forEachEmptyStage(function_ref<void(Value, Value)> body) {
  OpBuilder::InsertionGuard guard(b);
  auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1));
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value t = loop.getInductionVar();
  // The ring position of K tile t (persistent: after the earlier output
  // tiles' K tiles).
  Value g = ringBase ? add(ringBase, t) : t;
  auto [s, parity] = stageAndParity(g, cfg.stages, /*flip=*/true);
  waitParity(add(s, cfg.stages), parity);
  body(t, s);
}

void KernelEmitter::emitConsumerBf16(int64_t depth, int64_t fullBase,
                                     int64_t emptyBase, int64_t offA,
                                     int64_t offB, int64_t strideA,
                                     int64_t strideB, int64_t panels) {
  int64_t SD = depth;
  int64_t panelBytesA = cfg.tileM * kSwizzleBytes;
  int64_t panelBytesB = cfg.tileN * kSwizzleBytes;
  int64_t stepsPerPanel = kSwizzleBytes / 2 / cfg.mmaK;
  MLIRContext *ctx = b.getContext();
  ConsumerLane lane = consumerLane();
  Value quad = lane.quad, rowInTile = lane.rowInTile;
  // The mmaM rows of A of M step `m`: K-major, those rows of the tile;
  // M-major, that 64-column box (mmaM = 64). A cooperative warpgroup's one
  // step is its own rows, a ping-pong one's steps cover the tile.
  int64_t rowsBytes =
      cfg.lhsMMajor ? cfg.tileK * kSwizzleBytes : cfg.mmaM * kSwizzleBytes;
  Value aWarpgroupOff =
      cfg.pingpong ? i64(0) : mul(toI64(lane.warpgroup), rowsBytes);
  auto shape = NVVM::MMAShapeAttr::get(ctx, cfg.mmaM, cfg.mmaN, cfg.mmaK);
  int64_t steps = mSteps();
  // Turns at the tensor cores (ping-pong's over tiles, k_turns' over K
  // tiles): warpgroup 0 takes the first turn (its own arrival and its wait
  // make the barrier's 256), and at the end the warpgroup whose turn is
  // next takes it back, so that every arrival on the turn barriers is met
  // before the CTA exits (k_turns: warpgroup 0, both warpgroups having
  // run the same K tiles; ping-pong: that of the tiles received mod 2; a
  // CTA without K tiles or tiles: warpgroup 0's first arrival and its last
  // wait).
  bool turns = cfg.kTurns || cfg.pingpong;
  auto turnOf = [&](Value owner, bool wait) {
    OpBuilder::InsertionGuard g(b);
    auto mine = scf::IfOp::create(
        b, loc, cmp(arith::CmpIPredicate::eq, lane.warpgroup, owner),
        /*withElseRegion=*/false);
    b.setInsertionPointToStart(mine.thenBlock());
    turnBarrier(lane.warpgroup, wait);
  };
  if (turns)
    turnOf(i32(0), /*wait=*/false);

  // The `panels` panels x 4 k16 steps of K tile t into the accumulators
  // (one per M step); the first wgmma of the first tile starts each
  // (scale-d = 0).
  // `firstAt` (register-A mainloops, i1): whether t is the first K tile,
  // known only at run time (then `first` is false).
  auto tile = [&](Value t, SmallVector<Value> accs, bool first,
                  Value firstAt = Value()) {
    // The ring position of K tile t (persistent: after the earlier output
    // tiles' K tiles).
    Value g = ringBase ? add(ringBase, t) : t;
    auto [d, parity] = stageAndParity(g, SD, /*flip=*/false);
    waitParity(add(d, fullBase), parity);
    // lhs_gather, rhs_gather: the rows came by cp.async, which writes
    // through the generic proxy; the wgmmas read through the async proxy.
    if (cfg.lhsGather || cfg.rhsGather)
      NVVM::FenceProxyOp::create(
          b, loc, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    Value d64 = indexToI64(d);
    Value boxesA = add(add(mul(d64, strideA), aWarpgroupOff), offA);
    Value baseA = smemAddr(boxesA);
    Value baseB = smemAddr(add(mul(d64, strideB), offB));
    // rhs_codes: the rhs is the converters' bf16 tile of ring position g.
    if (cfg.rhsCodes) {
      auto [dq, dqParity] =
          stageAndParity(g, cfg.dequantStages, /*flip=*/false);
      waitParity(add(dq, lay.dequantized), dqParity);
      baseB = smemAddr(add(mul(indexToI64(dq), strideB), offB));
    }
    // lhs_codes: the thread's A fragments of the stage's lhs codes, decoded
    // while the previous K tile's MMAs run.
    // round_lhs: the thread's A fragments of the stage's slot rows, rounded
    // while the previous K tile's MMAs run.
    SmallVector<SmallVector<Value>> fragments;
    if (cfg.lhsCodes)
      fragments = decodeLhsStage(d64, lane);
    else if (cfg.roundLhs)
      fragments = roundLhsStage(boxesA);
    // k_turns: this warpgroup's turn at the tensor cores (the other one
    // issued its MMAs of the K tile before).
    if (cfg.kTurns)
      turnBarrier(lane.warpgroup, /*wait=*/true);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    // An N-major rhs: its boxes are tileK rows of 128 bytes apart, and a
    // k16 step is 16 rows on (2048 bytes, 128 units of 16 bytes).
    bool nMajor = cfg.rhsNMajor, mMajor = cfg.lhsMMajor;
    int64_t majorStep = cfg.mmaK * kSwizzleBytes / 16;
    int64_t stepA = mMajor ? majorStep : 2;
    int64_t stepB = nMajor ? majorStep : 2;
    for (int64_t panel = 0; panel < panels; ++panel) {
      SmallVector<Value> descAs;
      for (int64_t m = 0; m < steps && !registerA(); ++m) {
        Value stepBase = m ? add(baseA, m * rowsBytes) : baseA;
        descAs.push_back(
            mMajor ? matrixDescriptor(stepBase, cfg.tileK * kSwizzleBytes)
                   : matrixDescriptor(add(stepBase, panel * panelBytesA)));
      }
      Value descB =
          nMajor ? matrixDescriptor(baseB, cfg.tileK * kSwizzleBytes)
                 : matrixDescriptor(add(baseB, panel * panelBytesB));
      for (int64_t i = 0; i < stepsPerPanel; ++i) {
        // K-major k16 steps advance 32 bytes (2 units of 16 bytes).
        SmallVector<Value> das;
        for (int64_t m = 0; m < steps && !registerA(); ++m)
          das.push_back(i ? add(descAs[m], stepA * i) : descAs[m]);
        Value db = i ? add(descB, stepB * i) : descB;
        bool start = first && panel == 0 && i == 0;
        // (The first K tile's first MMA starts the accumulator: scale-d 0.)
        Value startAt = firstAt && panel == 0 && i == 0 ? firstAt : Value();
        for (int64_t m = 0; m < steps; ++m) {
          if (registerA()) {
            accs[m] = wgmmaRegisterA(
                accs[m], ArrayRef<Value>(fragments[m]).slice(4 * i, 4), db,
                /*accumulate=*/!start, nMajor, startAt);
            continue;
          }
          Value da = das[m];
          accs[m] = NVVM::WgmmaMmaAsyncOp::create(
              b, loc, accT, accs[m], da, db, shape, NVVM::WGMMATypes::bf16,
              NVVM::WGMMATypes::bf16, NVVM::WGMMATypes::f32,
              start ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
              NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
              mMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
              nMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
              /*satfinite=*/nullptr);
        }
      }
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    if (cfg.kTurns)
      turnBarrier(xori(lane.warpgroup, i32(1)), /*wait=*/false);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);
    if (!first) {
      // Tile t - 1's wgmmas are complete: hand its bf16 buffer back.
      OpBuilder::InsertionGuard guard(b);
      if (firstAt) {
        Value yes = cst(i1T, 1);
        Value later = arith::XOrIOp::create(b, loc, firstAt, yes);
        auto ifOp = scf::IfOp::create(b, loc, later, /*withElseRegion=*/false);
        b.setInsertionPointToStart(ifOp.thenBlock());
      }
      Value previous = remu(sub(g, idx(1)), SD);
      releaseStage(add(previous, emptyBase), lane.leader);
      releaseDequantized(sub(g, idx(1)), lane.leader);
    }
    return accs;
  };
  // Ping-pong: the other warpgroup's turn at the tensor cores comes once
  // this one has issued its last MMAs.
  auto passTurn = [&] {
    if (cfg.pingpong)
      turnBarrier(xori(lane.warpgroup, i32(1)), /*wait=*/false);
  };
  // The accumulators of the tile's K tiles.
  // lhs_codes, round_lhs: two K tiles per iteration. The MMAs of a K tile
  // read its A registers until a later wgmma.wait_group, after the next tile's decode:
  // each of the two must write other registers than the one before it (a
  // loop of one tile would rewrite the registers of its MMAs in flight).
  int64_t unroll = registerA() ? 2 : 1;
  // Register A: K tiles 2 j and 2 j + 1 in the loop from 0, the first
  // one's start known at run time, and the last after it when their number
  // is odd (none for a static even count): two copies of the tile's
  // decode or rounding, not four (compile time, instruction cache).
  auto registerAMainloop = [&]() -> SmallVector<Value> {
    SmallVector<Value> accs(steps, LLVM::UndefOp::create(b, loc, accT));
    Value end = sub(kTiles, remu(kTiles, 2));
    auto loop = scf::ForOp::create(b, loc, idx(0), end, idx(2), accs);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value t = loop.getInductionVar();
      Value firstAt = eq(indexToI64(t), 0);
      SmallVector<Value> next = tile(
          t, llvm::to_vector_of<Value>(loop.getRegionIterArgs()), false,
          firstAt);
      Value t1 = add(t, idx(1));
      scf::YieldOp::create(b, loc, tile(t1, next, false));
    }
    ValueRange results = loop.getResults();
    auto tail = scf::IfOp::create(b, loc, SmallVector<Type>(steps, accT),
                                  cmp(arith::CmpIPredicate::ult, end, kTiles),
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(tail.thenBlock());
      Value last = sub(kTiles, idx(1));
      Value firstAt = eq(indexToI64(last), 0);
      scf::YieldOp::create(
          b, loc,
          tile(last, llvm::to_vector_of<Value>(results), false, firstAt));
      b.setInsertionPointToStart(tail.elseBlock());
      scf::YieldOp::create(b, loc, results);
    }
    return llvm::to_vector_of<Value>(tail.getResults());
  };
  // The K tiles of the output tile: the first one alone, 1 .. end - 1 in
  // the loop (kTiles >= 1), the last one after it when their number is odd
  // (round_lhs: registerAMainloop).
  auto peeledMainloop = [&]() -> SmallVector<Value> {
    SmallVector<Value> accs(steps, LLVM::UndefOp::create(b, loc, accT));
    accs = tile(idx(0), accs, true);
    Value end = unroll == 1 ? kTiles
                            : sub(kTiles, remu(sub(kTiles, idx(1)), unroll));
    auto loop = scf::ForOp::create(b, loc, idx(1), end, idx(unroll), accs);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> next =
          llvm::to_vector_of<Value>(loop.getRegionIterArgs());
      for (int64_t u = 0; u < unroll; ++u) {
        Value t = loop.getInductionVar();
        next = tile(u ? add(t, idx(u)) : t, next, false);
      }
      scf::YieldOp::create(b, loc, next);
    }
    SmallVector<Value> results = llvm::to_vector_of<Value>(loop.getResults());
    if (unroll > 1) {
      auto tail = scf::IfOp::create(b, loc, SmallVector<Type>(steps, accT),
                                    cmp(arith::CmpIPredicate::ult, end, kTiles),
                                    /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(tail.thenBlock());
      scf::YieldOp::create(b, loc, tile(sub(kTiles, idx(1)), results, false));
      b.setInsertionPointToStart(tail.elseBlock());
      scf::YieldOp::create(b, loc, results);
      results = llvm::to_vector_of<Value>(tail.getResults());
    }
    return results;
  };
  auto mainloop = [&]() -> SmallVector<Value> {
    SmallVector<Value> results =
        cfg.roundLhs ? registerAMainloop() : peeledMainloop();
    passTurn();
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    if (ringBase) {
      // The last K tile's stage goes back too: the producer fills it with
      // the next output tile's, while this one is stored.
      Value last = remu(sub(add(ringBase, kTiles), idx(1)), SD);
      releaseStage(add(last, emptyBase), lane.leader);
      releaseDequantized(sub(add(ringBase, kTiles), idx(1)), lane.leader);
    }
    return results;
  };
  // The epilogue of M step m's rows.
  auto store = [&](ValueRange accs) {
    // (tma_store: a cooperative warpgroup has one M step.)
    if (cfg.tmaStore)
      return storeAccumulatorTma(accs[0], lane);
    for (int64_t m = 0; m < steps; ++m)
      storeAccumulator(accs[m],
                       m ? add(rowInTile, m * cfg.mmaM) : rowInTile, quad);
  };
  auto outputTile = [&] {
    // (pairsBlocks: every tile takes the whole K range.)
    if (p.kind == MXGemmKind::Block && (!p.skipPadding || p.pairsBlocks()))
      return store(mainloop());
    // An expert without blocks (or tokens), a block of padding: no K tiles,
    // zero accumulators. One epilogue for both.
    auto ifOp = scf::IfOp::create(b, loc, SmallVector<Type>(steps, accT),
                                  eq(indexToI64(kTiles), 0),
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      passTurn();
      Value zero = LLVM::ZeroOp::create(b, loc, accT);
      scf::YieldOp::create(b, loc, SmallVector<Value>(steps, zero));
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, mainloop());
    }
    store(ifOp.getResults());
  };
  if (!cfg.persistent) {
    outputTile();
    if (cfg.kTurns)
      turnOf(i32(0), /*wait=*/true);
    if (cfg.tmaStore)
      finishTmaStores(lane);
    return;
  }
  // Ping-pong: both warpgroups read every tile id in the producer's order
  // and keep the ring position of every tile (the other warpgroup's K tiles
  // advance it too: the ring is filled in tile order); warpgroup w computes
  // the tiles of slot counts j = w mod 2 (the first and last turns:
  // turnOf).
  Value warpgroup = lane.warpgroup;
  // The tile's epilogue rows into L2 while the mainloop runs (ping-pong:
  // before the turn's wait), shared by the threads that compute the tile
  // (one instruction or two each), then the tile.
  auto computeTile = [&] {
    int64_t threads = 128 * (cfg.pingpong ? 1 : cfg.consumerWarpgroups);
    if (gateUp) {
      Value thread = sub(tid, i32(128 * cfg.producerWarpgroups));
      emitEpiloguePrefetch(cfg.pingpong ? remu(thread, 128) : thread,
                           threads);
    }
    if (cfg.pingpong)
      turnBarrier(warpgroup, /*wait=*/true);
    outputTile();
  };
  Value received = forEachReceivedTile([&](Value j) {
    if (!cfg.pingpong)
      return computeTile();
    Value own = cmp(arith::CmpIPredicate::eq, andi(indexToI32(j), 1),
                    warpgroup);
    OpBuilder::InsertionGuard g(b);
    auto mine = scf::IfOp::create(b, loc, own, /*withElseRegion=*/false);
    b.setInsertionPointToStart(mine.thenBlock());
    computeTile();
  });
  if (turns)
    turnOf(cfg.pingpong ? andi(indexToI32(received), 1) : i32(0),
           /*wait=*/true);
  if (cfg.tmaStore)
    finishTmaStores(lane);
}

void KernelEmitter::emit(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  // The arguments, in the order mxGemmKernelArgs gives (the launch record
  // passes them in that order too).
  for (auto [i, arg] : llvm::enumerate(mxGemmKernelArgs(p, cfg))) {
    Value v = entry.getArgument(i);
    // An operand, its scales or the result: a tensor map (seen as `type`,
    // the result's as it is) or a global pointer. (The lambda takes a copy
    // of the flag: it captures no structured binding before C++20.)
    bool tensorMap = arg.tensorMap;
    auto mapOrPointer = [&](Value &map, nvgpu::TensorMapDescriptorType type,
                            Value &pointer) {
      if (!tensorMap)
        pointer = v;
      else
        map = type ? UnrealizedConversionCastOp::create(b, loc, type, v)
                         .getResult(0)
                   : v;
    };
    switch (arg.role) {
    case MXGemmArg::Lhs:
      mapOrPointer(tmapA, tmapAT, lhsRows);
      break;
    case MXGemmArg::Rhs:
      mapOrPointer(tmapB, tmapBT, rhsRows);
      break;
    case MXGemmArg::RhsScales:
      mapOrPointer(tmapS, tmapST, scalesB);
      break;
    case MXGemmArg::LhsScales:
      mapOrPointer(tmapSA, tmapSAT, scalesA);
      break;
    case MXGemmArg::Result:
      mapOrPointer(tmapC, {}, result);
      break;
    case MXGemmArg::BlockToExpert:
      blockToExpert = v;
      break;
    case MXGemmArg::Bias:
      bias = v;
      break;
    case MXGemmArg::GateUp:
      gateUp = v;
      break;
    case MXGemmArg::Affinities:
      affinities = v;
      break;
    case MXGemmArg::DGateUp:
      result = v;
      break;
    case MXGemmArg::DGateUpAlongN:
      dGateUpAlongNOut = v;
      break;
    case MXGemmArg::DGateUpAlongM:
      dGateUpAlongMOut = v;
      break;
    case MXGemmArg::H:
      hOut = v;
      break;
    case MXGemmArg::ScaledH:
      scaledHOut = v;
      break;
    case MXGemmArg::Partials:
      partialsOut = v;
      break;
    case MXGemmArg::CheckpointTokenIds:
      tokenIds = v;
      break;
    case MXGemmArg::Tokens:
      tokens = v;
      break;
    case MXGemmArg::TileCounter:
      tileCounter = v;
      break;
    }
  }
  tid = indexToI32(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  if (cfg.clusterN > 1)
    isClusterLeader = eq(NVVM::ClusterId::create(b, loc, i32T), 0);
  // One tile per CTA: the grid is (N tiles, M tiles, experts). A
  // persistent kernel sets these per tile (decodeTile).
  if (!cfg.persistent && cfg.rasterM == 1) {
    n0 = mul(indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
             cfg.tileN);
    m0 = mul(indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::y)),
             cfg.tileM);
  } else if (!cfg.persistent) {
    // The grid's (x, y) as a position in the expert's tile order.
    Value x = indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    Value y = indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::y));
    setTileOrigin(add(mul(y, (p.n + cfg.tileN - 1) / cfg.tileN), x));
  }

  // The dynamic shared memory, its base aligned to 1024 bytes (128B-swizzle
  // TMA destinations and wgmma descriptors need it).
  smem = dynamicSmemView(b, loc, lay.bytes);
  Value base = arith::IndexCastOp::create(
      b, loc, i64T, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem));
  alignedBase = andi(add(base, 1023), -1024);
  alignPad = arith::IndexCastOp::create(b, loc, idxT, sub(alignedBase, base));

  auto barsMemT = smemType({lay.numBarriers}, i64T);
  Value barsView = memref::ViewOp::create(b, loc, barsMemT, smem,
                                          add(alignPad, lay.barriers), {});
  bars = UnrealizedConversionCastOp::create(b, loc, barsT, barsView)
             .getResult(0);

  int64_t producerThreads = 128 * cfg.producerWarpgroups;
  int64_t consumerThreads = 128 * cfg.consumerWarpgroups;
  isThread0 = eq(tid, 0);
  auto init = scf::IfOp::create(b, loc, isThread0, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(init.thenBlock());
    auto initBarrierTo = [&](int64_t id, Value count) {
      nvgpu::MBarrierInitOp::create(b, loc, bars, count, idx(id),
                                    /*predicate=*/Value());
    };
    auto initBarrier = [&](int64_t id, int64_t count) {
      initBarrierTo(id, idx(count));
    };
    int64_t S = cfg.stages;
    for (int64_t s = 0; s < S && isBlockScale(); ++s) {
      // full[s]: thread 0's expect_tx arrival plus the scale writers;
      // empty[s]: the tcgen05.commit of the stage's MMAs, or the mma.sync
      // consumers.
      initBarrier(s, producerThreads + 1);
      initBarrier(S + s, mma == MmaEmitter::Tcgen05 ? 1 : consumerThreads);
    }
    if (isBlockScale())
      initBarrier(2 * S, 1);
    for (int64_t s = 0; s < S && !isBlockScale(); ++s) {
      if (isFp8()) {
        // full[s]: thread 0's expect_tx arrival plus the scale writers.
        initBarrier(s, producerThreads + 1);
      } else {
        // full[s]: thread 0's expect_tx arrival (lhs_gather: and each
        // producer thread's cp.async arrival; round_lhs / round_rhs: and
        // each producer thread's after rounding); empty[s]: the converters
        // (Bf16Dequant) or the consumers (Bf16Operands).
        initBarrier(s, 1 + (producerCopies() ? producerThreads : 0));
      }
      // (The bf16 consumers arrive once per warpgroup, and a ping-pong
      // stage is one warpgroup's; a cluster pair's first CTA waits for both
      // CTAs' consumers.)
      // (One value per statement: the same op order from every compiler.)
      if (cfg.clusterN > 1) {
        Value both = idx(cfg.clusterN * stageReleases());
        Value own = idx(stageReleases());
        initBarrierTo(S + s, select(isClusterLeader, both, own));
        continue;
      }
      initBarrier(S + s, p.path == MXMmaPath::Bf16Dequant ? producerThreads
                         : isFp8()                        ? consumerThreads
                                                          : stageReleases());
    }
    for (int64_t d = 0; d < cfg.dequantStages && !isBf16Operands(); ++d) {
      initBarrier(2 * S + d, producerThreads);
      initBarrier(2 * S + cfg.dequantStages + d, stageReleases());
    }
    // A persistent kernel's tile slots: full, the producer thread's
    // arrival; empty, every consumer's.
    // (rhs_codes: the converters receive the tiles too; lhs_gather,
    // round_lhs, round_rhs: the producer threads but thread 0.)
    for (int64_t d = 0; d < kTileSlots && cfg.persistent; ++d) {
      initBarrier(2 * S + d, 1);
      initBarrier(2 * S + kTileSlots + d,
                  consumerThreads + (cfg.rhsCodes ? kRhsConverters : 0) +
                      (producerCopies() ? producerThreads - 1 : 0));
    }
    for (int64_t d = 0; d < cfg.dequantStages && cfg.rhsCodes; ++d) {
      initBarrier(lay.dequantized + d, kRhsConverters);
      initBarrier(lay.dequantized + cfg.dequantStages + d, stageReleases());
    }
    if (p.kind == MXGemmKind::Expert && !cfg.persistent)
      for (int64_t c = 0; c < numExpertCounters(); ++c)
        LLVM::StoreOp::create(b, loc, i32(0),
                              smemPtr(smemAddr(i64(lay.counters + 4 * c))),
                              4);
    if (tmapA)
      nvgpu::TmaPrefetchOp::create(b, loc, tmapA, /*predicate=*/Value());
    if (tmapB)
      nvgpu::TmaPrefetchOp::create(b, loc, tmapB, /*predicate=*/Value());
    if (cfg.rhsCodes)
      nvgpu::TmaPrefetchOp::create(b, loc, tmapS, /*predicate=*/Value());
    if (cfg.lhsCodes)
      nvgpu::TmaPrefetchOp::create(b, loc, tmapSA, /*predicate=*/Value());
    // The pair's barriers are initialized before either multicasts into
    // or arrives on the other's.
    if (cfg.clusterN > 1)
      NVVM::FenceMbarrierInitOp::create(b, loc);
  }
  gpu::BarrierOp::create(b, loc);
  if (cfg.clusterN > 1)
    syncCluster();
  if (!cfg.persistent)
    emitContractionRange();
  else if (p.pairsBlocks())
    emitPairTable();
  else if (p.kind == MXGemmKind::Expert)
    emitExpertTable();

  // setmaxnreg moves registers between the roles; the entry cap is the
  // register file split evenly over the SM's CTAs' threads (rounded down to
  // a multiple of 8).
  int64_t entryCap = entryRegisters(cfg);
  auto setMaxRegisters = [&](int64_t count) {
    NVVM::SetMaxRegisterOp::create(
        b, loc, count,
        count > entryCap ? NVVM::SetMaxRegisterAction::increase
                         : NVVM::SetMaxRegisterAction::decrease);
  };
  Value isProducer =
      cmp(arith::CmpIPredicate::ult, tid, i32(producerThreads));
  auto roles = scf::IfOp::create(b, loc, isProducer, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    setMaxRegisters(cfg.producerRegisters);
    if (!cfg.persistent)
      setRhsRow0();
    if (cfg.persistent)
      emitPersistentProducerBf16Operands();
    else if (isFp8())
      emitProducerFp8();
    else if (isBlockScale())
      emitProducerBlockScale();
    else if (isBf16Operands())
      emitProducerBf16Operands();
    else
      emitProducerBf16();
    if (cfg.rhsCodes)
      emitRhsDequant();
    if (gateUp && !cfg.persistent) {
      // After thread 0's TMA loads: the producer warpgroup's threads
      // share the prefetches.
      int64_t producerThreads = 128 * cfg.producerWarpgroups;
      NVVM::BarrierOp::create(b, loc, /*res=*/Type(), i32(kProducerBarrier),
                              i32(producerThreads),
                              /*reductionOp=*/nullptr,
                              /*reductionPredicate=*/Value());
      emitEpiloguePrefetch(tid, producerThreads);
    }
    b.setInsertionPointToStart(roles.elseBlock());
    setMaxRegisters(cfg.consumerRegisters);
    int64_t S = cfg.stages, SD = cfg.dequantStages;
    if (isFp8())
      emitConsumerFp8();
    else if (isBlockScale() && mma == MmaEmitter::Tcgen05)
      emitConsumerTcgen05();
    else if (isBlockScale())
      emitConsumerMmaSync();
    else if (isBf16Operands())
      emitConsumerBf16(S, /*fullBase=*/0, /*emptyBase=*/S, lay.a, lay.b,
                       cfg.tileM * kSwizzleBytes, cfg.tileN * kSwizzleBytes,
                       /*panels=*/1);
    else
      emitConsumerBf16(SD, /*fullBase=*/2 * S, /*emptyBase=*/2 * S + SD,
                       lay.aDq, lay.bDq, 2 * cfg.tileM * cfg.tileK,
                       2 * cfg.tileN * cfg.tileK,
                       /*panels=*/2 * cfg.tileK / kSwizzleBytes);
  }
  // Neither CTA of a pair exits while the other may still arrive on its
  // barriers.
  if (cfg.clusterN > 1)
    syncCluster();
  gpu::ReturnOp::create(b, loc);
}

/// What every kernel needs: a CTA's rows (Block) or K tiles (Expert) inside
/// one block, and its shared memory within the chip's limit.
static std::string whyNotBlocksOrSharedMemory(const MXGemmProblem &problem,
                                              const MXGemmConfig &cfg,
                                              const TargetInfo &target) {
  std::string why;
  llvm::raw_string_ostream os(why);
  bool block = problem.kind == MXGemmKind::Block;
  int64_t blockTile = block ? cfg.tileM : cfg.tileK;
  if (problem.blockSize % blockTile) {
    os << "block size " << problem.blockSize << " is not a multiple of the "
       << stringifyMmaPathOption(problem.path) << " tile's " << blockTile
       << (block ? " rows" : " slots");
    return why;
  }
  int64_t bytes = layoutOf(problem, cfg).bytes;
  if (bytes > target.getMaxDynamicSharedMemory())
    os << "the MX GEMM needs " << bytes << " bytes of shared memory, more than "
       << target.getMaxDynamicSharedMemory();
  return why;
}

/// Why the block_scale kernel of `cfg` (sm_100a, MXGemmSm100.cpp) cannot
/// compute `problem` on `target`; empty when it can.
static std::string whyNotBlockScale(const MXGemmProblem &problem,
                                    const MXGemmConfig &cfg,
                                    const TargetInfo &target) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (target.getMmaEmitter() == MmaEmitter::Tcgen05) {
    // One 128-row tcgen05.mma (cta_group::1) spans the tile, K = 32 per
    // instruction, one 128-byte swizzle panel of codes per K tile, one
    // producer and one MMA / epilogue warpgroup; the epilogue reads the
    // accumulator in 32-column loads (tcgen05.ld 32x32b.x32).
    if (cfg.tileM != 128 || cfg.mmaM != 128 || cfg.tileK != kSwizzleBytes ||
        cfg.mmaK != 32 || cfg.mmaN != cfg.tileN || cfg.tileN % 32 ||
        cfg.tileN > 256 || cfg.producerWarpgroups != 1 ||
        cfg.consumerWarpgroups != 1) {
      os << "the block_scale kernel of " << target.getChip()
         << " needs a 128 x N x 128 tile (N a multiple of 32 up to 256), one "
            "128 x N x 32 MMA and warpgroups [1, 1], got "
         << cfg.tileM << "x" << cfg.tileN << "x" << cfg.tileK;
      return why;
    }
    // The accumulator's columns and 4 per scale atom and stage must fit
    // the 512 columns of tensor memory.
    int64_t columns = cfg.tileN + cfg.stages * 4 * (1 + (cfg.tileN + 127) / 128);
    if (columns > 512) {
      os << "the block_scale kernel of " << target.getChip() << " needs "
         << columns << " tensor-memory columns, more than 512";
      return why;
    }
  } else if (cfg.tileM != 128 || cfg.tileN != 128 ||
             cfg.tileK != kSwizzleBytes || cfg.mmaM != 16 || cfg.mmaN != 8 ||
             cfg.mmaK != 32 || cfg.producerWarpgroups != 1 ||
             cfg.consumerWarpgroups != 2) {
    // Eight warps of 32 x 64 over a 128 x 128 tile, m16n8k32 mma.sync.
    os << "the block_scale kernel of " << target.getChip()
       << " needs a 128 x 128 x 128 tile of 16 x 8 x 32 MMAs and warpgroups "
          "[1, 2], got "
       << cfg.tileM << "x" << cfg.tileN << "x" << cfg.tileK;
    return why;
  }
  if (problem.biasType ||
      !isa<Float8E4M3FNType, Float8E5M2Type>(problem.elementType)) {
    os << "the block_scale MMA path takes MX codes (f8E4M3FN or f8E5M2) "
          "without a bias";
    return why;
  }
  // The 4 scale bytes of a row and K tile are one aligned 32-bit word, and
  // the epilogue stores 16-byte quads.
  if (problem.k % cfg.tileK || problem.n % 4) {
    os << "the block_scale kernel needs K a multiple of " << cfg.tileK
       << " and N a multiple of 4, got " << problem.m << "x" << problem.n
       << "x" << problem.k;
    return why;
  }
  return whyNotBlocksOrSharedMemory(problem, cfg, target);
}

/// Why the kernel of `cfg` cannot compute `problem` on `target`; empty
/// when it can.
static std::string whyNotMXGemm(const MXGemmProblem &problem,
                                    const MXGemmConfig &cfg,
                                    const TargetInfo &target) {
  StringRef path = stringifyMmaPathOption(problem.path);
  std::string why;
  llvm::raw_string_ostream os(why);
  if (!target.hasMmaPath(problem.path)) {
    os << "the " << path << " MMA path does not exist on " << target.getChip();
    return why;
  }
  // setmaxnreg moves registers within what the CTA was launched with (the
  // entry cap, the 64K register file split evenly over the threads of its
  // ctasPerSM CTAs): a consumer's setmaxnreg.inc beyond it waits forever.
  int64_t threads = cfg.threads();
  int64_t entryCap = entryRegisters(cfg);
  int64_t wanted = 128 * (cfg.producerWarpgroups * cfg.producerRegisters +
                          cfg.consumerWarpgroups * cfg.consumerRegisters);
  if (problem.path != MXMmaPath::BlockScale && wanted > entryCap * threads) {
    os << "setmaxnreg registers [" << cfg.producerRegisters << ", "
       << cfg.consumerRegisters << "] need " << wanted
       << " registers, more than the " << entryCap * threads << " of "
       << threads << " threads at " << entryCap << " each";
    return why;
  }
  // swap_operands: the transposed product of an expert GEMM (the problem
  // is the op's, transposed: getMXGemmProblem), its tile stored by TMA in
  // rows of the op's result, 32 of them a chunk, each warpgroup's 64 rows
  // two boxes of 32 columns: the op's result rows (the kernel's M) 16-byte
  // multiples.
  if (cfg.swapOperands != problem.transposedResult ||
      (cfg.swapOperands && (!cfg.tmaStore || cfg.storeColumns != 32 ||
                            cfg.mmaM != 64 || problem.m % 4))) {
    os << "swap_operands needs the transposed problem, tma_store of 32 "
          "columns, 64-row MMAs and M a multiple of 4, got M = "
       << problem.m;
    return why;
  }
  // A block GEMM's transposed product: a tile is two blocks of slots, its
  // weight (the lhs) rounded by the consumers, whose K tiles must not run
  // into the next expert's rows of an M-major weight; the shared table of
  // the experts' pairs beside the ring.
  if (problem.pairsBlocks() &&
      (problem.path != MXMmaPath::Bf16Operands ||
       cfg.tileN != 2 * problem.blockSize || !cfg.roundLhs ||
       !problem.roundLhs || problem.k % cfg.tileK || cfg.rhsNMajor ||
       cfg.rhsCodes || cfg.lhsCodes || cfg.lhsGather || cfg.roundRhs ||
       cfg.producerWarpgroups != 1 || !cfg.tmaStore ||
       problem.numBlocks >= (int64_t(1) << 16) ||
       4 * problem.numExperts > cfg.consumerWarpgroups * cfg.tmaStore *
                                    cfg.mmaM * cfg.storeRowBytes())) {
    os << "a block GEMM's transposed product needs the bf16-operands MMA "
          "path, tile N two blocks of "
       << problem.blockSize
       << " slots, a bf16 weight MX-rounded along K by round_lhs, K a "
          "multiple of the tile K, a K-major rhs, one producer warpgroup, "
          "tma_store buffers for its experts' counts, fewer than 65536 "
          "blocks and no codes, lhs_gather or round_rhs, got tile N "
       << cfg.tileN << " and K = " << problem.k;
    return why;
  }
  if (cfg.persistent && (problem.path != MXMmaPath::Bf16Operands ||
                         target.getMultiprocessors() < 1)) {
    os << "persistent " << path << " GEMM kernels do not exist on "
       << target.getChip();
    return why;
  }
  if (problem.path == MXMmaPath::BlockScale)
    return whyNotBlockScale(problem, cfg, target);
  // What the kernel structure takes (#moe.gemm_config verified the rest):
  // a K tile of one 128-byte swizzle panel, square tiles (or 128x256 on
  // bf16 operands), the 64xNxK wgmma of the operand type, and one
  // dequantizing producer warpgroup per operand on the bf16 path.
  int64_t panelK =
      kSwizzleBytes / (problem.path == MXMmaPath::Bf16Operands ? 2 : 1);
  int64_t wgmmaK = problem.path == MXMmaPath::Fp8WgmmaPromote ? 32 : 16;
  if (cfg.tileK != panelK) {
    os << "the " << path << " MMA path of " << target.getChip()
       << " needs tile K " << panelK << " (one 128-byte swizzle panel), got "
       << cfg.tileK;
    return why;
  }
  // Besides square tiles, bf16 operands take 128x256 (two consumer
  // warpgroups of 64x256 wgmma) and 64x128 (one of 64x128), whose A and B
  // boxes differ.
  bool bf16Ops = problem.path == MXMmaPath::Bf16Operands;
  bool oblong = bf16Ops && ((cfg.tileM == 128 && cfg.tileN == 256) ||
                            (cfg.tileM == 64 && cfg.tileN == 128));
  if (cfg.tileM != cfg.tileN && !oblong) {
    os << "the " << path << " MMA path of " << target.getChip()
       << " needs square tiles"
       << (bf16Ops ? ", 128x256 or 64x128" : "") << ", got " << cfg.tileM
       << "x" << cfg.tileN;
    return why;
  }
  // A cluster pair takes N tiles n and n + 1 of the same rows.
  int64_t tilesN = (problem.n + cfg.tileN - 1) / cfg.tileN;
  if (cfg.clusterN > 1 && tilesN % cfg.clusterN) {
    os << "a cluster of " << cfg.clusterN
       << " CTAs along N needs a multiple of " << cfg.clusterN
       << " N tiles, got " << tilesN;
    return why;
  }
  // A ping-pong warpgroup's accumulators: tileM / 64 fragments of mmaN / 2
  // f32 registers per thread; beyond 128 the epilogue has no room.
  // (convert-moe-to-nvgpu gives it no MX roundings of [dg | du]: beside
  // the second accumulator they spill.)
  if (cfg.pingpong && cfg.tileM / 64 * (cfg.mmaN / 2) > 128) {
    os << "a pingpong warpgroup's " << cfg.tileM << "x" << cfg.tileN
       << " tile needs " << cfg.tileM / 64 * (cfg.mmaN / 2)
       << " accumulator registers per thread, more than 128";
    return why;
  }
  // The SM's shared memory holds ctasPerSM CTAs, each with the system's
  // reservation.
  int64_t perCta = layoutOf(problem, cfg).bytes +
                   TargetInfo::kReservedSharedMemoryPerCta;
  if (cfg.ctasPerSM > 1 &&
      cfg.ctasPerSM * perCta > target.getSharedMemoryPerMultiprocessor()) {
    os << cfg.ctasPerSM << " CTAs of " << perCta
       << " bytes of shared memory do not fit the "
       << target.getSharedMemoryPerMultiprocessor() << " of an SM of "
       << target.getChip();
    return why;
  }
  if (cfg.mmaM != 64 || cfg.mmaK != wgmmaK || cfg.mmaN % 8 || cfg.mmaN > 256) {
    os << "MMA shape " << cfg.mmaM << "x" << cfg.mmaN << "x" << cfg.mmaK
       << " is not a wgmma of the " << path << " MMA path of "
       << target.getChip() << " (64xNx" << wgmmaK
       << ", N a multiple of 8 up to 256)";
    return why;
  }
  if (problem.path == MXMmaPath::Bf16Dequant && cfg.producerWarpgroups != 2) {
    os << "the " << path << " MMA path of " << target.getChip()
       << " needs 2 producer warpgroups (one per operand), got "
       << cfg.producerWarpgroups;
    return why;
  }
  if (problem.path == MXMmaPath::Bf16Operands) {
    // TMA rows must be 16-byte multiples.
    if (problem.k % 8) {
      os << "GEMM contraction size " << problem.k
         << " is not a multiple of 8 (16-byte rows of bf16)";
      return why;
    }
  } else if (problem.biasType) {
    os << "the " << path << " MMA path of " << target.getChip()
       << " takes no bias";
    return why;
  } else if (!isa<Float8E4M3FNType, Float8E5M2Type>(problem.elementType)) {
    os << "MX GEMM codes of type " << problem.elementType
       << " are not supported on " << target.getChip()
       << " (f8E4M3FN or f8E5M2)";
    return why;
  }
  if (problem.path != MXMmaPath::Bf16Operands && problem.k % 32) {
    os << "MX GEMM contraction size " << problem.k
       << " is not a multiple of 32";
    return why;
  }
  if (problem.path == MXMmaPath::Fp8WgmmaPromote) {
    if (!isa<Float8E4M3FNType>(problem.elementType) ||
        problem.kind != MXGemmKind::Block) {
      os << "the " << path << " MMA path of " << target.getChip()
         << " covers only f8E4M3FN block GEMMs";
      return why;
    }
    if (problem.m % cfg.tileM || problem.n % cfg.tileN ||
        problem.k % cfg.tileK) {
      os << "MX GEMM " << problem.m << "x" << problem.n << "x" << problem.k
         << " is not a multiple of the " << path << " tile " << cfg.tileM
         << "x" << cfg.tileN << "x" << cfg.tileK << " of "
         << target.getChip();
      return why;
    }
  }
  // N-major rhs rows are K rows of consecutive experts: a K tile must not
  // run into the next expert's (TMA zero-fills only past the tensor).
  // (Expert GEMMs read only their experts' own slots.)
  bool blockK = problem.kind == MXGemmKind::Block;
  if (cfg.rhsNMajor &&
      (problem.path != MXMmaPath::Bf16Operands ||
       (blockK && problem.k % cfg.tileK) || problem.n % 8 ||
       cfg.tileN % 64)) {
    os << "an N-major rhs needs the bf16-operands MMA path, N a multiple of "
          "8 and, for a block GEMM, K a multiple of the tile K "
       << cfg.tileK << ", got " << problem.m << "x" << problem.n << "x"
       << problem.k;
    return why;
  }
  if (cfg.lhsMMajor &&
      (problem.path != MXMmaPath::Bf16Operands ||
       (problem.kind != MXGemmKind::Expert && !problem.pairsBlocks()) ||
       problem.m % 8 || cfg.mmaM != 64)) {
    os << "an M-major lhs needs an expert GEMM (or a block GEMM's "
          "transposed product) on the bf16-operands MMA path with M a "
          "multiple of 8, got "
       << problem.m << "x" << problem.n << "x" << problem.k;
    return why;
  }
  // rhs_gather: lhs_gather's copies, of the tile's two blocks of slots.
  if (cfg.rhsGather &&
      (!problem.pairsBlocks() || !problem.skipPadding ||
       problem.rhsGatherRows <= 0 ||
       cfg.tileN * kGatherLanesPerRow % (128 * cfg.producerWarpgroups))) {
    os << "rhs_gather needs a block GEMM's transposed product with token "
          "ids whose rhs is token rows, tile rows a multiple of 16 per "
          "producer warpgroup";
    return why;
  }
  // rhs_codes: warps 1-3 of the one producer warpgroup convert, in the
  // registers setmaxnreg leaves them.
  if (cfg.rhsCodes &&
      (!isa_and_nonnull<Float8E4M3FNType, Float8E5M2Type>(problem.elementType) ||
       problem.k % 32 || problem.n % 8 || cfg.producerWarpgroups != 1 ||
       cfg.producerRegisters < kRhsCodesProducerRegisters)) {
    os << "rhs_codes needs an rhs of f8E4M3FN or f8E5M2 codes, K a multiple "
          "of 32, N of 8 and one producer warpgroup of at least "
       << kRhsCodesProducerRegisters << " registers";
    return why;
  }
  // lhs_codes: the consumers decode whole 64-column K tiles of codes in
  // A-fragment order, and the scale bytes come in 16-byte rows of 8 lhs
  // rows.
  if (cfg.lhsCodes &&
      (problem.path != MXMmaPath::Bf16Operands ||
       problem.kind != MXGemmKind::Block ||
       !isa_and_nonnull<Float8E4M3FNType, Float8E5M2Type>(
           problem.lhsElementType) ||
       problem.k % cfg.tileK || problem.m % 8 || cfg.tileK != 64 ||
       cfg.lhsMMajor || cfg.rhsCodes || cfg.clusterN != 1)) {
    os << "lhs_codes needs a block GEMM whose lhs is f8E4M3FN or f8E5M2 "
          "codes, K a multiple of 64, M of 8, and a K-major lhs without "
          "rhs_codes or clusters, got "
       << problem.m << "x" << problem.n << "x" << problem.k;
    return why;
  }
  // lhs_gather: the producer threads read the slots' token ids
  // (skipPadding's argument) and copy 16-byte chunks of the token rows
  // into the swizzled bf16 stage, the same chunks of each 128-byte row of
  // the tile in turn. The copies have no K bound (TMA's zero fill past K):
  // every K tile must be whole (a row of K = 32 read past its end,
  // compute-sanitizer memcheck, H200 2026-12-04).
  if (cfg.lhsGather &&
      (problem.path != MXMmaPath::Bf16Operands ||
       problem.kind != MXGemmKind::Block || !problem.skipPadding ||
       problem.lhsGatherRows <= 0 || problem.k % cfg.tileK ||
       cfg.tileM * kGatherLanesPerRow % (128 * cfg.producerWarpgroups) ||
       cfg.lhsMMajor ||
       cfg.lhsCodes || cfg.rhsCodes || cfg.clusterN != 1)) {
    os << "lhs_gather needs a block GEMM on the bf16-operands MMA path with "
          "token ids, a K-major lhs of token rows with K a multiple of the "
          "tile K, tile rows a multiple of 16 per producer warpgroup, and "
          "no lhs_codes, rhs_codes or clusters";
    return why;
  }
  // round_lhs / round_rhs: every thread of the one producer warpgroup
  // copies 16-byte chunks of the slot rows (token ids: skipPadding's
  // argument) and rounds column-pair blocks of 32 slots, one or more per
  // thread: the tile's columns a multiple of 128, the operand's of 8 (a
  // chunk is inside or past its row's end), the producer's loop over the
  // tiles a persistent kernel's.
  for (bool rhs : {false, true}) {
    // (A block GEMM's transposed product rounds its weight: above.)
    bool rounds = rhs ? cfg.roundRhs : cfg.roundLhs && !problem.pairsBlocks();
    MXQuantAttr quant = rhs ? problem.roundRhs : problem.roundLhs;
    int64_t columns = rhs ? problem.n : problem.m;
    int64_t tileColumns = rhs ? cfg.tileN : cfg.tileM;
    bool major = rhs ? cfg.rhsNMajor : cfg.lhsMMajor;
    if (rounds &&
        (problem.path != MXMmaPath::Bf16Operands ||
         problem.kind != MXGemmKind::Expert || !problem.skipPadding ||
         !quant || columns % 8 ||
         tileColumns % 128 || !major || !cfg.persistent || cfg.pingpong ||
         cfg.producerWarpgroups != 1 || cfg.stages <= kRoundLookahead ||
         cfg.lhsGather || cfg.lhsCodes || cfg.rhsCodes)) {
      os << (rhs ? "round_rhs" : "round_lhs")
         << " needs a persistent expert GEMM on the bf16-operands MMA path "
            "with token ids, one producer warpgroup and more than "
         << kRoundLookahead << " stages, whose "
         << (rhs ? "N-major rhs" : "M-major lhs")
         << " is bf16 rows gathered through them and MX-rounded along the "
            "slots, with its columns a multiple of 8 and tile columns of "
            "128, and no pingpong, lhs_gather, lhs_codes or rhs_codes";
      return why;
    }
  }
  // tma_store: the result's rows are 16-byte multiples (a TMA global
  // stride), the epilogue a plain one (the activation backward's writes
  // its own outputs), and each warpgroup stores whole rounds of its
  // buffers, so that every output tile fills them in the same order.
  if (cfg.tmaStore &&
      (problem.path != MXMmaPath::Bf16Operands || problem.n % 4 ||
       problem.epilogue.kind == MXGemmEpilogue::Kind::GatedActBwd ||
       cfg.pingpong || cfg.clusterN != 1 ||
       cfg.mmaN % (cfg.tmaStore * cfg.storeColumns))) {
    os << "tma_store needs the bf16-operands MMA path, N a multiple of 4, "
          "no activation-backward epilogue, no pingpong or cluster, and "
          "mma_shape N a multiple of "
       << cfg.tmaStore * cfg.storeColumns << ", got N = " << problem.n;
    return why;
  }
  if (problem.epilogue.kind == MXGemmEpilogue::Kind::GatedActBwd &&
      (problem.path != MXMmaPath::Bf16Operands ||
       problem.kind != MXGemmKind::Block || problem.biasType ||
       problem.n % 2)) {
    os << "the activation-backward epilogue needs a block GEMM without bias "
          "on the bf16-operands MMA path, with an even N, got N = "
       << problem.n;
    return why;
  }
  return whyNotBlocksOrSharedMemory(problem, cfg, target);
}

bool moe::fitsMXGemm(const MXGemmProblem &problem,
                         const MXGemmConfig &config, const TargetInfo &target) {
  return whyNotMXGemm(problem, config, target).empty();
}

LogicalResult
moe::checkMXGemm(const MXGemmProblem &problem, const MXGemmConfig &config,
                     const TargetInfo &target,
                     function_ref<InFlightDiagnostic()> emitError) {
  std::string why = whyNotMXGemm(problem, config, target);
  if (why.empty())
    return success();
  emitError() << why;
  return failure();
}

MXGemmLaunch moe::buildMXGemmKernel(OpBuilder &builder, Location loc,
                                    gpu::GPUModuleOp module, StringRef name,
                                    const MXGemmProblem &problem,
                                    const MXGemmConfig &cfg,
                                    const TargetInfo &target) {
  [[maybe_unused]] bool bf16Operands =
      problem.path == MXMmaPath::Bf16Operands;
  // (block_scale: whyNotBlockScale checked its own tile shapes.)
  assert(cfg.tileK * (bf16Operands ? 2 : 1) == kSwizzleBytes &&
         (problem.path == MXMmaPath::BlockScale ||
          ((cfg.tileM == cfg.tileN ||
            (bf16Operands && cfg.tileM == 128 && cfg.tileN == 256) ||
            (bf16Operands && cfg.tileM == 64 && cfg.tileN == 128)) &&
           cfg.mmaM * cfg.consumerWarpgroups == cfg.tileM &&
           cfg.mmaN == cfg.tileN)) &&
         "tile shapes of the MX GEMM kernels");
  assert((problem.path != MXMmaPath::Bf16Dequant ||
          cfg.producerWarpgroups == 2) &&
         "the bf16 path has one converting warpgroup per operand");
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());

  declareDynamicSmem(builder, loc, module);

  // TMA descriptors are generic pointers (to the __grid_constant__
  // parameter), the rest global ones.
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type gptr = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<MXGemmKernelArg> kernelArgs = mxGemmKernelArgs(problem, cfg);
  SmallVector<Type> args;
  for (const MXGemmKernelArg &arg : kernelArgs)
    args.push_back(arg.tensorMap ? ptr : gptr);
  auto type = FunctionType::get(ctx, args, {});
  auto func = gpu::GPUFuncOp::create(builder, loc, name, type);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  // setmaxnreg needs a register cap at entry: maxntid and minctasm (the
  // CTAs per SM it was built for).
  func->setAttr("nvvm.maxntid",
                builder.getDenseI32ArrayAttr(
                    {static_cast<int32_t>(cfg.threads()), 1, 1}));
  func->setAttr("nvvm.minctasm",
                builder.getI32IntegerAttr(static_cast<int32_t>(cfg.ctasPerSM)));
  // A cluster pair along N, fixed at compile time (.reqnctapercluster):
  // the launch is an ordinary one whose grid N is a multiple of it.
  if (cfg.clusterN > 1)
    func->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                  builder.getDenseI32ArrayAttr(
                      {static_cast<int32_t>(cfg.clusterN), 1, 1}));

  int64_t ctas = persistentCtas(problem, cfg, target.getMultiprocessors());
  KernelEmitter emitter(builder, loc, problem, cfg, target.getMmaEmitter(),
                        ctas);
  emitter.emit(func);

  int64_t gridZ = problem.kind == MXGemmKind::Expert ? problem.numExperts : 1;
  std::array<int64_t, 3> grid = {(problem.n + cfg.tileN - 1) / cfg.tileN,
                                 (problem.m + cfg.tileM - 1) / cfg.tileM,
                                 gridZ};
  if (cfg.persistent)
    grid = {ctas, 1, 1};
  return MXGemmLaunch{func,
                      grid,
                      {cfg.threads(), 1, 1},
                      layoutOf(problem, cfg).bytes,
                      emitter.getTensorMapA(),
                      emitter.getTensorMapB(),
                      emitter.getTensorMapScales(),
                      emitter.getTensorMapScalesA(),
                      emitter.getTensorMapResult(),
                      cfg.persistent ? 1 : 0,
                      std::move(kernelArgs)};
}

SmallVector<MXGemmKernelArg> moe::mxGemmKernelArgs(const MXGemmProblem &p,
                                                   const MXGemmConfig &cfg) {
  SmallVector<MXGemmKernelArg> args;
  auto map = [&](MXGemmArg role) { args.push_back({role, true}); };
  auto pointer = [&](MXGemmArg role) { args.push_back({role, false}); };
  if (p.path != MXMmaPath::Bf16Operands) {
    // The codes' maps, then the scale tables, c and the blocks' experts.
    map(MXGemmArg::Lhs);
    map(MXGemmArg::Rhs);
    pointer(MXGemmArg::LhsScales);
    pointer(MXGemmArg::RhsScales);
    pointer(MXGemmArg::Result);
    pointer(MXGemmArg::BlockToExpert);
  } else {
    // The operands' maps (lhs_gather, round_lhs, round_rhs: none for the
    // gathered operand), rhs_codes's and lhs_codes's scale bytes, and
    // tma_store's result; then the token rows of the gathered operands.
    // (A block GEMM's transposed product rounds its weight, which comes
    // by TMA.)
    bool lhsRows = cfg.lhsGather || (cfg.roundLhs && !p.pairsBlocks());
    bool rhsRows = cfg.roundRhs || cfg.rhsGather;
    if (!lhsRows)
      map(MXGemmArg::Lhs);
    if (!rhsRows)
      map(MXGemmArg::Rhs);
    if (cfg.rhsCodes)
      map(MXGemmArg::RhsScales);
    if (cfg.lhsCodes)
      map(MXGemmArg::LhsScales);
    if (cfg.tmaStore)
      map(MXGemmArg::Result);
    if (lhsRows)
      pointer(MXGemmArg::Lhs);
    if (rhsRows)
      pointer(MXGemmArg::Rhs);
    // The outputs: a plain epilogue's result, or the activation backward's
    // (the first where the result is, the others after the affinities).
    const MXGemmEpilogue &e = p.epilogue;
    SmallVector<MXGemmArg> outputs = {MXGemmArg::Result};
    if (e.kind == MXGemmEpilogue::Kind::GatedActBwd) {
      outputs.clear();
      for (auto [want, role] :
           {std::make_pair(e.writeDGateUp, MXGemmArg::DGateUp),
            std::make_pair(bool(e.dGateUpAlongN), MXGemmArg::DGateUpAlongN),
            std::make_pair(bool(e.dGateUpAlongM), MXGemmArg::DGateUpAlongM),
            std::make_pair(e.writeH, MXGemmArg::H),
            std::make_pair(e.writeScaledH, MXGemmArg::ScaledH),
            std::make_pair(e.writePartials, MXGemmArg::Partials)})
        if (want)
          outputs.push_back(role);
    }
    if (!cfg.tmaStore)
      pointer(outputs.front());
    pointer(MXGemmArg::BlockToExpert);
    if (p.biasType)
      pointer(MXGemmArg::Bias);
    if (e.kind == MXGemmEpilogue::Kind::GatedActBwd) {
      pointer(MXGemmArg::GateUp);
      pointer(MXGemmArg::Affinities);
      for (MXGemmArg role : llvm::drop_begin(outputs))
        pointer(role);
      if (e.gateUpCheckpoint)
        pointer(MXGemmArg::CheckpointTokenIds);
    }
  }
  if (p.skipPadding)
    pointer(MXGemmArg::Tokens);
  if (cfg.persistent)
    pointer(MXGemmArg::TileCounter);
  return args;
}

nvgpu::TensorMapDescriptorType MXGemmLaunch::tensorMapOf(MXGemmArg role) const {
  switch (role) {
  case MXGemmArg::Lhs:
    return tensorMapA;
  case MXGemmArg::Rhs:
    return tensorMapB;
  case MXGemmArg::RhsScales:
    return tensorMapScales;
  case MXGemmArg::LhsScales:
    return tensorMapScalesA;
  case MXGemmArg::Result:
    return tensorMapResult;
  default:
    llvm_unreachable("only operands, scales and the result have maps");
  }
}
