//===- MXGemmSm100.cpp - the sm_100a roles of the MX GEMM kernels ---------===//
//
// The block_scale path on sm_100a: the tensor core applies the E8M0 scales
// (tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32), so codes
// and scale bytes go to it unchanged. The rest of the kernel (arguments,
// shared memory, the TMA ring of 128-byte code panels, an expert's slot
// range) is MXGemmSm90.cpp's.
//
//   warpgroup 0 (producer)                      warpgroup 1
//   for each K tile t, stage s = t % stages:    warp 0 allocates tensor memory
//     wait empty[s]                             thread 0, for each K tile t:
//     thread 0: expect_tx full[s], TMA A, B       wait full[s]
//     all: the 4 scale bytes of a row of A          tcgen05.cp the A and B scale
//       and of B (one 32-bit word each) into        atoms of s into tensor memory
//       the 512-byte scale atoms of s               4 x tcgen05.mma (K = 32 each,
//     fence.proxy.async, arrive full[s]               scale-factor id 0..3)
//                                                   tcgen05.commit -> empty[s]
//                                                 thread 0: tcgen05.commit -> done
//                                                 all: wait done, tcgen05.ld the
//                                                   accumulator row of the thread,
//                                                   store it; warp 0 deallocates
//
// Tensor memory: the f32 accumulator in columns [0, tileN) (row m in lane
// m), then per stage the A scale atom (4 columns) and the B atoms (4 each),
// so that a stage's scales are not overwritten before its MMAs completed
// (empty[s] guarantees it). Layouts and descriptors come from
// BlockScaleLayouts.h, whose unit tests hold them to CUTLASS and the PTX
// ISA. Compile-verified only (docs/numerics.md).
//
//===----------------------------------------------------------------------===//
#include "MXGemmEmitter.h"

#include "moe/Conversion/MoeToNVGPU/BlockScaleLayouts.h"

#include "llvm/Support/MathExtras.h"

#include <cassert>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gemm;

namespace bs = mlir::moe::blockscale;

namespace {

// The index arithmetic of the kernel, written once for integers
// (tcgen05IndexingAgrees) and IR values (the kernel).
// The byte of a 128-row scale atom where row r's word of 4 K-block bytes
// goes: (r % 32) * 16 + (r / 32) * 4.
template <typename Ops, typename V> V atomWordByte(Ops &o, V row) {
  return o.add(o.mul(o.rem(row, 32), 16), o.mul(o.div(row, 32), 4));
}
// The tensor-memory columns of a stage's scales, relative to the first
// one: the A atom, then the B atoms, 4 columns each (32 lanes x 128 bits).
constexpr int64_t kColumnsPerAtom = 4;

} // namespace

bool moe::tcgen05IndexingAgrees() {
  IntOps o;
  for (int64_t row = 0; row < bs::kSfAtomRows; ++row)
    for (int64_t kb = 0; kb < bs::kSfAtomKBlocks; ++kb) {
      // The word lands whole: K-block kb is its byte kb.
      if (bs::sfAtomByte(row, kb) != atomWordByte(o, row) + kb)
        return false;
      // After tcgen05.cp, the MMA reads the row's scale in the atom's
      // columns, byte kb (the scale-factor id), in every lane quarter.
      for (int64_t quarter = 0; quarter < 4; ++quarter) {
        bs::TmemByte cell =
            bs::tcgen05ScaleFactorByte(row, kb, bs::kSfAtomRows, quarter);
        if (cell.column < 0 || cell.column >= kColumnsPerAtom ||
            cell.byte != kb || bs::tcgen05SfId(kb) != kb)
          return false;
      }
    }
  return true;
}

int64_t KernelEmitter::scaleAtomsB() const {
  return (cfg.tileN + bs::kSfAtomRows - 1) / bs::kSfAtomRows;
}

int64_t KernelEmitter::tmemColumns() const {
  // Each scale atom takes 4 columns (32 lanes x 128 bits, in all four lane
  // quarters); tcgen05.alloc takes a power of two of at least 32.
  int64_t used = cfg.tileN + cfg.stages * kColumnsPerAtom * (1 + scaleAtomsB());
  return std::max<int64_t>(32, llvm::PowerOf2Ceil(used));
}

