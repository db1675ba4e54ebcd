//===- TensorMapTest.cpp - TMA descriptor arguments from memrefs ----------===//
//
// buildTensorMapArgs for every rank 1-5 and element sizes 1, 2 and 4, on
// padded layouts with offsets (what upstream's wrapper gets wrong), and every
// validation message. The expected dimensions, byte strides and boxes are
// written out by hand in tensor-map order (innermost first).
//
//===----------------------------------------------------------------------===//

#include "TensorMap.h"

#include <cuda.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <vector>

using namespace moe::cudart;

namespace {

/// The fake aligned pointer of the tests' memrefs: 256-byte aligned, never
/// dereferenced.
constexpr uintptr_t kBase = 0x10000;

/// A ranked memref descriptor laid out as the LLVM lowering does.
std::vector<int64_t> descriptor(const std::vector<int64_t> &sizes,
                                const std::vector<int64_t> &strides,
                                int64_t offset, uintptr_t base = kBase) {
  std::vector<int64_t> words = {int64_t(base), int64_t(base), offset};
  words.insert(words.end(), sizes.begin(), sizes.end());
  words.insert(words.end(), strides.begin(), strides.end());
  return words;
}

struct LayoutCase {
  const char *name;
  int64_t dataType;
  std::vector<int64_t> sizes, strides, box;
  int64_t offset;
  // Expected, tensor-map order.
  std::vector<uint64_t> globalDim, globalStrides;
  std::vector<uint32_t> boxDim;
  uintptr_t address;
};

constexpr int64_t kU8 = CU_TENSOR_MAP_DATA_TYPE_UINT8;
constexpr int64_t kBF16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
constexpr int64_t kF16 = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
constexpr int64_t kF32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;

const LayoutCase kLayouts[] = {
    {"rank1_u8", kU8, {64}, {1}, {32}, 16, {64}, {}, {32}, kBase + 16},
    {"rank1_bf16", kBF16, {100}, {1}, {8}, 8, {100}, {}, {8}, kBase + 16},
    {"rank1_f32", kF32, {33}, {1}, {4}, 4, {33}, {}, {4}, kBase + 16},
    {"rank2_u8",
     kU8,
     {7, 50},
     {64, 1},
     {4, 16},
     0,
     {50, 7},
     {64},
     {16, 4},
     kBase},
    {"rank2_f16",
     kF16,
     {7, 50},
     {56, 1},
     {2, 8},
     0,
     {50, 7},
     {112},
     {8, 2},
     kBase},
    {"rank2_f32",
     kF32,
     {3, 10},
     {12, 1},
     {3, 4},
     0,
     {10, 3},
     {48},
     {4, 3},
     kBase},
    {"rank3_u8",
     kU8,
     {2, 3, 20},
     {96, 32, 1},
     {1, 2, 16},
     0,
     {20, 3, 2},
     {32, 96},
     {16, 2, 1},
     kBase},
    {"rank3_bf16",
     kBF16,
     {4, 6, 40},
     {320, 48, 1},
     {2, 3, 8},
     8,
     {40, 6, 4},
     {96, 640},
     {8, 3, 2},
     kBase + 16},
    {"rank3_f32",
     kF32,
     {2, 5, 6},
     {64, 8, 1},
     {1, 5, 4},
     0,
     {6, 5, 2},
     {32, 256},
     {4, 5, 1},
     kBase},
    {"rank4_u8",
     kU8,
     {2, 2, 3, 17},
     {192, 96, 32, 1},
     {1, 2, 2, 16},
     0,
     {17, 3, 2, 2},
     {32, 96, 192},
     {16, 2, 2, 1},
     kBase},
    {"rank4_bf16",
     kBF16,
     {3, 2, 4, 24},
     {512, 256, 32, 1},
     {1, 1, 4, 24},
     0,
     {24, 4, 2, 3},
     {64, 512, 1024},
     {24, 4, 1, 1},
     kBase},
    {"rank4_f32",
     kF32,
     {2, 3, 4, 5},
     {128, 40, 8, 1},
     {2, 3, 4, 4},
     0,
     {5, 4, 3, 2},
     {32, 160, 512},
     {4, 4, 3, 2},
     kBase},
    {"rank5_u8",
     kU8,
     {2, 3, 2, 4, 64},
     {2048, 672, 336, 80, 1},
     {1, 2, 2, 2, 32},
     32,
     {64, 4, 2, 3, 2},
     {80, 336, 672, 2048},
     {32, 2, 2, 2, 1},
     kBase + 32},
    {"rank5_bf16",
     kBF16,
     {2, 2, 2, 2, 8},
     {256, 128, 64, 16, 1},
     {2, 2, 2, 2, 8},
     0,
     {8, 2, 2, 2, 2},
     {32, 128, 256, 512},
     {8, 2, 2, 2, 2},
     kBase},
    {"rank5_f32",
     kF32,
     {1, 2, 3, 2, 4},
     {512, 192, 64, 16, 1},
     {1, 1, 1, 2, 4},
     0,
     {4, 2, 3, 2, 1},
     {64, 256, 768, 2048},
     {4, 2, 1, 1, 1},
     kBase},
};

/// Names the case in failure messages instead of dumping its bytes.
void PrintTo(const LayoutCase &c, std::ostream *os) { *os << c.name; }

class TensorMapLayoutTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(TensorMapLayoutTest, ReversesDimensionsAndScalesStrides) {
  const LayoutCase &c = GetParam();
  const int64_t rank = int64_t(c.sizes.size());
  std::vector<int64_t> words = descriptor(c.sizes, c.strides, c.offset);
  TensorMapArgs args;
  ASSERT_EQ(buildTensorMapArgs(
                viewRankedDescriptor(words.data(), rank), c.dataType,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, c.box.data(), args),
            "");
  EXPECT_EQ(args.rank, uint32_t(rank));
  EXPECT_EQ(args.dataType, uint32_t(c.dataType));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(args.globalAddress), c.address);
  for (int64_t i = 0; i < kMaxTensorMapRank; ++i) {
    SCOPED_TRACE("tensor-map dimension " + std::to_string(i));
    EXPECT_EQ(args.globalDim[i], i < rank ? c.globalDim[i] : 0u);
    EXPECT_EQ(args.boxDim[i], i < rank ? c.boxDim[i] : 0u);
    EXPECT_EQ(args.elementStrides[i], i < rank ? 1u : 0u);
    if (i < kMaxTensorMapRank - 1) {
      EXPECT_EQ(args.globalStrides[i], i < rank - 1 ? c.globalStrides[i] : 0u);
    }
  }
  EXPECT_EQ(args.interleave, 0u);
  EXPECT_EQ(args.swizzle, 0u);
  EXPECT_EQ(args.l2Promotion, 2u);
  EXPECT_EQ(args.oobFill, 0u);
}

