//===- ActBwdKernel.cpp - P1's activation backward as P2-P4's operands ----===//
//
// The kernel of ActBwdKernel.h. The math is buildGatedActBwd's (the host
// lowering's f32 operation order), and the roundings are the operand
// kernels' (the MX builders' scale byte, inverse and factor, and the
// cvt.rn.satfinite pair conversions of MXRounding): the values are those
// P1's activation epilogue and the [dg | du] operand kernel write, bit for
// bit. Only the partial sums of <dA, h> come in other groups (a tile's
// columns, added lane by lane, then over the warp), so da may differ from
// the epilogue's in its last bits, the same on every run.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/ActBwdKernel.h"

#include "DynamicSmem.h"
#include "KernelArith.h"
#include "moe/Conversion/MoeToNVGPU/MXRounding.h"
#include "moe/Dialect/Moe/Utils/MXBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Rows of a CTA: one 32-slot block of the rows' roundings.
constexpr int64_t kRows = 32;
/// f32 words per row of a shared-memory tile: the CTA's columns and 4
/// more, so that a thread's 32-row column reads and a row's 16-byte stores
/// spread over the banks (the operand kernels' stride).
int64_t tileStride(const MXActBwdProblem &p) { return p.tileColumns + 4; }
int64_t tileBytes(const MXActBwdProblem &p) {
  return kRows * tileStride(p) * 4;
}
/// Columns of dA a lane holds in the row pass: a warp takes a row of the
/// tile (8: two 16-byte f32 loads a value; 4: one).
int64_t laneColumns(const MXActBwdProblem &p) { return p.tileColumns / 32; }

/// The shared-memory tiles of a problem, in order.
struct Tiles {
  int64_t gate = -1, up = -1, dGate = -1, dUp = -1, rowsOperand = -1;
  int64_t count = 0;
};

Tiles tilesOf(const MXActBwdProblem &p) {
  Tiles t;
  if (p.checkpoint) {
    t.gate = t.count++;
    t.up = t.count++;
  }
  if (p.dGateUpAlongRows) {
    t.dGate = t.count++;
    t.dUp = t.count++;
  }
  if (p.rowsOperandAlongRows)
    t.rowsOperand = t.count++;
  return t;
}

/// Emits the body of one kernel.
class ActBwdEmitter : KernelArith {
public:
  ActBwdEmitter(OpBuilder &b, Location loc, const MXActBwdProblem &p)
      : KernelArith(b, loc), p(p), tiles(tilesOf(p)), i32T(b.getI32Type()),
        i64T(b.getI64Type()), f32T(b.getF32Type()), bf16T(b.getBF16Type()),
        gptrT(LLVM::LLVMPointerType::get(b.getContext(), 1)),
        sptrT(LLVM::LLVMPointerType::get(b.getContext(), 3)) {}

