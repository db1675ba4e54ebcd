//===- MXGemmSm120.cpp - the sm_120a roles of the MX GEMM kernels ---------===//
//
// The block_scale path on sm_120a: warp-level
// mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X
// takes the codes in registers and one E8M0 byte per row of A and column of
// B. The producer warpgroup is the sm_100a one (MXGemmSm100.cpp: TMA of the
// 128-byte code panels, the 4 scale bytes of each row as one word), with
// the words stored in row order.
//
//   consumer warp w (8 of them): rows 32 (w / 2) .. +31, columns 64 (w % 2)
//   .. +63 of the 128 x 128 tile, 2 x 8 m16n8k32 fragments of f32
//   for each K tile t (stage s):
//     wait full[s]; each lane reads the scale words of the rows and columns
//     it passes to the MMAs (BlockScaleLayouts.h: mmaSyncPacked*)
//     for each K = 32 step j: ldmatrix.x4 the A fragments (2) and B
//       fragments (4 pairs) from the swizzled panels, 16 mma.sync with
//       byte-id j and thread-id 0
//     arrive empty[s]
//   store the fragments (8-byte pairs)
//
// Compile-verified only (docs/numerics.md).
//
//===----------------------------------------------------------------------===//
#include "MXGemmEmitter.h"

#include "moe/Conversion/MoeToNVGPU/BlockScaleLayouts.h"

#include <cassert>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gemm;

namespace bs = mlir::moe::blockscale;

namespace {

// The warp tiling of the 128 x 128 tile: 4 x 2 warps of 32 x 64.
constexpr int64_t kWarpRows = 32, kWarpCols = 64;
constexpr int64_t kMTiles = kWarpRows / bs::kMmaSyncM;
constexpr int64_t kNTiles = kWarpCols / bs::kMmaSyncN;

// The index arithmetic of the kernel, written once for both integers (the
// checks against BlockScaleLayouts.h, mmaSyncIndexingAgrees) and IR values
// (the kernel): `o` supplies div, rem, mul and add.
// ldmatrix.x4 lane `l` addresses row l % 8 of matrix l / 8; matrix m of an
// A fragment is rows 8 (m % 2) .., K bytes 16 (m / 2) ..; of a B pair it is
// n-tile m / 2, K bytes 16 (m % 2) ...
template <typename Ops, typename V> V aMatrixRow(Ops &o, V lane) {
  return o.add(o.mul(o.rem(o.div(lane, 8), 2), 8), o.rem(lane, 8));
}
template <typename Ops, typename V> V aMatrixChunk(Ops &o, V lane) {
  return o.div(o.div(lane, 8), 2);
}
template <typename Ops, typename V> V bMatrixCol(Ops &o, V lane) {
  return o.add(o.mul(o.div(o.div(lane, 8), 2), 8), o.rem(lane, 8));
}
template <typename Ops, typename V> V bMatrixChunk(Ops &o, V lane) {
  return o.rem(o.div(lane, 8), 2);
}
// The scale a lane passes for A (row in the m16 tile) and for B (column in
// the n8 tile).
template <typename Ops, typename V> V scaleARow(Ops &o, V lane) {
  return o.add(o.mul(o.rem(lane, 2), 8), o.div(lane, 4));
}
template <typename Ops, typename V> V scaleBCol(Ops &o, V lane) {
  return o.div(lane, 4);
}

} // namespace

