//===- MoeAttrs.cpp - attributes of the moe dialect ---------------------===//
//
// Enum and attribute definitions, the clamp attribute's assembly format and
// the attribute verifiers.
//
//===----------------------------------------------------------------------===//
#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::moe;

#include "moe/Dialect/Moe/IR/MoeEnums.cpp.inc"

/// #moe.gemm_config's flags: `, rhs_n_major = true`, `, lhs_m_major = true`,
/// `, persistent = true`, `, pingpong = true` and
/// `, evict_first_outputs = true`, `, rhs_codes = true` and
/// `, lhs_codes = true`, `, lhs_gather = true`, `, round_lhs = true`,
/// `, round_rhs = true`, `, swap_operands = true`, `, rhs_gather = true` and
/// `, k_turns = true`, each present when set,
/// and `, ctas_per_sm = N`, `, cluster_n = N`, `, raster_m = N`,
/// `, tma_store = N` and `, store_columns = N`, in any order.
static ParseResult
parseKernelFlags(AsmParser &parser, bool &rhsNMajor, bool &lhsMMajor,
                 bool &persistent, int64_t &ctasPerSm, bool &pingpong,
                 int64_t &clusterN, int64_t &rasterM, bool &evictFirstOutputs,
                 bool &rhsCodes, bool &lhsCodes, bool &lhsGather,
                 bool &roundLhs, bool &roundRhs, bool &swapOperands,
                 bool &rhsGather, int64_t &tmaStore, int64_t &storeColumns,
                 bool &kTurns) {
  rhsNMajor = lhsMMajor = persistent = pingpong = evictFirstOutputs = rhsCodes =
      lhsCodes = lhsGather = roundLhs = roundRhs = swapOperands = rhsGather =
          kTurns = false;
  ctasPerSm = clusterN = rasterM = 1;
  tmaStore = 0;
  storeColumns = 32;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    int64_t *count = key == "ctas_per_sm" ? &ctasPerSm
                     : key == "cluster_n" ? &clusterN
                     : key == "raster_m"  ? &rasterM
                     : key == "tma_store" ? &tmaStore
                     : key == "store_columns" ? &storeColumns
                                              : nullptr;
    if (count) {
      if (parser.parseInteger(*count))
        return failure();
      continue;
    }
    bool *flag = key == "rhs_n_major"           ? &rhsNMajor
                 : key == "lhs_m_major"         ? &lhsMMajor
                 : key == "persistent"          ? &persistent
                 : key == "pingpong"            ? &pingpong
                 : key == "evict_first_outputs" ? &evictFirstOutputs
                 : key == "rhs_codes"           ? &rhsCodes
                 : key == "lhs_codes"           ? &lhsCodes
                 : key == "lhs_gather"          ? &lhsGather
                 : key == "round_lhs"           ? &roundLhs
                 : key == "round_rhs"           ? &roundRhs
                 : key == "swap_operands"       ? &swapOperands
                 : key == "rhs_gather"          ? &rhsGather
                 : key == "k_turns"             ? &kTurns
                                                : nullptr;
    if (!flag)
      return parser.emitError(at, "expected rhs_n_major, lhs_m_major, "
                                  "persistent, pingpong, ctas_per_sm, "
                                  "cluster_n, raster_m, "
                                  "evict_first_outputs, rhs_codes, "
                                  "lhs_codes, lhs_gather, round_lhs, "
                                  "round_rhs, swap_operands, rhs_gather, "
                                  "tma_store, store_columns or k_turns, "
                                  "got '")
             << key << "'";
    if (succeeded(parser.parseOptionalKeyword("true")))
      *flag = true;
    else if (parser.parseKeyword("false"))
      return failure();
  }
  return success();
}