  void emit(gpu::GPUFuncOp func);

private:
  Value i32(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value f32(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value ult(Value x, int64_t y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, i64(y));
  }
  Value element(Value vector, int64_t i) {
    return LLVM::ExtractElementOp::create(b, loc, vector, i32(i));
  }
  /// `base` + `bytes` (i64) as a global pointer.
  Value global(Value base, Value bytes) {
    return LLVM::GEPOp::create(b, loc, gptrT, b.getI8Type(), base,
                               ValueRange{bytes});
  }
  /// Word `word` (i64) of shared-memory tile `tile`.
  Value smemWord(int64_t tile, Value word) {
    Value bytes = add(mul(word, 4), tile * tileBytes(p));
    return LLVM::IntToPtrOp::create(b, loc, sptrT, add(smemBase, bytes));
  }
  /// `count` contiguous f32 (a multiple of 4) at `ptr`, by 16-byte loads.
  void loadF32(Value ptr, int64_t count, bool shared,
               SmallVectorImpl<Value> &out) {
    auto vecT = VectorType::get({4}, f32T);
    for (int64_t i = 0; i < count; i += 4) {
      Value at = i ? LLVM::GEPOp::create(
                         b, loc, shared ? sptrT : gptrT, f32T, ptr,
                         ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)})
                   : ptr;
      Value v = LLVM::LoadOp::create(b, loc, vecT, at, 16, false, false,
                                     /*isInvariant=*/!shared);
      for (int64_t j = 0; j < 4; ++j)
        out.push_back(element(v, j));
    }
  }
  /// `xs` (f32, a multiple of 4) at `ptr` by 16-byte stores.
  void storeF32(ArrayRef<Value> xs, Value ptr, bool shared) {
    auto vecT = VectorType::get({4}, f32T);
    for (size_t i = 0; i < xs.size(); i += 4) {
      Value v = LLVM::UndefOp::create(b, loc, vecT);
      for (int64_t j = 0; j < 4; ++j)
        v = LLVM::InsertElementOp::create(b, loc, v, xs[i + j], i32(j));
      Value at = i ? LLVM::GEPOp::create(
                         b, loc, shared ? sptrT : gptrT, f32T, ptr,
                         ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)})
                   : ptr;
      LLVM::StoreOp::create(b, loc, v, at, 16);
    }
  }
  /// The MX values (bf16) of `xs`, one block whose amax is `amax`.
  SmallVector<Value> round(ArrayRef<Value> xs, Value amax, MXQuantAttr quant) {
    auto [inverse, factor] = buildBlockScale(b, loc, amax, quant);
    Type codeType = getMXElementType(b.getContext(), quant.getElement());
    SmallVector<Value> values;
    for (size_t i = 0; i < xs.size(); i += 2) {
      auto [v0, v1] = buildRoundPairToBf16(b, loc, xs[i], xs[i + 1], inverse,
                                           inverse, factor, factor, codeType);
      values.push_back(v0);
      values.push_back(v1);
    }
    return values;
  }
  /// Runs `body` under `cond` (always when null).
  void guarded(Value cond, function_ref<void()> body) {
    if (!cond)
      return body();
    OpBuilder::InsertionGuard g(b);
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body();
  }

  void loadCheckpointTiles(Value ids, Value s0, Value j, Value inside);
  void rowPass(Value s0, Value j0, Value tileColumn);
  void columnPass(Value s0, Value j0);

  const MXActBwdProblem &p;
  Tiles tiles;
  Type i32T, i64T, f32T, bf16T, gptrT, sptrT;
  Value dA, gateUp, affinities, ids, tid, smemBase;
  Value outCols, outRows, outRowsOperand, outDGateUp, outH, outScaledH,
      outPartials;
};

} // namespace

void ActBwdEmitter::loadCheckpointTiles(Value idsArg, Value s0, Value j,
                                        Value inside) {
  // Thread c: column j's 32 slots of g and of u, 64 contiguous bytes each
  // (the checkpoint's token index is innermost), times the slots' masks
  // (moe.scale_rows of moe.unpack_checkpoint: 1 or 0, exactly), into
  // column c of the tiles.
  int64_t B = p.blockSize;
  Value blockBase = mul(divu(s0, B), 2 * p.n * B);
  Value jc = arith::SelectOp::create(b, loc, inside, j, i64(0));
  SmallVector<Value> masks;
  for (int64_t i = 0; i < kRows; ++i) {
    Value id = LLVM::LoadOp::create(
        b, loc, i32T, global(idsArg, mul(add(s0, i), 4)), 4, false, false,
        /*isInvariant=*/true);
    Value real = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, id,
                                       i32(0));
    masks.push_back(arith::UIToFPOp::create(
        b, loc, f32T, arith::ExtUIOp::create(b, loc, i32T, real)));
  }
  auto vecT = VectorType::get({8}, bf16T);
  for (int64_t half = 0; half < 2; ++half) {
    Value first =
        add(add(add(blockBase, half * p.n * B), mul(jc, B)), remu(s0, B));
    for (int64_t i = 0; i < kRows; i += 8) {
      Value v = LLVM::LoadOp::create(b, loc, vecT,
                                     global(gateUp, mul(add(first, i), 2)), 16,
                                     false, false, /*isInvariant=*/true);
      for (int64_t e = 0; e < 8; ++e) {
        Value x = arith::ExtFOp::create(b, loc, f32T, element(v, e));
        x = arith::MulFOp::create(b, loc, x, masks[i + e]);
        Value word = add(mul(i64(i + e), tileStride(p)), tid);
        LLVM::StoreOp::create(b, loc, x,
                              smemWord(half ? tiles.up : tiles.gate, word), 4);
      }
    }
  }
}