INSTANTIATE_TEST_SUITE_P(TensorMapArgs, TensorMapLayoutTest,
                         ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<LayoutCase> &info) {
                           return std::string(info.param.name);
                         });

TEST(TensorMapArgs, ReadsTheDescriptorLayoutOfTheLowering) {
  struct {
    void *allocated;
    void *aligned;
    int64_t offset;
    int64_t sizes[3];
    int64_t strides[3];
  } memref = {
      nullptr, reinterpret_cast<void *>(kBase), 5, {2, 3, 4}, {12, 4, 1}};
  MemRefView view = viewRankedDescriptor(&memref, 3);
  EXPECT_EQ(view.rank, 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(view.aligned), kBase);
  EXPECT_EQ(view.offset, 5);
  EXPECT_EQ(view.sizes, memref.sizes);
  EXPECT_EQ(view.strides, memref.strides);
}

TEST(TensorMapArgs, ElementSizes) {
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_UINT8), 1);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_UINT16), 2);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT16), 2);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16), 2);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_INT32), 4);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ), 4);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT64), 8);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_INT64), 8);
  EXPECT_EQ(tensorMapElementBytes(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B), 0);
  EXPECT_EQ(tensorMapElementBytes(-1), 0);
}

TEST(TensorMapArgs, KeyDistinguishesEveryArgument) {
  std::vector<int64_t> words = descriptor({64, 64}, {64, 1}, 0);
  const int64_t box[2] = {64, 64};
  const int64_t otherBox[2] = {32, 64};
  TensorMapArgs a, b, c, d;
  MemRefView view = viewRankedDescriptor(words.data(), 2);
  ASSERT_EQ(buildTensorMapArgs(view, kF16, 0, 3, 0, 0, box, a), "");
  ASSERT_EQ(buildTensorMapArgs(view, kF16, 0, 3, 0, 0, box, b), "");
  ASSERT_EQ(buildTensorMapArgs(view, kF16, 0, 3, 0, 0, otherBox, c), "");
  ASSERT_EQ(buildTensorMapArgs(view, kF16, 0, 3, 1, 0, otherBox, d), "");
  EXPECT_EQ(tensorMapKey(a), tensorMapKey(b));
  EXPECT_NE(tensorMapKey(a), tensorMapKey(c));
  EXPECT_NE(tensorMapKey(c), tensorMapKey(d));
}