bool moe::mmaSyncIndexingAgrees() {
  IntOps o;
  for (int64_t lane = 0; lane < 32; ++lane) {
    int64_t g = lane / 4, t = lane % 4;
    // Register j of ldmatrix.x4 holds, for lane (g, t), row g and bytes
    // 4t .. 4t + 3 of matrix j, which lanes 8 j .. 8 j + 7 address.
    for (int64_t reg = 0; reg < 4; ++reg) {
      int64_t row = aMatrixRow(o, 8 * reg + g);
      int64_t chunk = aMatrixChunk(o, 8 * reg);
      for (int64_t byte = 0; byte < 4; ++byte) {
        bs::MatrixCoord a = bs::mmaSyncAElement(lane, reg, byte);
        if (a.row != row || a.col != 16 * chunk + 4 * t + byte)
          return false;
      }
    }
    // A B pair: registers 2 p, 2 p + 1 are b0, b1 of its n-tile p.
    for (int64_t pair = 0; pair < 2; ++pair)
      for (int64_t reg = 0; reg < 2; ++reg) {
        int64_t matrix = 2 * pair + reg;
        int64_t col = bMatrixCol(o, 8 * matrix + g) - 8 * pair;
        int64_t chunk = bMatrixChunk(o, 8 * matrix);
        for (int64_t byte = 0; byte < 4; ++byte) {
          bs::MatrixCoord e = bs::mmaSyncBElement(lane, reg, byte);
          if (e.col != col || e.row != 16 * chunk + 4 * t + byte)
            return false;
        }
      }
    if (scaleARow(o, lane) != bs::mmaSyncPackedScaleARow(lane) ||
        scaleBCol(o, lane) != bs::mmaSyncPackedScaleBCol(lane))
      return false;
  }
  // With thread-id 0 the instruction takes each row's and column's scale
  // from a lane that holds it.
  for (int64_t row = 0; row < bs::kMmaSyncM; ++row)
    if (scaleARow(o, bs::mmaSyncScaleASource(row, {0, 0}).lane) != row)
      return false;
  for (int64_t col = 0; col < bs::kMmaSyncN; ++col)
    if (scaleBCol(o, bs::mmaSyncScaleBSource(col, {0, 0}).lane) != col)
      return false;
  return true;
}

