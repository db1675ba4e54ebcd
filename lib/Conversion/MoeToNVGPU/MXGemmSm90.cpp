//===- MXGemmSm90.cpp - IR builder of the sm_90a MX GEMM kernel -----------===//
//
// The C++ form of the H200-verified prototype bench/prototypes/mxgemm_sm90
// (gen_mxgemm.py, variant fp8). One CTA computes a tileM x tileN fp32 tile:
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
// Shared memory is one dynamic array aligned to 1024 bytes at run time:
//   [A tiles][B tiles][A scale factors][B scale factors][mbarriers]
// full[s] counts the producer's 128 threads plus thread 0's expect_tx
// arrival; empty[s] counts every consumer thread.
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
// their reads above it); no wgmma stays in flight across the loop back-edge
// (ptxas would serialize them, C7514); setmaxnreg needs nvvm.maxntid and
// nvvm.minctasm = 1 (C7508).
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/MXGemmSm90.h"

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

namespace {

/// Bytes of one 128-byte-swizzle row; a code tile's K extent must equal it.
constexpr int64_t kSwizzleBytes = 128;
/// Name of the dynamic shared memory array in the gpu.module.
constexpr StringLiteral kDynamicSmem = "moe_dynamic_smem";

/// Byte offsets of the shared-memory regions, relative to the 1024-aligned
/// base.
struct SmemLayout {
  int64_t a, b, scaleA, scaleB, barriers, numBarriers, bytes;
};

/// A memref in shared memory (address space 3).
MemRefType smemType(ArrayRef<int64_t> shape, Type elementType) {
  return MemRefType::get(shape, elementType, MemRefLayoutAttrInterface(),
                         IntegerAttr::get(IntegerType::get(
                                              elementType.getContext(), 64),
                                          3));
}

SmemLayout layoutOf(const MXGemmConfig &cfg) {
  SmemLayout l;
  int64_t blocksPerTile = cfg.tileK / 32;
  l.a = 0;
  l.b = l.a + cfg.stages * cfg.tileM * cfg.tileK;
  l.scaleA = l.b + cfg.stages * cfg.tileN * cfg.tileK;
  // [stage][block][row] f32.
  l.scaleB = l.scaleA + cfg.stages * blocksPerTile * cfg.tileM * 4;
  // [stage][block][lane quad][scaleTableStride] f32.
  l.barriers =
      l.scaleB + cfg.stages * blocksPerTile * 4 * cfg.scaleTableStride * 4;
  l.numBarriers = 2 * cfg.stages;
  // Slack for aligning the base to 1024 bytes at run time.
  l.bytes = l.barriers + l.numBarriers * 8 + 1024;
  return l;
}

/// Emits the kernel body. Holds the builder, the values every part shares,
/// and small helpers that materialize integer constants on demand.
class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, Location loc, const MXGemmProblem &p,
                const MXGemmConfig &cfg)
      : b(b), loc(loc), p(p), cfg(cfg), lay(layoutOf(cfg)),
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
    tileAT = smemType({cfg.tileM, cfg.tileK}, b.getI8Type());
    tileBT = smemType({cfg.tileN, cfg.tileK}, b.getI8Type());
    tmapAT = tensorMapType(tileAT);
    tmapBT = tensorMapType(tileBT);
  }

  void emit(gpu::GPUFuncOp func);
  nvgpu::TensorMapDescriptorType getTensorMapA() const { return tmapAT; }
  nvgpu::TensorMapDescriptorType getTensorMapB() const { return tmapBT; }