static void printKernelFlags(AsmPrinter &printer, bool rhsNMajor,
                             bool lhsMMajor, bool persistent, int64_t ctasPerSm,
                             bool pingpong, int64_t clusterN, int64_t rasterM,
                             bool evictFirstOutputs, bool rhsCodes,
                             bool lhsCodes, bool lhsGather, bool roundLhs,
                             bool roundRhs, bool swapOperands, bool rhsGather,
                             int64_t tmaStore, int64_t storeColumns,
                             bool kTurns) {
  if (rhsNMajor)
    printer << ", rhs_n_major = true";
  if (lhsMMajor)
    printer << ", lhs_m_major = true";
  if (persistent)
    printer << ", persistent = true";
  if (ctasPerSm != 1)
    printer << ", ctas_per_sm = " << ctasPerSm;
  if (pingpong)
    printer << ", pingpong = true";
  if (clusterN != 1)
    printer << ", cluster_n = " << clusterN;
  if (rasterM != 1)
    printer << ", raster_m = " << rasterM;
  if (evictFirstOutputs)
    printer << ", evict_first_outputs = true";
  if (rhsCodes)
    printer << ", rhs_codes = true";
  if (lhsCodes)
    printer << ", lhs_codes = true";
  if (lhsGather)
    printer << ", lhs_gather = true";
  if (roundLhs)
    printer << ", round_lhs = true";
  if (roundRhs)
    printer << ", round_rhs = true";
  if (swapOperands)
    printer << ", swap_operands = true";
  if (rhsGather)
    printer << ", rhs_gather = true";
  if (tmaStore)
    printer << ", tma_store = " << tmaStore;
  if (storeColumns != 32)
    printer << ", store_columns = " << storeColumns;
  if (kTurns)
    printer << ", k_turns = true";
}

#define GET_ATTRDEF_CLASSES
#include "moe/Dialect/Moe/IR/MoeAttrs.cpp.inc"

void MoeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "moe/Dialect/Moe/IR/MoeAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// MXQuantAttr
//===----------------------------------------------------------------------===//

LogicalResult
MXQuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                    MXElement element, int64_t blockSize, ScaleRule rule) {
  // OCP MX v1.0 fixes the block at 32 elements, and the Blackwell
  // block-scaled MMAs consume exactly that granularity.
  if (blockSize != 32)
    return emitError() << "MX block size must be 32, got " << blockSize;
  return success();
}

//===----------------------------------------------------------------------===//
// ClampAttr
//===----------------------------------------------------------------------===//

/// The limits in their printed order; indices match the attribute's
/// parameters.
static constexpr llvm::StringLiteral kClampNames[] = {"gate_lo", "gate_hi",
                                                      "up_lo", "up_hi"};

Attribute ClampAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SMLoc attrLoc = parser.getCurrentLocation();
  FloatAttr limits[4];
  if (parser.parseLess())
    return {};
  do {
    SMLoc loc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return {};
    const auto *it = llvm::find(kClampNames, key);
    if (it == std::end(kClampNames)) {
      parser.emitError(loc, "unknown clamp limit '")
          << key << "', expected gate_lo, gate_hi, up_lo or up_hi";
      return {};
    }
    size_t index = it - std::begin(kClampNames);
    if (limits[index]) {
      parser.emitError(loc, "clamp limit '") << key << "' given twice";
      return {};
    }
    double value;
    if (parser.parseEqual() || parser.parseFloat(value))
      return {};
    limits[index] = FloatAttr::get(Float64Type::get(ctx), value);
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ClampAttr>(attrLoc, ctx, limits[0], limits[1],
                                      limits[2], limits[3]);
}

void ClampAttr::print(AsmPrinter &printer) const {
  FloatAttr limits[4] = {getGateLo(), getGateHi(), getUpLo(), getUpHi()};
  printer << "<";
  bool first = true;
  for (auto [name, limit] : llvm::zip_equal(kClampNames, limits)) {
    if (!limit)
      continue;
    if (!first)
      printer << ", ";
    first = false;
    printer << name << " = ";
    printer.printFloat(limit.getValue());
  }
  printer << ">";
}