/// The message for a 2-D memref (sizes, strides, offset) tiled by `box`,
/// with the given enum arguments; empty when valid.
std::string problem(std::vector<int64_t> sizes, std::vector<int64_t> strides,
                    std::vector<int64_t> box, int64_t offset = 0,
                    int64_t dataType = kF16, int64_t interleave = 0,
                    int64_t swizzle = 0, int64_t l2 = 0, int64_t oob = 0,
                    uintptr_t base = kBase) {
  std::vector<int64_t> words = descriptor(sizes, strides, offset, base);
  TensorMapArgs args;
  return buildTensorMapArgs(
      viewRankedDescriptor(words.data(), int64_t(sizes.size())), dataType,
      interleave, swizzle, l2, oob, box.data(), args);
}

TEST(TensorMapArgs, RejectsRanksOutsideOneToFive) {
  std::vector<int64_t> words = descriptor({}, {}, 0);
  const int64_t box[1] = {1};
  TensorMapArgs args;
  EXPECT_EQ(buildTensorMapArgs(viewRankedDescriptor(words.data(), 0), kF16, 0,
                               0, 0, 0, box, args),
            "rank 0 is outside 1..5");
  EXPECT_EQ(problem({1, 1, 1, 1, 1, 8}, {8, 8, 8, 8, 8, 1}, {1, 1, 1, 1, 1, 8}),
            "rank 6 is outside 1..5");
}

TEST(TensorMapArgs, RejectsEnumValuesOutOfRange) {
  EXPECT_EQ(
      problem({8, 8}, {8, 1}, {8, 8}, 0, 13),
      "data type 13 is not a CUtensorMapDataType of 1 to 8 bytes (0..12)");
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, 3),
            "interleave 3 is outside 0..2");
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, 0, 7),
            "swizzle 7 is outside 0..6");
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, 0, 0, 4),
            "L2 promotion 4 is outside 0..3");
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, 0, 0, 0, 2),
            "out-of-bounds fill 2 is outside 0..1");
}

TEST(TensorMapArgs, RejectsInvalidModeCombinations) {
  EXPECT_EQ(
      problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, CU_TENSOR_MAP_INTERLEAVE_16B),
      "an interleaved layout needs rank 3 or more, not 2");
  EXPECT_EQ(problem({2, 8, 16}, {128, 16, 1}, {1, 8, 16}, 0, kF16,
                    CU_TENSOR_MAP_INTERLEAVE_32B, CU_TENSOR_MAP_SWIZZLE_128B),
            "the 32-byte interleave needs the 32-byte swizzle");
  EXPECT_EQ(problem({8, 16}, {16, 1}, {8, 16}, 0, kU8, 0, 0, 0,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
            "NaN out-of-bounds fill needs a floating-point data type, not 0");
  EXPECT_EQ(problem({8, 16}, {16, 1}, {8, 16}, 0, kBF16, 0, 0, 0,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
            "");
}

TEST(TensorMapArgs, RejectsMissingPointers) {
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, 0, 0, 0, 0, 0),
            "the memref has a null data pointer");
  std::vector<int64_t> words = descriptor({8, 8}, {8, 1}, 0);
  TensorMapArgs args;
  EXPECT_EQ(buildTensorMapArgs(viewRankedDescriptor(words.data(), 2), kF16, 0,
                               0, 0, 0, nullptr, args),
            "the box dimensions are missing");
}

