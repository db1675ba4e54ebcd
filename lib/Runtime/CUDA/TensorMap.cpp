//===- TensorMap.cpp - cuTensorMapEncodeTiled arguments from a memref -----===//
//
// Computes and checks the arguments of cuTensorMapEncodeTiled for any rank
// 1-5 and any element size. The checks restate the requirements of the
// driver documentation so that a bad descriptor fails with the memref
// dimension named, not with CUDA_ERROR_INVALID_VALUE.
//
//===----------------------------------------------------------------------===//

#include "TensorMap.h"

#include <cuda.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace moe::cudart {

namespace {

/// printf into a std::string (messages only, never on a hot path).
template <typename... Args> std::string format(const char *fmt, Args... args) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), fmt, args...);
  return buffer;
}

/// Width in bytes of the shared-memory span a swizzle mode permutes within.
int64_t swizzleSpanBytes(int64_t swizzle) {
  switch (swizzle) {
  case CU_TENSOR_MAP_SWIZZLE_32B:
    return 32;
  case CU_TENSOR_MAP_SWIZZLE_64B:
    return 64;
  default:
    return 128;
  }
}

bool isFloatDataType(int64_t dataType) {
  switch (dataType) {
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
  case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
  case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
  case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
    return true;
  default:
    return false;
  }
}

constexpr uint64_t kMaxGlobalDim = uint64_t(1) << 32;
constexpr uint64_t kGlobalStrideLimit = uint64_t(1) << 40;
constexpr int64_t kMaxBoxDim = 256;

} // namespace

MemRefView viewRankedDescriptor(const void *descriptor, int64_t rank) {
  // The lowering stores the struct with natural alignment: two pointers, then
  // 64-bit integers only, so the layout has no padding.
  struct Header {
    char *allocated;
    char *aligned;
    int64_t offset;
  };
  MemRefView view;
  view.rank = rank;
  if (!descriptor)
    return view;
  Header header;
  std::memcpy(&header, descriptor, sizeof(header));
  view.aligned = header.aligned;
  view.offset = header.offset;
  const auto *tail = reinterpret_cast<const int64_t *>(
      static_cast<const char *>(descriptor) + sizeof(Header));
  view.sizes = tail;
  view.strides = tail + rank;
  return view;
}

int64_t tensorMapElementBytes(int64_t dataType) {
  switch (dataType) {
  case CU_TENSOR_MAP_DATA_TYPE_UINT8:
    return 1;
  case CU_TENSOR_MAP_DATA_TYPE_UINT16:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
  case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    return 2;
  case CU_TENSOR_MAP_DATA_TYPE_UINT32:
  case CU_TENSOR_MAP_DATA_TYPE_INT32:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
  case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
  case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
    return 4;
  case CU_TENSOR_MAP_DATA_TYPE_UINT64:
  case CU_TENSOR_MAP_DATA_TYPE_INT64:
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    return 8;
  default:
    return 0;
  }
}