LogicalResult ClampAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                FloatAttr gateLo, FloatAttr gateHi,
                                FloatAttr upLo, FloatAttr upHi) {
  FloatAttr limits[4] = {gateLo, gateHi, upLo, upHi};
  if (llvm::none_of(limits, [](FloatAttr limit) { return bool(limit); }))
    return emitError() << "clamp needs at least one limit";
  for (auto [name, limit] : llvm::zip_equal(kClampNames, limits))
    if (limit && !limit.getValue().isFinite())
      return emitError() << "clamp limit " << name << " must be finite";
  auto checkOrder = [&](StringRef what, FloatAttr lo,
                        FloatAttr hi) -> LogicalResult {
    if (!lo || !hi || lo.getValueAsDouble() < hi.getValueAsDouble())
      return success();
    return emitError() << "clamp " << what << "_lo (" << lo.getValueAsDouble()
                       << ") must be less than " << what << "_hi ("
                       << hi.getValueAsDouble() << ")";
  };
  if (failed(checkOrder("gate", gateLo, gateHi)))
    return failure();
  return checkOrder("up", upLo, upHi);
}

//===----------------------------------------------------------------------===//
// GemmConfigAttr
//===----------------------------------------------------------------------===//

/// Whether `values` holds `count` positive entries; reports them otherwise.
static LogicalResult
verifyPositiveList(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                   ArrayRef<int64_t> values, size_t count, StringRef what) {
  if (values.size() == count &&
      llvm::all_of(values, [](int64_t v) { return v > 0; }))
    return success();
  InFlightDiagnostic diag = emitError();
  diag << name << " must be " << count << " positive " << what << ", got [";
  llvm::interleaveComma(values, diag);
  return diag << "]";
}