void KernelEmitter::emitConsumerMmaSync() {
  assert(mmaSyncIndexingAgrees() &&
         "mma.sync index arithmetic vs BlockScaleLayouts");
  MLIRContext *ctx = b.getContext();
  int64_t S = cfg.stages;
  Value ct = sub(tid, i32(128 * cfg.producerWarpgroups));
  Value warp = divu(ct, 32);
  Value lane = remu(ct, 32);
  Value warpRow = mul(divu(warp, 2), kWarpRows);
  Value warpCol = mul(remu(warp, 2), kWarpCols);

  Type i16T = b.getI16Type();
  auto fragT = LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(4, i32T));
  auto accT4 = LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(4, f32T));
  auto ldmatrix = [&](Value address) {
    Value ptr = smemPtr(address);
    return NVVM::LdMatrixOp::create(
        b, loc, fragT, ptr, b.getI32IntegerAttr(4),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
        NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
        NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
  };
  // Row `row` (i32, of the stage's panel), 16-byte chunk `chunk`: the
  // 128-byte swizzle puts the chunk at chunk ^ (row % 8).
  auto panelAddress = [&](Value panel, Value row, Value chunk) {
    Value swizzled = xori(chunk, remu(row, 8));
    return add(panel, toI64(add(mul(row, 128), mul(swizzled, 16))));
  };
  // The lane's ldmatrix rows and chunks, and its scale row and column: the
  // functions mmaSyncIndexingAgrees checks, on IR values.
  IROps o{*this};
  Value aRow = aMatrixRow(o, lane);
  Value aChunk = aMatrixChunk(o, lane);
  Value bCol = bMatrixCol(o, lane);
  Value bChunk = bMatrixChunk(o, lane);
  Value sRow = scaleARow(o, lane);
  Value sCol = scaleBCol(o, lane);

  NVVM::MMATypes type = isa<Float8E5M2Type>(p.elementType) ? NVVM::MMATypes::e5m2
                                                      : NVVM::MMATypes::e4m3;
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  SmallVector<Value> init(kMTiles * kNTiles * 4, zero);
  auto loop = scf::ForOp::create(b, loc, idx(0), kTiles, idx(1), init);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = loop.getInductionVar();
    auto [s, parity] = stageAndParity(t, S, /*flip=*/false);
    waitParity(s, parity);
    Value s32 = indexToI32(s);
    Value panelA =
        smemAddr(toI64(add(mul(s32, cfg.tileM * kSwizzleBytes), lay.a)));
    Value panelB =
        smemAddr(toI64(add(mul(s32, cfg.tileN * kSwizzleBytes), lay.b)));
    // The scale words (4 K-block bytes of a row) this lane passes.
    auto scaleWord = [&](int64_t region, int64_t rows, Value row) {
      Value off = add(mul(add(mul(s32, rows), row), 4), region);
      return LLVM::LoadOp::create(b, loc, i32T, smemPtr(smemAddr(toI64(off))),
                                  /*alignment=*/4);
    };
    SmallVector<Value> wordA, wordB;
    for (int64_t mt = 0; mt < kMTiles; ++mt)
      wordA.push_back(scaleWord(lay.scaleA, cfg.tileM,
                                add(warpRow, add(sRow, mt * bs::kMmaSyncM))));
    for (int64_t nt = 0; nt < kNTiles; ++nt)
      wordB.push_back(scaleWord(lay.scaleB, cfg.tileN,
                                add(warpCol, add(sCol, nt * bs::kMmaSyncN))));
    SmallVector<Value> acc(loop.getRegionIterArgs());
    for (int64_t j = 0; j < cfg.tileK / bs::kMmaSyncK; ++j) {
      SmallVector<Value> a, bf;
      for (int64_t mt = 0; mt < kMTiles; ++mt) {
        Value row = add(warpRow, add(aRow, mt * bs::kMmaSyncM));
        a.push_back(ldmatrix(panelAddress(panelA, row, add(aChunk, 2 * j))));
      }
      for (int64_t pair = 0; pair < kNTiles / 2; ++pair) {
        Value col = add(warpCol, add(bCol, 2 * pair * bs::kMmaSyncN));
        bf.push_back(
            ldmatrix(panelAddress(panelB, col, add(bChunk, 2 * j))));
      }
      Value byteId = cst(i16T, j);
      Value threadId = cst(i16T, 0);
      for (int64_t mt = 0; mt < kMTiles; ++mt) {
        SmallVector<Value> aRegs;
        for (int64_t r = 0; r < 4; ++r)
          aRegs.push_back(extract(a[mt], r));
        for (int64_t nt = 0; nt < kNTiles; ++nt) {
          Value pairRegs = bf[nt / 2];
          SmallVector<Value> bRegs = {extract(pairRegs, 2 * (nt % 2)),
                                      extract(pairRegs, 2 * (nt % 2) + 1)};
          int64_t at = (mt * kNTiles + nt) * 4;
          SmallVector<Value> c(acc.begin() + at, acc.begin() + at + 4);
          Value d = NVVM::MmaBlockScaleOp::create(
              b, loc, accT4, aRegs, bRegs, c, wordA[mt], byteId, threadId,
              wordB[nt], byteId, threadId, ArrayRef<int64_t>{16, 8, 32},
              std::array<NVVM::MMATypes, 2>{type, type},
              NVVM::ScaleVecSize::X1, NVVM::BlockScaleFormat::UE8M0,
              NVVM::MMABlockScaleKind::MXF8F6F4);
          for (int64_t r = 0; r < 4; ++r)
            acc[at + r] = extract(d, r);
        }
      }
    }
    // The stage's panels may be refilled once every consumer is past them.
    arrive(add(s, S));
    scf::YieldOp::create(b, loc, acc);
  }

  // c0, c1 = row g, columns 2t, 2t + 1; c2, c3 = row g + 8.
  Value base = resultBase();
  Value g = divu(lane, 4);
  Value tq = remu(lane, 4);
  auto pairT = VectorType::get({2}, f32T);
  for (int64_t mt = 0; mt < kMTiles; ++mt)
    for (int64_t nt = 0; nt < kNTiles; ++nt)
      for (int64_t half = 0; half < 2; ++half) {
        Value row = add(m0, add(warpRow, add(g, mt * bs::kMmaSyncM + 8 * half)));
        Value col = add(n0, add(warpCol, add(mul(tq, 2), nt * bs::kMmaSyncN)));
        Value inside = andi(cmp(arith::CmpIPredicate::ult, row, p.m),
                            cmp(arith::CmpIPredicate::ult, col, p.n));
        OpBuilder::InsertionGuard guard(b);
        auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
        b.setInsertionPointToStart(ifOp.thenBlock());
        int64_t at = (mt * kNTiles + nt) * 4 + 2 * half;
        Value pair = LLVM::UndefOp::create(b, loc, pairT);
        pair = LLVM::InsertElementOp::create(b, loc, pair,
                                             loop.getResult(at), i32(0));
        pair = LLVM::InsertElementOp::create(b, loc, pair,
                                             loop.getResult(at + 1), i32(1));
        Value ix = add(mul(toI64(row), p.n), toI64(col));
        LLVM::StoreOp::create(b, loc, pair, globalElement(f32T, base, ix),
                              /*alignment=*/8);
      }
}