void ActBwdEmitter::rowPass(Value s0, Value j0, Value tileColumn) {
  // Warp w takes rows w + W k (W warps), lane l the laneColumns(p) columns
  // from laneColumns(p) * l: a warp a whole row of the tile.
  Value warp = divu(tid, 32), lane = remu(tid, 32);
  Value c = mul(lane, laneColumns(p));
  Value j = add(j0, c);
  // Lanes past n (n a multiple of 32: whole blocks' lanes) load a valid
  // column, take part in the shuffles and store nothing.
  Value inside = p.n % p.tileColumns ? ult(j, p.n) : Value();
  Value jl = inside ? arith::SelectOp::create(b, loc, inside, j, i64(0))
                    : j;
  Value zero = f32(0.0f);
  int64_t warps = p.tileColumns / 32;
  int64_t partialsPerRow = llvm::divideCeil(p.n, p.tileColumns);
  for (int64_t k = 0; k < kRows / warps; ++k) {
    Value i = add(warp, warps * k);
    Value s = add(s0, i);
    SmallVector<Value> dAs, gs, us;
    loadF32(global(dA, mul(add(mul(s, p.n), jl), 4)), laneColumns(p), false,
            dAs);
    if (p.checkpoint) {
      Value word = add(mul(i, tileStride(p)), c);
      loadF32(smemWord(tiles.gate, word), laneColumns(p), true, gs);
      loadF32(smemWord(tiles.up, word), laneColumns(p), true, us);
    } else {
      Value row = mul(s, 2 * p.n);
      loadF32(global(gateUp, mul(add(row, jl), 4)), laneColumns(p), false, gs);
      loadF32(global(gateUp, mul(add(add(row, p.n), jl), 4)), laneColumns(p),
              false, us);
    }
    Value a = LLVM::LoadOp::create(b, loc, f32T,
                                   global(affinities, mul(s, 4)), 4, false,
                                   false, /*isInvariant=*/true);
    SmallVector<Value> dg, du, h, scaled, rowsOperand;
    Value partial = zero;
    for (int64_t e = 0; e < laneColumns(p); ++e) {
      GatedActGrads grads = buildGatedActBwd(b, loc, p.activation, p.clamp,
                                             gs[e], us[e], dAs[e], a);
      dg.push_back(grads.dGate);
      du.push_back(grads.dUp);
      h.push_back(grads.h);
      // moe.scale_rows: a * h.
      scaled.push_back(arith::MulFOp::create(b, loc, a, grads.h));
      Value product = arith::MulFOp::create(b, loc, dAs[e], grads.h);
      partial = arith::AddFOp::create(b, loc, partial, product);
    }
    rowsOperand = p.scaleRows ? scaled : h;
    // The f32 outputs.
    guarded(inside, [&] {
      Value dguRow = mul(s, 2 * p.n);
      if (p.writeDGateUp) {
        storeF32(dg, global(outDGateUp, mul(add(dguRow, j), 4)), false);
        storeF32(du, global(outDGateUp, mul(add(add(dguRow, p.n), j), 4)),
                 false);
      }
      Value hAt = mul(add(mul(s, p.n), j), 4);
      if (p.writeH)
        storeF32(h, global(outH, hAt), false);
      if (p.writeScaledH)
        storeF32(scaled, global(outScaledH, hAt), false);
    });
    // [dg | du] along the columns: the 32-column block of the lane quad.
    if (MXQuantAttr quant = p.dGateUpAlongCols) {
      for (int64_t half = 0; half < 2; ++half) {
        ArrayRef<Value> xs = half ? du : dg;
        Value amax = zero;
        for (Value x : xs)
          amax = buildAmaxStep(b, loc, amax, x);
        // The lanes of the 32-column block: 4 of 8 columns, or 8 of 4.
        SmallVector<int32_t> offsets;
        for (int32_t o = 1; o < 32 / laneColumns(p); o *= 2)
          offsets.push_back(o);
        amax = buildLaneAmax(b, loc, amax, offsets);
        SmallVector<Value> values = round(xs, amax, quant);
        guarded(inside, [&] {
          auto vecT = VectorType::get({laneColumns(p)}, bf16T);
          Value v = LLVM::UndefOp::create(b, loc, vecT);
          for (int64_t e = 0; e < laneColumns(p); ++e)
            v = LLVM::InsertElementOp::create(b, loc, v, values[e], i32(e));
          Value at = add(add(mul(s, 2 * p.n), half * p.n), j);
          LLVM::StoreOp::create(b, loc, v, global(outCols, mul(at, 2)),
                                2 * laneColumns(p));
        });
      }
    }
    // <dA, h> over the tile's columns of the row: the warp's lanes in a
    // fixed butterfly order (columns past n add nothing).
    if (p.writePartials) {
      if (inside)
        partial = arith::SelectOp::create(b, loc, inside, partial, zero);
      for (int64_t offset : {16, 8, 4, 2, 1}) {
        Value other = gpu::ShuffleOp::create(b, loc, partial, i32(offset),
                                             i32(32), gpu::ShuffleMode::XOR)
                          .getShuffleResult();
        partial = arith::AddFOp::create(b, loc, partial, other);
      }
      guarded(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                    i64(0)),
              [&] {
                Value at = add(mul(s, partialsPerRow), tileColumn);
                LLVM::StoreOp::create(b, loc, partial,
                                      global(outPartials, mul(at, 4)), 4);
              });
    }
    // The rows' roundings' values into the tiles.
    Value word = add(mul(i, tileStride(p)), c);
    if (p.dGateUpAlongRows) {
      storeF32(dg, smemWord(tiles.dGate, word), true);
      storeF32(du, smemWord(tiles.dUp, word), true);
    }
    if (p.rowsOperandAlongRows)
      storeF32(rowsOperand, smemWord(tiles.rowsOperand, word), true);
  }
}