private:
  // Fragment registers of one m64nN f32 wgmma accumulator per thread.
  int64_t accLen() const { return cfg.mmaN / 2; }

  nvgpu::TensorMapDescriptorType tensorMapType(MemRefType tile) {
    return nvgpu::TensorMapDescriptorType::get(
        b.getContext(), tile, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
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
  Value ori(Value x, int64_t y) {
    return arith::OrIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value shru(Value x, int64_t y) {
    return arith::ShRUIOp::create(b, loc, x, cst(x.getType(), y));
  }
  Value eq(Value x, int64_t y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x,
                                 cst(x.getType(), y));
  }
  Value toI64(Value v) { return arith::ExtUIOp::create(b, loc, i64T, v); }
  Value indexToI32(Value v) {
    return arith::IndexCastOp::create(b, loc, i32T, v);
  }
  Value i32ToIndex(Value v) {
    return arith::IndexCastOp::create(b, loc, idxT, v);
  }
  Value indexToI64(Value v) {
    return toI64(indexToI32(v));
  }

  /// i64 shared-memory address -> !llvm.ptr<3>.
  Value smemPtr(Value addr) {
    return LLVM::IntToPtrOp::create(b, loc, smemPtrT, addr);
  }
  /// A shared address `off` bytes past the aligned base.
  Value smemAddr(Value off) { return add(alignedBase, off); }

  Value extract(Value st, int64_t i) {
    return LLVM::ExtractValueOp::create(b, loc, st, ArrayRef<int64_t>{i});
  }

  /// 2^(byte - 127) as f32, exactly: byte << 23 for 1..254, the subnormal
  /// 2^-127 for 0, NaN for 255.
  Value e8m0ToF32(Value byte);
  /// (stage, phase parity) of K tile `t` (index); `flip` inverts the
  /// parity (the producer's wait on a fresh "empty" barrier passes).
  std::pair<Value, Value> stageAndParity(Value t, bool flip);
  /// The wgmma shared-memory descriptor of a K-major 128B-swizzled tile at
  /// shared address `addr`: start address >> 4, LBO 16 B (unused), SBO
  /// 1024 B (8 rows x 128 B), layout type 1 (128B swizzle) in bits 62-63.
  Value matrixDescriptor(Value addr);
  /// Pins the registers of a wgmma result after wgmma.wait_group: an empty
  /// asm with side effects that ties them all, so that no read of them is
  /// scheduled above the wait (CUTLASS's fence_operand).
  Value pinRegisters(Value st);

  void emitProducer();
  void emitConsumer();
  void storeAccumulator(Value acc, Value rowInTile, Value quad);

  OpBuilder &b;
  Location loc;
  const MXGemmProblem &p;
  const MXGemmConfig &cfg;
  SmemLayout lay;
  Type i1T, i32T, i64T, f32T, idxT;
  Type accT, smemPtrT, globalPtrT;
  nvgpu::MBarrierGroupType barsT;
  MemRefType tileAT, tileBT;
  nvgpu::TensorMapDescriptorType tmapAT, tmapBT;

  // Kernel arguments and the values both roles use.
  Value tmapA, tmapB, scalesA, scalesB, result, blockToExpert;
  Value tid, isThread0, m0, n0, smem, alignedBase, alignPad, bars;
};

} // namespace

Value KernelEmitter::e8m0ToF32(Value byte) {
  Value shifted = arith::ShLIOp::create(b, loc, byte, i32(23));
  Value bits =
      arith::SelectOp::create(b, loc, eq(byte, 0), i32(0x00400000), shifted);
  bits = arith::SelectOp::create(b, loc, eq(byte, 255), i32(0x7FC00000), bits);
  return arith::BitcastOp::create(b, loc, f32T, bits);
}

std::pair<Value, Value> KernelEmitter::stageAndParity(Value t, bool flip) {
  Value stage = remu(t, cfg.stages);
  Value parity = andi(indexToI32(divu(t, cfg.stages)), 1);
  if (flip)
    parity = arith::XOrIOp::create(b, loc, parity, i32(1));
  return {stage, arith::TruncIOp::create(b, loc, i1T, parity)};
}

Value KernelEmitter::matrixDescriptor(Value addr) {
  uint64_t hi = (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
                (uint64_t(1) << 62);
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
  auto dialect =
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT);
  return LLVM::InlineAsmOp::create(
             b, loc, accT, regs, /*asm_string=*/"", constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None, dialect,
             /*operand_attrs=*/ArrayAttr())
      .getResult(0);
}

