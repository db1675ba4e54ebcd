//===- KernelIndexingTest.cpp - block_scale kernels vs the layout models --===//
//
// The index arithmetic the Blackwell GEMM kernels emit (the functions the
// kernel builders evaluate on IR values) agrees with the layout models of
// BlockScaleLayouts.h, which BlockScaleLayoutsTest holds to CUTLASS and the
// PTX ISA. No GPU of either kind ran these kernels (docs/numerics.md).
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"

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