void ActBwdEmitter::columnPass(Value s0, Value j0) {
  // Thread c: column c of each tile, one 32-row block, stored in place.
  Value j = add(j0, tid);
  Value inside = p.n % p.tileColumns ? ult(j, p.n) : Value();
  guarded(inside, [&] {
    auto roundColumn = [&](int64_t tile, MXQuantAttr quant, Value out,
                           int64_t rowElements, int64_t columnOffset) {
      SmallVector<Value> xs;
      Value amax = f32(0.0f);
      for (int64_t i = 0; i < kRows; ++i) {
        Value x = LLVM::LoadOp::create(
            b, loc, f32T, smemWord(tile, add(i64(i * tileStride(p)), tid)), 4);
        xs.push_back(x);
        amax = buildAmaxStep(b, loc, amax, x);
      }
      SmallVector<Value> values = round(xs, amax, quant);
      Value col = add(j, columnOffset);
      for (int64_t i = 0; i < kRows; ++i) {
        Value at = add(mul(add(s0, i), rowElements), col);
        LLVM::StoreOp::create(b, loc, values[i], global(out, mul(at, 2)), 2);
      }
    };
    if (MXQuantAttr quant = p.dGateUpAlongRows) {
      roundColumn(tiles.dGate, quant, outRows, 2 * p.n, 0);
      roundColumn(tiles.dUp, quant, outRows, 2 * p.n, p.n);
    }
    if (MXQuantAttr quant = p.rowsOperandAlongRows)
      roundColumn(tiles.rowsOperand, quant, outRowsOperand, p.n, 0);
  });
}