void KernelEmitter::emitProducer() {
  int64_t S = cfg.stages;
  int64_t kTiles = p.k / cfg.tileK;
  int64_t blocksPerTile = cfg.tileK / 32;
  int64_t tileBytes = (cfg.tileM + cfg.tileN) * cfg.tileK;
  // The expert of this CTA's rows picks the weight rows and their scales.
  Value blockIdx = divu(toI64(m0), p.blockSize);
  Value expertPtr = LLVM::GEPOp::create(b, loc, globalPtrT, i32T,
                                        blockToExpert, ValueRange{blockIdx});
  Value expert = LLVM::LoadOp::create(b, loc, i32T, expertPtr, /*alignment=*/4,
                                      /*isVolatile=*/false,
                                      /*isNonTemporal=*/false,
                                      /*isInvariant=*/true);
  Value rowB0 = add(mul(expert, i32(p.n)), n0);
  // The 4 E8M0 bytes of one row and K tile (tileK = 128) are one aligned
  // 32-bit word.
  int64_t wordsPerRow = p.k / cfg.tileK;

  auto loop = scf::ForOp::create(b, loc, idx(0), idx(kTiles), idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value t = loop.getInductionVar();
  auto [s, parity] = stageAndParity(t, /*flip=*/true);
  Value ticks = idx(cfg.waitTicks);
  nvgpu::MBarrierTryWaitParityOp::create(b, loc, bars, parity, ticks,
                                         add(s, S));
  // Thread 0: expect both tiles' bytes on full[s] and issue the two loads.
  auto tma = scf::IfOp::create(b, loc, isThread0, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(tma.thenBlock());
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, bars, idx(tileBytes), s,
                                            /*predicate=*/Value());
    Value kk = mul(t, cfg.tileK);
    Value stageA = add(add(alignPad, mul(s, cfg.tileM * cfg.tileK)), lay.a);
    Value stageB = add(add(alignPad, mul(s, cfg.tileN * cfg.tileK)), lay.b);
    Value va = memref::ViewOp::create(b, loc, tileAT, smem, stageA, {});
    Value vb = memref::ViewOp::create(b, loc, tileBT, smem, stageB, {});
    // Coordinates innermost first: [k, row].
    nvgpu::TmaAsyncLoadOp::create(b, loc, va, bars, tmapA,
                                  ValueRange{kk, i32ToIndex(m0)}, s,
                                  /*multicastMask=*/Value(),
                                  /*predicate=*/Value());
    nvgpu::TmaAsyncLoadOp::create(b, loc, vb, bars, tmapB,
                                  ValueRange{kk, i32ToIndex(rowB0)}, s,
                                  /*multicastMask=*/Value(),
                                  /*predicate=*/Value());
  }
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
    Value wp = LLVM::GEPOp::create(b, loc, globalPtrT, i32T, side.table,
                                   ValueRange{w});
    Value word = LLVM::LoadOp::create(b, loc, i32T, wp, /*alignment=*/4,
                                      /*isVolatile=*/false,
                                      /*isNonTemporal=*/false,
                                      /*isInvariant=*/true);
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
  nvgpu::MBarrierArriveOp::create(
      b, loc, nvgpu::MBarrierTokenType::get(b.getContext()), bars, s);
}

void KernelEmitter::storeAccumulator(Value acc, Value rowInTile, Value quad) {
  Value n64 = i64(p.n);
  Value row = toI64(add(m0, rowInTile));
  Value col = toI64(add(n0, mul(quad, 2)));
  Value base0 = add(mul(row, n64), col);
  Value base1 = add(base0, 8 * p.n);
  auto vecT = VectorType::get({2}, f32T);
  for (int64_t jb = 0; jb < accLen() / 4; ++jb) {
    for (int64_t r = 0; r < 2; ++r) {
      int64_t i = 4 * jb + 2 * r;
      Value vec = LLVM::UndefOp::create(b, loc, vecT);
      vec = LLVM::InsertElementOp::create(b, loc, vec, extract(acc, i), i32(0));
      vec = LLVM::InsertElementOp::create(b, loc, vec, extract(acc, i + 1),
                                          i32(1));
      Value ix = add(r ? base1 : base0, 8 * jb);
      Value ptr = LLVM::GEPOp::create(b, loc, globalPtrT, f32T, result,
                                      ValueRange{ix});
      LLVM::StoreOp::create(b, loc, vec, ptr, /*alignment=*/8);
    }
  }
}

