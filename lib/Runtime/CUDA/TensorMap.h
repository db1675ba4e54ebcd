//===- TensorMap.h - TMA descriptor arguments from a memref -----*- C++ -*-===//
//
// The pure part of mgpuTensorMapEncodeTiledMemref: reading the ranked memref
// descriptor that the LLVM lowering passes, turning it into the arguments of
// cuTensorMapEncodeTiled, and checking the TMA constraints with messages that
// name the memref dimension at fault. No driver calls, so the unit tests cover
// every rank and element size on a CPU.
//
// Dimension order: the memref lists dimensions outermost first, the tensor
// map innermost first, so memref dimension d is tensor-map dimension
// rank - 1 - d. The tensor map has no stride for its dimension 0, which must
// be contiguous (memref stride 1 in its last dimension); the other strides are
// the memref's element strides times the element size. The global address is
// the aligned pointer plus the memref's offset.
//
// Caution for the compiler: MLIR 22's nvgpu lowering maps only ui8, ui16, ui32,
// ui64, i32, i64, f16, f32, f64 and bf16 to a CUtensorMapDataType; any other
// element type (i8, i16, f8E4M3FN, f8E5M2, ...) reaches this runtime as 9
// (BFLOAT16), which would make every byte count twice too large. Describe FP8
// and byte tensors as ui8 (and 16-bit integers as ui16) memrefs.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_RUNTIME_CUDA_TENSORMAP_H
#define MOE_LIB_RUNTIME_CUDA_TENSORMAP_H

#include <array>
#include <cstdint>
#include <string>

namespace moe::cudart {

/// TMA handles at most five dimensions.
constexpr int64_t kMaxTensorMapRank = 5;

/// A ranked memref descriptor as the LLVM lowering lays it out in memory:
/// {allocated pointer, aligned pointer, offset, sizes[rank], strides[rank]}.
struct MemRefView {
  int64_t rank = 0;
  char *aligned = nullptr;
  int64_t offset = 0;
  const int64_t *sizes = nullptr;
  const int64_t *strides = nullptr;
};

/// Reads the descriptor at `descriptor` as a memref of `rank` dimensions.
MemRefView viewRankedDescriptor(const void *descriptor, int64_t rank);

/// The arguments of cuTensorMapEncodeTiled, in its (innermost-first) order.
/// Entries past `rank` are zero.
struct TensorMapArgs {
  uint32_t dataType = 0;
  uint32_t rank = 0;
  void *globalAddress = nullptr;
  uint64_t globalDim[kMaxTensorMapRank] = {};
  /// Byte strides of tensor-map dimensions 1 .. rank - 1.
  uint64_t globalStrides[kMaxTensorMapRank - 1] = {};
  uint32_t boxDim[kMaxTensorMapRank] = {};
  uint32_t elementStrides[kMaxTensorMapRank] = {};
  uint32_t interleave = 0;
  uint32_t swizzle = 0;
  uint32_t l2Promotion = 0;
  uint32_t oobFill = 0;
};

/// Bytes per element of a CUtensorMapDataType value; 0 for values this runtime
/// does not handle (out of range, or the packed sub-byte types).
int64_t tensorMapElementBytes(int64_t dataType);

/// Fills `args` for the memref `memref` tiled by `boxDims` (memref order).
/// The enum arguments are CUtensorMap* values. Returns an empty string when
/// the arguments satisfy the TMA constraints, else what is wrong.
std::string buildTensorMapArgs(const MemRefView &memref, int64_t dataType,
                               int64_t interleave, int64_t swizzle,
                               int64_t l2Promotion, int64_t oobFill,
                               const int64_t *boxDims, TensorMapArgs &args);

/// Every field of `args` as one array, the identity of a cached descriptor.
using TensorMapKey = std::array<uint64_t, 26>;
TensorMapKey tensorMapKey(const TensorMapArgs &args);

} // namespace moe::cudart

#endif // MOE_LIB_RUNTIME_CUDA_TENSORMAP_H
