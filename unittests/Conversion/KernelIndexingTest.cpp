//===- KernelIndexingTest.cpp - GEMM kernel indexing vs its models --------===//
//
// The index arithmetic the GEMM kernels emit (the functions the kernel
// builders evaluate on IR values) agrees with its models: the Blackwell
// kernels' with the layouts of BlockScaleLayouts.h, which
// BlockScaleLayoutsTest holds to CUTLASS and the PTX ISA (no GPU of either
// kind ran these kernels, docs/numerics.md); the tile orders; and the
// sm_90a lhs code layout and round_lhs's ldmatrix rows with the wgmma A
// fragment.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/LhsCodeLayout.h"
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"

#include <array>

#include <gtest/gtest.h>

using namespace mlir::moe;

TEST(KernelIndexing, Tcgen05ScaleWordsLandWhereTheMmaReadsThem) {
  EXPECT_TRUE(tcgen05IndexingAgrees());
}

TEST(KernelIndexing, MmaSyncFragmentsAndScaleLanesMatchTheInstruction) {
  EXPECT_TRUE(mmaSyncIndexingAgrees());
}

TEST(KernelIndexing, RasterOrdersVisitEveryTileOnceInBands) {
  EXPECT_TRUE(rasterIndexingAgrees());
}

TEST(KernelIndexing, RoundLhsLdmatrixRowsFormTheWgmmaAFragments) {
  EXPECT_TRUE(roundLhsIndexingAgrees());
}

TEST(KernelIndexing, TransposedStoresLandWhereTheBoxesReadTheResult) {
  EXPECT_TRUE(transposedStoreIndexingAgrees());
}

TEST(KernelIndexing, PairTilesFindTheirExpertAndBlocks) {
  EXPECT_TRUE(pairTileIndexingAgrees());
}

namespace {
/// Plain integers for the index templates (MXGemmEmitter.h's IntOps is
/// private to the kernel library).
struct Ints {
  int64_t div(int64_t x, int64_t y) { return x / y; }
  int64_t rem(int64_t x, int64_t y) { return x % y; }
  int64_t mul(int64_t x, int64_t y) { return x * y; }
  int64_t add(int64_t x, int64_t y) { return x + y; }
};
} // namespace

// lhs_codes: the operand kernel writes column c of a K tile at byte
// lhsCodeByte(c), and a consumer lane (4 g + q) reads 16 bytes at
// lhsCodeByte(2 q) and decodes byte 4 j + t of them as column
// 16 j + 2 q + {0, 1, 8, 9}[t] of k16 step j: the columns of its wgmma A
// fragment (bf16 m64nNk16, per warp mma.m16n8k16's A: registers a0 / a2
// hold columns 2 q, 2 q + 1 / 2 q + 8, 2 q + 9 of its row; PTX ISA, "Matrix
// fragments for wgmma.mma_async ... .bf16").
TEST(KernelIndexing, LhsCodesSitInWgmmaFragmentOrder) {
  Ints ints;
  std::array<int, kLhsCodeTileK> seen = {};
  for (int64_t c = 0; c < kLhsCodeTileK; ++c) {
    int64_t byte = lhsCodeByte(ints, c);
    ASSERT_GE(byte, 0);
    ASSERT_LT(byte, kLhsCodeTileK);
    ++seen[byte];
  }
  for (int count : seen)
    EXPECT_EQ(count, 1) << "lhsCodeByte is not a permutation of a K tile";
  const int64_t fragmentColumn[4] = {0, 1, 8, 9};
  for (int64_t q = 0; q < 4; ++q) {
    int64_t first = lhsCodeByte(ints, 2 * q);
    EXPECT_EQ(first % 16, 0) << "a lane's 16 bytes are not one aligned load";
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t t = 0; t < 4; ++t)
        EXPECT_EQ(lhsCodeByte(ints, 16 * j + 2 * q + fragmentColumn[t]),
                  first + 4 * j + t)
            << "q " << q << ", k16 step " << j << ", byte " << t;
  }
}