void KernelEmitter::emitConsumer() {
  int64_t S = cfg.stages;
  int64_t kTiles = p.k / cfg.tileK;
  int64_t blocksPerTile = cfg.tileK / cfg.mmaK;
  int64_t stride = cfg.scaleTableStride;
  MLIRContext *ctx = b.getContext();
  // Thread -> (consumer warpgroup, warp, lane quad); fragment row of the
  // m64nN accumulator: 16 * warp + lane / 4 (+ 8).
  Value ct = sub(tid, i32(128 * cfg.producerWarpgroups));
  Value cw = divu(ct, 128);
  Value wt = remu(ct, 128);
  Value warp = divu(wt, 32);
  Value lane = remu(wt, 32);
  Value quad = remu(lane, 4);
  Value rowInTile =
      add(mul(cw, cfg.mmaM), add(mul(warp, 16), divu(lane, 4)));
  Value aWarpgroupOff = mul(toI64(cw), cfg.mmaM * cfg.tileK);
  Value row64 = toI64(rowInTile);
  Value quad64 = toI64(quad);
  Value ticks = idx(cfg.waitTicks);

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
  auto loop = scf::ForOp::create(b, loc, idx(0), idx(kTiles), idx(1),
                                 ValueRange{zero, zero, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = loop.getInductionVar();
    Value acc = loop.getRegionIterArg(0);
    std::array<Value, 2> partials = {loop.getRegionIterArg(1),
                                     loop.getRegionIterArg(2)};
    auto [s, parity] = stageAndParity(t, /*flip=*/false);
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, bars, parity, ticks, s);
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
    nvgpu::MBarrierArriveOp::create(
        b, loc, nvgpu::MBarrierTokenType::get(ctx), bars, add(s, S));
    acc = promote(acc, partials[(blocksPerTile - 1) % 2], fa, fb);
    scf::YieldOp::create(b, loc, ValueRange{acc, partials[0], partials[1]});
  }
  storeAccumulator(loop.getResult(0), rowInTile, quad);
}