std::string buildTensorMapArgs(const MemRefView &memref, int64_t dataType,
                               int64_t interleave, int64_t swizzle,
                               int64_t l2Promotion, int64_t oobFill,
                               const int64_t *boxDims, TensorMapArgs &args) {
  args = TensorMapArgs();
  const int64_t rank = memref.rank;
  if (rank < 1 || rank > kMaxTensorMapRank)
    return format("rank %" PRId64 " is outside 1..5", rank);
  const int64_t elementBytes = tensorMapElementBytes(dataType);
  if (elementBytes == 0)
    return format("data type %" PRId64
                  " is not a CUtensorMapDataType of 1 to 8 bytes (0..12)",
                  dataType);
  if (interleave < CU_TENSOR_MAP_INTERLEAVE_NONE ||
      interleave > CU_TENSOR_MAP_INTERLEAVE_32B)
    return format("interleave %" PRId64 " is outside 0..2", interleave);
  if (swizzle < CU_TENSOR_MAP_SWIZZLE_NONE ||
      swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)
    return format("swizzle %" PRId64 " is outside 0..6", swizzle);
  if (l2Promotion < CU_TENSOR_MAP_L2_PROMOTION_NONE ||
      l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
    return format("L2 promotion %" PRId64 " is outside 0..3", l2Promotion);
  if (oobFill < CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE ||
      oobFill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    return format("out-of-bounds fill %" PRId64 " is outside 0..1", oobFill);
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3)
    return format("an interleaved layout needs rank 3 or more, not %" PRId64,
                  rank);
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B &&
      swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
    return "the 32-byte interleave needs the 32-byte swizzle";
  if (oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
      !isFloatDataType(dataType))
    return format("NaN out-of-bounds fill needs a floating-point data type, "
                  "not %" PRId64,
                  dataType);
  if (!memref.aligned || !memref.sizes)
    return "the memref has a null data pointer";
  if (!boxDims)
    return "the box dimensions are missing";

  const int64_t innermost = rank - 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = memref.sizes[d];
    if (size < 1 || uint64_t(size) > kMaxGlobalDim)
      return format("memref dimension %" PRId64 " has size %" PRId64
                    "; TMA needs 1..2^32",
                    d, size);
  }
  if (memref.strides[innermost] != 1)
    return format("memref dimension %" PRId64
                  " (the innermost) has stride %" PRId64
                  "; TMA needs it contiguous (stride 1)",
                  innermost, memref.strides[innermost]);
  const uint64_t strideAlign =
      interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  for (int64_t d = 0; d < innermost; ++d) {
    const int64_t stride = memref.strides[d];
    if (stride < 1 || uint64_t(stride) >= kGlobalStrideLimit / elementBytes)
      return format("memref dimension %" PRId64 " has stride %" PRId64
                    "; TMA needs 1 ..< 2^40 bytes",
                    d, stride);
    const uint64_t bytes = uint64_t(stride) * elementBytes;
    if (bytes % strideAlign != 0)
      return format("memref dimension %" PRId64 " has a stride of %" PRIu64
                    " bytes, not a multiple of %" PRIu64,
                    d, bytes, strideAlign);
  }
  if (memref.offset < 0)
    return format("the memref offset %" PRId64 " is negative", memref.offset);
  char *address = memref.aligned + memref.offset * elementBytes;
  const uint64_t addressAlign =
      interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (reinterpret_cast<uintptr_t>(address) % addressAlign != 0)
    return format("the global address %p (aligned pointer + offset %" PRId64
                  " elements) is not %" PRIu64 "-byte aligned",
                  static_cast<void *>(address), memref.offset, addressAlign);
  for (int64_t d = 0; d < rank; ++d) {
    if (boxDims[d] < 1 || boxDims[d] > kMaxBoxDim)
      return format("box dimension %" PRId64 " is %" PRId64
                    "; TMA needs 1..256",
                    d, boxDims[d]);
  }
  const int64_t innerBoxBytes = boxDims[innermost] * elementBytes;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE) {
    if (innerBoxBytes % 16 != 0)
      return format("the innermost box dimension spans %" PRId64
                    " bytes, not a multiple of 16",
                    innerBoxBytes);
    if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE &&
        innerBoxBytes > swizzleSpanBytes(swizzle))
      return format("the innermost box dimension spans %" PRId64
                    " bytes, more than the %" PRId64 "-byte swizzle span",
                    innerBoxBytes, swizzleSpanBytes(swizzle));
  }

  args.dataType = uint32_t(dataType);
  args.rank = uint32_t(rank);
  args.globalAddress = address;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = innermost - i;
    args.globalDim[i] = uint64_t(memref.sizes[d]);
    args.boxDim[i] = uint32_t(boxDims[d]);
    args.elementStrides[i] = 1;
    if (i > 0)
      args.globalStrides[i - 1] = uint64_t(memref.strides[d]) * elementBytes;
  }
  args.interleave = uint32_t(interleave);
  args.swizzle = uint32_t(swizzle);
  args.l2Promotion = uint32_t(l2Promotion);
  args.oobFill = uint32_t(oobFill);
  return {};
}

TensorMapKey tensorMapKey(const TensorMapArgs &args) {
  TensorMapKey key = {};
  size_t next = 0;
  key[next++] = args.dataType;
  key[next++] = args.rank;
  key[next++] = reinterpret_cast<uintptr_t>(args.globalAddress);
  for (uint64_t dim : args.globalDim)
    key[next++] = dim;
  for (uint64_t stride : args.globalStrides)
    key[next++] = stride;
  for (uint32_t box : args.boxDim)
    key[next++] = box;
  for (uint32_t stride : args.elementStrides)
    key[next++] = stride;
  key[next++] = args.interleave;
  key[next++] = args.swizzle;
  key[next++] = args.l2Promotion;
  key[next++] = args.oobFill;
  return key;
}

} // namespace moe::cudart