void KernelEmitter::emitProducerBlockScale() {
  assert(tcgen05IndexingAgrees() && mmaSyncIndexingAgrees() &&
         "block_scale index arithmetic vs BlockScaleLayouts");
  // tileK = 128 codes: the 4 scale bytes of a row and K tile are one
  // aligned 32-bit word of the [rows, K / 32] scale tensor.
  int64_t wordsPerRow = p.k / cfg.tileK;
  // An expert's K tiles start at its first slot.
  Value firstWord = indexToI32(divu(kBegin, cfg.tileK));

  OpBuilder::InsertionGuard guard(b);
  auto [t, s] = beginProducerTile();
  Value word0 = add(firstWord, indexToI32(t));
  Value s64 = indexToI64(s);
  // tcgen05: row r of a 128-row atom keeps its 4 K-block bytes at (r % 32)
  // * 16 + (r / 32) * 4 (bs::sfAtomByte), so the word lands whole; the
  // copy to tensor memory reads the atom. mma.sync: the words of the
  // stage's rows in order, read by the lanes that pass them.
  IROps o{*this};
  Value atomByte =
      mma == MmaEmitter::Tcgen05 ? atomWordByte(o, tid) : mul(tid, 4);
  // Rows outside the operand read scale 127 (factor 1): TMA zero-filled
  // their codes, and a NaN byte would turn the zeros into NaN.
  auto storeWord = [&](Value table, Value row, Value inside, int64_t region,
                       int64_t atom, int64_t atomsPerStage) {
    Value w = toI64(add(mul(row, i32(wordsPerRow)), word0));
    Value word = i32(0x7F7F7F7F);
    Value clamped = select(inside, w, i64(0));
    Value loaded =
        loadGlobal(i32T, globalElement(i32T, table, clamped), /*alignment=*/4);
    word = select(inside, loaded, word);
    Value off = add(mul(add(mul(s64, atomsPerStage), atom), bs::kSfAtomBytes),
                    add(toI64(atomByte), region));
    LLVM::StoreOp::create(b, loc, word, smemPtr(smemAddr(off)),
                          /*alignment=*/4);
  };
  Value rowA = add(m0, tid);
  storeWord(scalesA, rowA, cmp(arith::CmpIPredicate::ult, rowA, p.m),
            lay.scaleA, 0, 1);
  for (int64_t atom = 0; atom < scaleAtomsB(); ++atom) {
    // Column n0 + c of the tile; rowB0 is its first rhs row.
    Value c = add(tid, atom * bs::kSfAtomRows);
    Value inside = cmp(arith::CmpIPredicate::ult, add(n0, c), p.n);
    storeWord(scalesB, add(rowB0, c), inside, lay.scaleB, atom,
              scaleAtomsB());
  }
  // tcgen05.cp reads the atoms through the async proxy.
  if (mma == MmaEmitter::Tcgen05)
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  arrive(s);
}