void ActBwdEmitter::emit(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  unsigned arg = 0;
  dA = entry.getArgument(arg++);
  gateUp = entry.getArgument(arg++);
  affinities = entry.getArgument(arg++);
  if (p.checkpoint)
    ids = entry.getArgument(arg++);
  for (auto [want, out] :
       {std::make_pair(bool(p.dGateUpAlongCols), &outCols),
        std::make_pair(bool(p.dGateUpAlongRows), &outRows),
        std::make_pair(bool(p.rowsOperandAlongRows), &outRowsOperand),
        std::make_pair(p.writeDGateUp, &outDGateUp),
        std::make_pair(p.writeH, &outH),
        std::make_pair(p.writeScaledH, &outScaledH),
        std::make_pair(p.writePartials, &outPartials)})
    if (want)
      *out = entry.getArgument(arg++);

  auto toI64 = [&](Value index) {
    return arith::IndexCastOp::create(b, loc, i64T, index);
  };
  // Block -> (row group, column tile), column tiles fastest.
  int64_t tilesN = llvm::divideCeil(p.n, p.tileColumns);
  Value block = toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  tid = toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value tileColumn = remu(block, tilesN);
  Value j0 = mul(tileColumn, p.tileColumns);
  Value s0 = mul(divu(block, tilesN), kRows);
  if (tiles.count) {
    // The dynamic shared memory (1024-byte aligned), as the GEMM kernels
    // take it.
    Value view = dynamicSmemView(b, loc, tiles.count * tileBytes(p));
    smemBase =
        toI64(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, view));
  }
  if (p.checkpoint) {
    Value j = add(j0, tid);
    Value inside = p.n % p.tileColumns ? ult(j, p.n)
                                             : arith::ConstantOp::create(
                                                   b, loc, b.getBoolAttr(true));
    loadCheckpointTiles(ids, s0, j, inside);
    gpu::BarrierOp::create(b, loc);
  }
  rowPass(s0, j0, tileColumn);
  if (p.dGateUpAlongRows || p.rowsOperandAlongRows) {
    gpu::BarrierOp::create(b, loc);
    columnPass(s0, j0);
  }
  gpu::ReturnOp::create(b, loc);
}

std::array<int64_t, 2>
moe::actBwdPartialsShape(const MXActBwdProblem &problem) {
  return {problem.slots,
          (problem.n + problem.tileColumns - 1) / problem.tileColumns};
}

bool moe::fitsMXActBwdKernel(const MXActBwdProblem &problem) {
  // A tile of 128 or 256 columns (a warp a row: 4 or 8 columns a lane),
  // whole 32-slot blocks per CTA (and 32-slot runs of a checkpoint block),
  // whole lane quads of 32 columns inside dg or du, MX roundings (the
  // unquantized forms keep their operand kernels), and something to write.
  if ((problem.tileColumns != kActBwdNarrowTileColumns &&
       problem.tileColumns != kActBwdTileColumns) ||
      problem.slots % kRows || problem.n % 32 ||
      (problem.checkpoint && problem.blockSize % kRows) ||
      problem.outputs() == 0)
    return false;
  for (MXQuantAttr quant : {problem.dGateUpAlongCols, problem.dGateUpAlongRows,
                            problem.rowsOperandAlongRows})
    if (quant && !quant.isQuantized())
      return false;
  return true;
}

MXActBwdLaunch moe::buildMXActBwdKernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module, StringRef name,
                                        const MXActBwdProblem &problem) {
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  int64_t tileCount = tilesOf(problem).count;
  if (tileCount)
    declareDynamicSmem(builder, loc, module);
  Type gptr = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> args(3 + problem.checkpoint + problem.outputs(), gptr);
  auto func = gpu::GPUFuncOp::create(builder, loc, name,
                                     FunctionType::get(ctx, args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  func->setAttr("nvvm.maxntid",
                builder.getDenseI32ArrayAttr(
                    {static_cast<int32_t>(problem.tileColumns), 1, 1}));
  ActBwdEmitter(builder, loc, problem).emit(func);
  int64_t blocks = problem.slots / kRows *
                   llvm::divideCeil(problem.n, problem.tileColumns);
  return MXActBwdLaunch{func,
                        {blocks, 1, 1},
                        {problem.tileColumns, 1, 1},
                        tileCount * tileBytes(problem)};
}