LogicalResult GemmConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, MXMmaPath mma,
    ArrayRef<int64_t> tile, ArrayRef<int64_t> mmaShape, int64_t stages,
    int64_t dequantStages, ArrayRef<int64_t> warpgroups,
    ArrayRef<int64_t> registers, bool rhsNMajor, bool lhsMMajor,
    bool persistent, int64_t ctasPerSm, bool pingpong, int64_t clusterN,
    int64_t rasterM, bool evictFirstOutputs, bool rhsCodes, bool lhsCodes,
    bool lhsGather, bool roundLhs, bool roundRhs, bool swapOperands,
    bool rhsGather, int64_t tmaStore, int64_t storeColumns, bool kTurns) {
  if (failed(
          verifyPositiveList(emitError, "tile", tile, 3, "sizes [M, N, K]")) ||
      failed(verifyPositiveList(emitError, "mma_shape", mmaShape, 3,
                                "sizes [M, N, K]")) ||
      failed(verifyPositiveList(emitError, "warpgroups", warpgroups, 2,
                                "counts [producer, consumer]")) ||
      failed(verifyPositiveList(emitError, "registers", registers, 2,
                                "counts [producer, consumer]")))
    return failure();
  // block_scale: the tile is a grid of MMAs (one tcgen05.mma spanning it
  // on sm_100a, warp-level mma.sync on sm_120a).
  if (mma == MXMmaPath::BlockScale) {
    if (tile[0] % mmaShape[0] || tile[1] % mmaShape[1])
      return emitError() << "block_scale tile " << tile[0] << "x" << tile[1]
                         << " is not a grid of mma_shape " << mmaShape[0]
                         << "x" << mmaShape[1];
  } else {
    // Each consumer warpgroup issues the MMAs of its own mma_shape M rows
    // (ping-pong: of every M step of its own tiles), each spanning the
    // whole tile N.
    if (pingpong && tile[0] % mmaShape[0])
      return emitError() << "pingpong tile M " << tile[0]
                         << " is not a multiple of mma_shape M "
                         << mmaShape[0];
    // (Divided, not multiplied: any two int64 counts parse.)
    if (!pingpong && (tile[0] % mmaShape[0] ||
                      tile[0] / mmaShape[0] != warpgroups[1]))
      return emitError() << "tile M " << tile[0] << " is not mma_shape M "
                         << mmaShape[0] << " times " << warpgroups[1]
                         << " consumer warpgroups";
    if (tile[1] != mmaShape[1])
      return emitError() << "tile N " << tile[1] << " is not mma_shape N "
                         << mmaShape[1];
  }
  if (tile[2] % mmaShape[2])
    return emitError() << "tile K " << tile[2]
                       << " is not a multiple of mma_shape K " << mmaShape[2];
  // With one stage the producer could only refill the tile the consumers
  // are reading: no overlap of loads and MMAs.
  if (stages < 2)
    return emitError() << "stages must be at least 2, got " << stages;
  if (mma == MXMmaPath::Bf16Dequant && dequantStages < 1)
    return emitError() << "the bf16 MMA path needs dequant_stages >= 1, got "
                       << dequantStages;
  // (rhs_codes: the converters' ring of bf16 rhs tiles.)
  if (mma != MXMmaPath::Bf16Dequant && !rhsCodes && dequantStages != 0)
    return emitError()
           << "dequant_stages applies only to the bf16 MMA path and rhs_codes";
  if (rhsCodes && dequantStages < 1)
    return emitError() << "rhs_codes needs dequant_stages >= 1, got "
                       << dequantStages;
  // Only the kernels that stream bf16 values by TMA read them N-major.
  if (rhsNMajor && mma != MXMmaPath::Bf16Operands)
    return emitError()
           << "rhs_n_major applies only to the bf16_operands MMA path";
  if (lhsMMajor && mma != MXMmaPath::Bf16Operands)
    return emitError()
           << "lhs_m_major applies only to the bf16_operands MMA path";
  // Only the single-thread TMA producer of bf16 operands walks tiles.
  if (persistent && mma != MXMmaPath::Bf16Operands)
    return emitError()
           << "persistent applies only to the bf16_operands MMA path";
  // A persistent grid already has one CTA per SM.
  if (ctasPerSm < 1 || (ctasPerSm > 1 && (persistent ||
                                          mma != MXMmaPath::Bf16Operands)))
    return emitError() << "ctas_per_sm must be 1, or more for a bf16_operands "
                          "kernel of one CTA per tile, got "
                       << ctasPerSm;
  // A cluster pairs two CTAs of one tile each (the lhs tile of both is
  // loaded once, multicast).
  if (clusterN < 1 || clusterN > 2 ||
      (clusterN == 2 && (mma != MXMmaPath::Bf16Operands || persistent ||
                         ctasPerSm != 1)))
    return emitError() << "cluster_n must be 1, or 2 for a bf16_operands "
                          "kernel of one CTA per tile, got "
                       << clusterN;
  // A cluster pair takes adjacent N tiles of the same rows, which a band
  // order would separate.
  if (rasterM < 1 || (rasterM > 1 && (mma != MXMmaPath::Bf16Operands ||
                                      clusterN != 1)))
    return emitError() << "raster_m must be 1, or more for a bf16_operands "
                          "kernel without cluster_n, got "
                       << rasterM;
  // Only the bf16-operand kernels' epilogues stream with a cache policy.
  if (evictFirstOutputs && mma != MXMmaPath::Bf16Operands)
    return emitError()
           << "evict_first_outputs applies only to the bf16_operands MMA path";
  // The producer warpgroup dequantizes the rhs codes into the bf16 stage
  // the MMAs read K-major; a cluster pair's stages are filled by TMA alone.
  if (rhsCodes && (mma != MXMmaPath::Bf16Operands || rhsNMajor ||
                   clusterN != 1))
    return emitError() << "rhs_codes needs the bf16_operands MMA path, a "
                          "K-major rhs and no cluster";
  // The consumers decode the lhs codes of each K tile into the registers
  // of a register-A wgmma, which reads A K-major; a cluster pair's lhs
  // tile is multicast into the bf16 stage, and the rhs converters of
  // rhs_codes would take the registers the decode needs.
  if (lhsCodes && (mma != MXMmaPath::Bf16Operands || lhsMMajor ||
                   clusterN != 1 || rhsCodes))
    return emitError() << "lhs_codes needs the bf16_operands MMA path, a "
                          "K-major lhs, no cluster and no rhs_codes";
  // The producer warpgroup copies each lhs row of the tile from the token
  // row of its slot (cp.async) into the 128B-swizzled K-major bf16 stage,
  // which a cluster pair's multicast and the codes' layouts do not have;
  // rhs_codes's converters are warps of the same warpgroup.
  if (lhsGather && (mma != MXMmaPath::Bf16Operands || lhsMMajor ||
                    clusterN != 1 || lhsCodes || rhsCodes))
    return emitError() << "lhs_gather needs the bf16_operands MMA path, a "
                          "K-major lhs, no cluster, no lhs_codes and no "
                          "rhs_codes";
  // The producer warpgroup copies the operand's slot rows of each K tile
  // into the 128B-swizzled M- or N-major bf16 stage (cp.async) and rounds
  // them there, every thread of it over the tiles a persistent kernel
  // takes; the codes forms have no bf16 stage, and lhs_gather copies the
  // K-major lhs of a block GEMM.
  // (A K-major lhs is the weight of a block GEMM's transposed product,
  // swap_operands: ldmatrix without .trans gives the same fragments.)
  if (roundLhs &&
      (mma != MXMmaPath::Bf16Operands || (!lhsMMajor && !swapOperands) ||
       !persistent || pingpong || lhsCodes || lhsGather))
    return emitError() << "round_lhs needs the bf16_operands MMA path, an "
                          "M-major lhs (or swap_operands), a persistent "
                          "kernel without pingpong, no lhs_codes and no "
                          "lhs_gather";
  if (roundRhs && (mma != MXMmaPath::Bf16Operands || !rhsNMajor ||
                   !persistent || pingpong || rhsCodes || lhsGather))
    return emitError() << "round_rhs needs the bf16_operands MMA path, an "
                          "N-major rhs, a persistent kernel without "
                          "pingpong, no rhs_codes and no lhs_gather";
  // The transposed product: of an expert GEMM, both operands slot-major
  // as stored (an M-major lhs, an N-major rhs); of a block GEMM, the
  // weight as the lhs and the slot rows as a K-major rhs. The result tile
  // is staged through shared memory by rows of the op's result.
  if (swapOperands &&
      (mma != MXMmaPath::Bf16Operands || (rhsNMajor && !lhsMMajor) ||
       !persistent || !tmaStore || storeColumns != 32 || mmaShape[0] != 64))
    return emitError() << "swap_operands needs the bf16_operands MMA path, "
                          "an M-major lhs beside an N-major rhs, a "
                          "persistent kernel with tma_store of 32 columns "
                          "and 64-row MMAs";
  // The producer warpgroup copies the slot rows of a block GEMM's
  // transposed product (its rhs) from their token rows into the K-major
  // stage, as lhs_gather copies a lhs.
  if (rhsGather && (mma != MXMmaPath::Bf16Operands || !swapOperands ||
                    rhsNMajor || rhsCodes || roundRhs || lhsGather))
    return emitError() << "rhs_gather needs the bf16_operands MMA path, "
                          "swap_operands, a K-major rhs, no rhs_codes, no "
                          "round_rhs and no lhs_gather";
  // Each consumer warpgroup stages its rows of the f32 tile through shared
  // memory in chunks of store_columns columns (one swizzled row of 32, 64
  // or 128 bytes each), tma_store buffers in turn (one filled while the TMA
  // reads the others), that one of its threads stores by TMA: a whole
  // number of rounds of the buffers per tile. A ping-pong warpgroup's tile
  // spans several M steps, and a cluster pair's stages take the shared
  // memory. (Divisions, not products: no overflow on any input.)
  if (storeColumns != 8 && storeColumns != 16 && storeColumns != 32)
    return emitError() << "store_columns must be 8, 16 or 32, got "
                       << storeColumns;
  if (!tmaStore && storeColumns != 32)
    return emitError() << "store_columns needs tma_store";
  if (tmaStore &&
      (tmaStore < 2 || mmaShape[1] % storeColumns ||
       tmaStore > mmaShape[1] / storeColumns ||
       (mmaShape[1] / storeColumns) % tmaStore ||
       mma != MXMmaPath::Bf16Operands || pingpong || clusterN != 1))
    return emitError() << "tma_store must be 0, or 2 or more buffers of "
                       << storeColumns
                       << " columns that mma_shape N is a multiple of, on "
                          "the bf16_operands MMA path without pingpong or "
                          "cluster, got "
                       << tmaStore;
  // Two consumer warpgroups take turns over the tiles of a persistent CTA.
  if (pingpong && (!persistent || warpgroups[1] != 2))
    return emitError() << "pingpong needs a persistent kernel with 2 consumer "
                          "warpgroups";
  // Two consumer warpgroups of one tile take turns each K tile (the
  // bf16_operands mainloop; pingpong's turns are whole tiles).
  if (kTurns &&
      (mma != MXMmaPath::Bf16Operands || warpgroups[1] != 2 || pingpong))
    return emitError() << "k_turns needs the bf16_operands MMA path, 2 "
                          "consumer warpgroups and no pingpong";
  // The range and granularity setmaxnreg accepts.
  for (int64_t count : registers)
    if (count < 24 || count > 256 || count % 8)
      return emitError() << "register count " << count
                         << " is not a multiple of 8 in [24, 256]";
  return success();
}