void KernelEmitter::emitConsumerTcgen05() {
  MLIRContext *ctx = b.getContext();
  int64_t S = cfg.stages;
  Type tmemPtrT = LLVM::LLVMPointerType::get(ctx, 6);
  auto group = NVVM::CTAGroupKindAttr::get(ctx, NVVM::CTAGroupKind::CTA_1);
  auto fence = [&](NVVM::Tcgen05FenceKind kind) {
    NVVM::Tcgen05FenceOp::create(b, loc,
                                 NVVM::Tcgen05FenceKindAttr::get(ctx, kind));
  };
  // Named barrier 1 over the 128 threads of this warpgroup (0 is the
  // CTA's).
  auto warpgroupBarrier = [&] {
    NVVM::BarrierOp::create(b, loc, /*res=*/Type(), i32(1), i32(128),
                            /*reductionOp=*/nullptr,
                            /*reductionPredicate=*/Value());
  };
  auto ifThen = [&](Value cond, function_ref<void()> body) {
    auto op = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  };

  Value ct = sub(tid, i32(128 * cfg.producerWarpgroups));
  Value warp = divu(ct, 32);
  Value isWarp0 = eq(warp, 0);
  int64_t columns = tmemColumns();
  Value slot = smemPtr(smemAddr(i64(lay.counters + 8)));

  // One whole warp allocates; the address arrives through shared memory.
  ifThen(isWarp0, [&] {
    NVVM::Tcgen05AllocOp::create(b, loc, slot, i32(columns), group);
    NVVM::Tcgen05RelinquishAllocPermitOp::create(b, loc, group);
  });
  fence(NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  warpgroupBarrier();
  fence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  Value tmem = LLVM::LoadOp::create(b, loc, i32T, slot, /*alignment=*/4);
  auto tmemPtr = [&](Value address) {
    return LLVM::IntToPtrOp::create(b, loc, tmemPtrT, address);
  };
  Value barsAddr = smemAddr(i64(lay.barriers));
  auto barrierPtr = [&](Value id) {
    return smemPtr(add(barsAddr, mul(indexToI64(id), 8)));
  };

  // The shared-memory descriptors (their constant part; the start address
  // is OR-ed in): the 128B-swizzled K-major code panels (SBO 1024 B: 8
  // rows of 128 B), and the unswizzled 512-byte scale atoms (SBO 128 B: 8
  // lines of 16 B).
  uint64_t panelDesc = bs::tcgen05SmemDescriptor(
      0, /*leadingByteOffset=*/16, /*strideByteOffset=*/1024,
      bs::SmemSwizzle::Swizzle128B);
  uint64_t atomDesc = bs::tcgen05SmemDescriptor(
      0, /*leadingByteOffset=*/0, /*strideByteOffset=*/128,
      bs::SmemSwizzle::None);
  auto descriptor = [&](Value offset, uint64_t constant) {
    Value lo = shru(andi(smemAddr(offset), 0x3FFFF), 4);
    return ori(lo, i64(static_cast<int64_t>(constant)));
  };
  bs::MxElementFormat format = isa<Float8E5M2Type>(p.elementType)
                                   ? bs::MxElementFormat::E5M2
                                   : bs::MxElementFormat::E4M3;
  auto blockScale = NVVM::Tcgen05MMABlockScaleAttr::get(
      ctx, NVVM::Tcgen05MMABlockScale::BLOCK32);
  auto kind = NVVM::MMABlockScaleKindAttr::get(ctx,
                                               NVVM::MMABlockScaleKind::MXF8F6F4);
  auto collector = NVVM::Tcgen05MMACollectorOpAttr::get(
      ctx, NVVM::Tcgen05MMACollectorOp::DISCARD);
  int64_t sfColumns = kColumnsPerAtom * (1 + scaleAtomsB());

  // The MMA issuer.
  ifThen(eq(ct, 0), [&] {
    auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1));
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      Value t = loop.getInductionVar();
      auto [s, parity] = stageAndParity(t, S, /*flip=*/false);
      waitParity(s, parity);
      fence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
      Value s32 = indexToI32(s);
      Value s64 = indexToI64(s);
      Value sfA = add(add(tmem, i32(cfg.tileN)), mul(s32, i32(sfColumns)));
      int64_t atomsPerStageB = scaleAtomsB();
      auto copyAtom = [&](Value column, Value atomOffset) {
        NVVM::Tcgen05CpOp::create(
            b, loc,
            NVVM::Tcgen05CpShapeAttr::get(ctx, NVVM::Tcgen05CpShape::SHAPE_32x128b),
            group,
            NVVM::Tcgen05CpMulticastAttr::get(ctx,
                                              NVVM::Tcgen05CpMulticast::WARPX4),
            /*srcFormat=*/nullptr, tmemPtr(column),
            descriptor(atomOffset, atomDesc));
      };
      copyAtom(sfA, add(mul(s64, bs::kSfAtomBytes), lay.scaleA));
      Value sfB = add(sfA, i32(kColumnsPerAtom));
      for (int64_t atom = 0; atom < atomsPerStageB; ++atom)
        copyAtom(add(sfB, i32(kColumnsPerAtom * atom)),
                 add(mul(add(mul(s64, atomsPerStageB), atom), bs::kSfAtomBytes),
                     lay.scaleB));
      Value descA = descriptor(add(mul(s64, cfg.tileM * kSwizzleBytes), lay.a),
                               panelDesc);
      Value descB = descriptor(add(mul(s64, cfg.tileN * kSwizzleBytes), lay.b),
                               panelDesc);
      Value notFirstTile = cmp(arith::CmpIPredicate::ne, indexToI32(t), 0);
      for (int64_t j = 0; j < cfg.tileK / cfg.mmaK; ++j) {
        bs::Tcgen05BlockScaledShape shape;
        shape.aFormat = shape.bFormat = format;
        shape.m = cfg.mmaM;
        shape.n = cfg.mmaN;
        shape.aSfId = shape.bSfId = bs::tcgen05SfId(j);
        uint32_t idesc = bs::tcgen05InstrDescriptor(shape);
        // K = 32 codes are 32 bytes of the panel: 2 in the descriptor's
        // 16-byte start address.
        Value accumulate =
            j ? cst(i1T, 1) : notFirstTile;
        NVVM::Tcgen05MMABlockScaleOp::create(
            b, loc, kind, group, blockScale, collector,
            tmemPtr(tmem), add(descA, i64(2 * j)), add(descB, i64(2 * j)),
            i32(static_cast<int32_t>(idesc)), accumulate,
            tmemPtr(sfA), tmemPtr(sfB));
      }
      // empty[s] once these MMAs (and the copies before them) completed.
      NVVM::Tcgen05CommitOp::create(b, loc, barrierPtr(add(s, S)),
                                    /*multicastMask=*/Value(), group);
    }
    // The accumulator is done once the last tile's MMAs are. An expert
    // without slots issued none: a plain arrival (its tile is zeros).
    Value none = cmp(arith::CmpIPredicate::eq, indexToI32(kTiles), 0);
    auto done = scf::IfOp::create(b, loc, none, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(done.thenBlock());
      arrive(idx(2 * S));
      b.setInsertionPointToStart(done.elseBlock());
      NVVM::Tcgen05CommitOp::create(b, loc, barrierPtr(idx(2 * S)),
                                    /*multicastMask=*/Value(), group);
    }
  });

  // The epilogue: warp w reads lanes 32 w .. 32 w + 31, one row each.
  waitParity(idx(2 * S), cst(i1T, 0));
  fence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  Value rowInTile = ct;
  Value row32 = add(m0, rowInTile);
  Value laneBase = add(tmem, shl(mul(warp, 32), 16));
  // An expert without slots issued no MMA: its tile is zeros.
  Value any = cmp(arith::CmpIPredicate::ne, indexToI32(kTiles), 0);
  Value base = resultBase();
  Value rowInside = cmp(arith::CmpIPredicate::ult, row32, p.m);
  Value rowStart = mul(toI64(row32), p.n);
  constexpr int64_t kChunk = 32;
  auto chunkT = VectorType::get({kChunk}, i32T);
  auto quadT = VectorType::get({4}, f32T);
  Value zero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(quadT, b.getF32FloatAttr(0.0f)));
  for (int64_t c = 0; c < cfg.tileN; c += kChunk) {
    // Every lane of the warp takes part (.sync.aligned); the stores skip
    // rows and columns outside C.
    Value bits = NVVM::Tcgen05LdOp::create(
        b, loc, chunkT, /*pack=*/nullptr,
        NVVM::Tcgen05LdStShapeAttr::get(ctx, NVVM::Tcgen05LdStShape::SHAPE_32X32B),
        tmemPtr(add(laneBase, i32(c))), /*offset=*/Value());
    NVVM::Tcgen05WaitOp::create(
        b, loc, NVVM::Tcgen05WaitKindAttr::get(ctx, NVVM::Tcgen05WaitKind::LOAD));
    Value values = LLVM::BitcastOp::create(
        b, loc, VectorType::get({kChunk}, f32T), bits);
    for (int64_t q = 0; q < kChunk; q += 4) {
      Value col32 = add(n0, i32(c + q));
      Value inside = rowInside;
      // N is a multiple of 4 (checked): a quad is inside or outside whole.
      if (p.n % cfg.tileN)
        inside = andi(inside, cmp(arith::CmpIPredicate::ult, col32, p.n));
      OpBuilder::InsertionGuard g(b);
      auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value quad = LLVM::UndefOp::create(b, loc, quadT);
      for (int64_t e = 0; e < 4; ++e) {
        Value v = LLVM::ExtractElementOp::create(b, loc, values, i32(q + e));
        quad = LLVM::InsertElementOp::create(b, loc, quad, v, i32(e));
      }
      quad = select(any, quad, zero);
      Value ix = add(rowStart, toI64(col32));
      LLVM::StoreOp::create(b, loc, quad, globalElement(f32T, base, ix),
                            /*alignment=*/16);
    }
  }
  fence(NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  warpgroupBarrier();
  ifThen(isWarp0, [&] {
    fence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
    NVVM::Tcgen05DeallocOp::create(b, loc, tmemPtr(tmem), i32(columns), group);
  });
}