TEST(TensorMapArgs, RejectsSizesOutsideTheTmaRange) {
  EXPECT_EQ(problem({8, 0}, {8, 1}, {8, 8}),
            "memref dimension 1 has size 0; TMA needs 1..2^32");
  EXPECT_EQ(problem({(int64_t(1) << 32) + 1, 8}, {8, 1}, {8, 8}),
            "memref dimension 0 has size 4294967297; TMA needs 1..2^32");
  EXPECT_EQ(problem({int64_t(1) << 32, 8}, {8, 1}, {8, 8}), "");
}

TEST(TensorMapArgs, RejectsStridesTmaCannotExpress) {
  EXPECT_EQ(problem({8, 8}, {8, 2}, {8, 8}),
            "memref dimension 1 (the innermost) has stride 2; TMA needs it "
            "contiguous (stride 1)");
  EXPECT_EQ(
      problem({8, 16}, {56, 1}, {8, 16}, 0, kU8),
      "memref dimension 0 has a stride of 56 bytes, not a multiple of 16");
  EXPECT_EQ(problem({8, 8}, {0, 1}, {8, 8}),
            "memref dimension 0 has stride 0; TMA needs 1 ..< 2^40 bytes");
  EXPECT_EQ(problem({8, 8}, {int64_t(1) << 39, 1}, {8, 8}),
            "memref dimension 0 has stride 549755813888; TMA needs 1 ..< 2^40 "
            "bytes");
  EXPECT_EQ(
      problem({2, 8, 16}, {384, 24, 1}, {1, 8, 16}, 0, kF16,
              CU_TENSOR_MAP_INTERLEAVE_32B, CU_TENSOR_MAP_SWIZZLE_32B),
      "memref dimension 1 has a stride of 48 bytes, not a multiple of 32");
}

TEST(TensorMapArgs, RejectsMisalignedAddresses) {
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 3),
            "the global address 0x10006 (aligned pointer + offset 3 elements) "
            "is not 16-byte aligned");
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, -8),
            "the memref offset -8 is negative");
  EXPECT_EQ(problem({8, 8}, {8, 1}, {8, 8}, 0, kF16, 0, 0, 0, 0, kBase + 8),
            "the global address 0x10008 (aligned pointer + offset 0 elements) "
            "is not 16-byte aligned");
}

TEST(TensorMapArgs, RejectsBoxesOutsideTheTmaRange) {
  EXPECT_EQ(problem({512, 512}, {512, 1}, {257, 8}),
            "box dimension 0 is 257; TMA needs 1..256");
  EXPECT_EQ(problem({512, 512}, {512, 1}, {8, 0}),
            "box dimension 1 is 0; TMA needs 1..256");
  EXPECT_EQ(problem({512, 512}, {512, 1}, {256, 256}), "");
  EXPECT_EQ(problem({64, 64}, {64, 1}, {8, 12}),
            "the innermost box dimension spans 24 bytes, not a multiple of 16");
}

TEST(TensorMapArgs, KeepsTheInnerBoxWithinTheSwizzleSpan) {
  EXPECT_EQ(problem({64, 64}, {64, 1}, {8, 64}, 0, kF16, 0,
                    CU_TENSOR_MAP_SWIZZLE_64B),
            "the innermost box dimension spans 128 bytes, more than the "
            "64-byte swizzle span");
  EXPECT_EQ(problem({64, 64}, {64, 1}, {8, 64}, 0, kF16, 0,
                    CU_TENSOR_MAP_SWIZZLE_128B),
            "");
  EXPECT_EQ(problem({64, 64}, {64, 1}, {8, 32}, 0, kF32, 0,
                    CU_TENSOR_MAP_SWIZZLE_32B),
            "the innermost box dimension spans 128 bytes, more than the "
            "32-byte swizzle span");
}

} // namespace