//===----------------------------------------------------------------------===//
// GPULaunchAttr
//===----------------------------------------------------------------------===//

LogicalResult
GPULaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      SymbolRefAttr kernel, ArrayRef<int64_t> grid,
                      ArrayRef<int64_t> block, int64_t dynamicSharedMemory,
                      ArrayRef<TensorMapArg> tensorMaps,
                      ArrayRef<int64_t> pointers, int64_t results,
                      int64_t counters) {
  // gpu.launch_func names a kernel through the gpu.module that holds it.
  if (kernel.getNestedReferences().size() != 1)
    return emitError() << "kernel must be a symbol @module::@kernel, got "
                       << kernel;
  if (failed(
          verifyPositiveList(emitError, "grid", grid, 3, "sizes [x, y, z]")) ||
      failed(
          verifyPositiveList(emitError, "block", block, 3, "sizes [x, y, z]")))
    return failure();
  // Saturating: three positive int64 sizes can overflow their product.
  uint64_t threads = llvm::SaturatingMultiply(
      llvm::SaturatingMultiply<uint64_t>(block[0], block[1]),
      static_cast<uint64_t>(block[2]));
  if (threads > 1024)
    return emitError() << "block of " << threads
                       << " threads exceeds the 1024 of a CUDA block";
  // gpu.launch_func takes the dynamic shared memory size as an i32.
  if (dynamicSharedMemory < 0 ||
      dynamicSharedMemory > std::numeric_limits<int32_t>::max())
    return emitError() << "dynamic_shared_memory must be a non-negative i32, "
                          "got "
                       << dynamicSharedMemory;
  SmallVector<int64_t> indices;
  for (const TensorMapArg &arg : tensorMaps)
    indices.push_back(arg.index);
  llvm::append_range(indices, pointers);
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t index : indices) {
    if (index < 0)
      return emitError() << "argument index " << index << " is negative";
    // Two kernel parameters over one buffer: no kernel is built to take
    // aliasing operands.
    if (!seen.insert(index).second)
      return emitError() << "argument #" << index << " is passed twice";
  }
  if (results < 1)
    return emitError() << "results must be at least 1, got " << results;
  if (counters < 0)
    return emitError() << "counters must be non-negative, got " << counters;
  return success();
}