void KernelEmitter::emit(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  tmapA = UnrealizedConversionCastOp::create(b, loc, tmapAT,
                                             entry.getArgument(0))
              .getResult(0);
  tmapB = UnrealizedConversionCastOp::create(b, loc, tmapBT,
                                             entry.getArgument(1))
              .getResult(0);
  scalesA = entry.getArgument(2);
  scalesB = entry.getArgument(3);
  result = entry.getArgument(4);
  blockToExpert = entry.getArgument(5);

  tid = indexToI32(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  n0 = mul(indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
           cfg.tileN);
  m0 = mul(indexToI32(gpu::BlockIdOp::create(b, loc, gpu::Dimension::y)),
           cfg.tileM);

  // The dynamic shared memory, its base aligned to 1024 bytes (128B-swizzle
  // TMA destinations and wgmma descriptors need it).
  auto rawT = smemType({0}, b.getI8Type());
  auto smemT =
      smemType({lay.bytes}, b.getI8Type());
  Value raw = memref::GetGlobalOp::create(b, loc, rawT, kDynamicSmem);
  smem = memref::ReinterpretCastOp::create(b, loc, smemT, raw, /*offset=*/0,
                                           ArrayRef<int64_t>{lay.bytes},
                                           ArrayRef<int64_t>{1});
  Value base = arith::IndexCastOp::create(
      b, loc, i64T, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem));
  alignedBase = arith::AndIOp::create(b, loc, add(base, 1023), i64(-1024));
  alignPad = arith::IndexCastOp::create(b, loc, idxT, sub(alignedBase, base));

  auto barsMemT = smemType({lay.numBarriers}, i64T);
  Value barsView = memref::ViewOp::create(b, loc, barsMemT, smem,
                                          add(alignPad, lay.barriers), {});
  bars = UnrealizedConversionCastOp::create(b, loc, barsT, barsView)
             .getResult(0);

  isThread0 = eq(tid, 0);
  auto init = scf::IfOp::create(b, loc, isThread0, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(init.thenBlock());
    int64_t consumerThreads = 128 * cfg.consumerWarpgroups;
    for (int64_t s = 0; s < cfg.stages; ++s) {
      // full[s]: thread 0's expect_tx arrival plus 128 scale writers.
      nvgpu::MBarrierInitOp::create(b, loc, bars, idx(128 + 1), idx(s),
                                    /*predicate=*/Value());
      nvgpu::MBarrierInitOp::create(b, loc, bars, idx(consumerThreads),
                                    idx(cfg.stages + s), /*predicate=*/Value());
    }
    nvgpu::TmaPrefetchOp::create(b, loc, tmapA, /*predicate=*/Value());
    nvgpu::TmaPrefetchOp::create(b, loc, tmapB, /*predicate=*/Value());
  }
  gpu::BarrierOp::create(b, loc);

  Value isProducer = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ult, tid,
      i32(128 * cfg.producerWarpgroups));
  auto roles = scf::IfOp::create(b, loc, isProducer, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    NVVM::SetMaxRegisterOp::create(b, loc, cfg.producerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
    emitProducer();
    b.setInsertionPointToStart(roles.elseBlock());
    NVVM::SetMaxRegisterOp::create(b, loc, cfg.consumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
    emitConsumer();
  }
  gpu::ReturnOp::create(b, loc);
}

LogicalResult
moe::checkMXGemmSm90(const MXGemmProblem &problem, const TargetInfo &target,
                     function_ref<InFlightDiagnostic()> emitError) {
  if (target.getMXMmaPath() != MXMmaPath::Fp8WgmmaPromote)
    return emitError() << "target " << target.getChip()
                       << " does not use the fp8-wgmma promotion path";
  const MXGemmConfig &cfg = target.getMXGemmConfig();
  if (problem.m % cfg.tileM || problem.n % cfg.tileN ||
      problem.k % cfg.tileK)
    return emitError() << "MX GEMM " << problem.m << "x" << problem.n << "x"
                       << problem.k << " is not a multiple of the "
                       << target.getChip() << " tile " << cfg.tileM << "x"
                       << cfg.tileN << "x" << cfg.tileK;
  if (problem.blockSize % cfg.tileM)
    return emitError() << "block size " << problem.blockSize
                       << " is not a multiple of the tile's " << cfg.tileM
                       << " rows";
  if (layoutOf(cfg).bytes > target.getMaxDynamicSharedMemory())
    return emitError() << "the MX GEMM needs " << layoutOf(cfg).bytes
                       << " bytes of shared memory, more than "
                       << target.getMaxDynamicSharedMemory();
  return success();
}

MXGemmLaunch moe::buildMXGemmSm90Kernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module,
                                        StringRef name,
                                        const MXGemmProblem &problem,
                                        const TargetInfo &target) {
  const MXGemmConfig &cfg = target.getMXGemmConfig();
  assert(cfg.tileK == kSwizzleBytes && cfg.mmaM * cfg.consumerWarpgroups ==
                                           cfg.tileM &&
         cfg.mmaN == cfg.tileN && "tile shapes of the fp8 promotion kernel");
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());

  // The public zero-size array becomes `.extern .shared .align 1024 .b8
  // moe_dynamic_smem[]`: the dynamic shared memory.
  if (!SymbolTable::lookupSymbolIn(module, kDynamicSmem)) {
    auto rawT =
        smemType({0}, builder.getI8Type());
    memref::GlobalOp::create(builder, loc, kDynamicSmem,
                             /*sym_visibility=*/StringAttr(), rawT,
                             /*initial_value=*/Attribute(), /*constant=*/false,
                             builder.getI64IntegerAttr(1024));
  }

  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type gptr = LLVM::LLVMPointerType::get(ctx, 1);
  auto type =
      FunctionType::get(ctx, {ptr, ptr, gptr, gptr, gptr, gptr}, {});
  auto func = gpu::GPUFuncOp::create(builder, loc, name, type);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  // setmaxnreg needs a register cap at entry: maxntid and minctasm = 1.
  func->setAttr("nvvm.maxntid",
                builder.getDenseI32ArrayAttr(
                    {static_cast<int32_t>(cfg.threads()), 1, 1}));
  func->setAttr("nvvm.minctasm", builder.getI32IntegerAttr(1));

  KernelEmitter emitter(builder, loc, problem, cfg);
  emitter.emit(func);

  return MXGemmLaunch{func,
                      {problem.n / cfg.tileN, problem.m / cfg.tileM, 1},
                      {cfg.threads(), 1, 1},
                      layoutOf(cfg).bytes,
                      emitter.getTensorMapA(),
                      emitter.getTensorMapB()};
}
