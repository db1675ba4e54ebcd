//===- KernelChoicesTest.cpp - the kernel choices' defaults agree ---------===//
//
// A kernel choice's default is written twice: in KernelChoices.def (the
// pipelines, the JIT, moe-run, KernelChoices) and as its option's default
// in Passes.td (moe-opt's passes). A choice whose two defaults differ would
// make `moe-opt --moe-gpu-kernel-config` pick other kernels than the
// pipelines do; this pins them together for every entry and every pass
// that takes it.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/KernelChoices.h"
#include "moe/Conversion/Passes.h"

#include <gtest/gtest.h>

using namespace mlir::moe;

namespace {

TEST(KernelChoicesTest, PassOptionDefaultsAreTheTables) {
  KernelChoices table;
  MoeGPUKernelConfigOptions config;
  ConvertMoeToNVGPUOptions convert;
  int checked = 0;
#define MOE_CHECK_Config(FIELD)                                                \
  EXPECT_EQ(config.FIELD, table.FIELD) << "moe-gpu-kernel-config " #FIELD;     \
  ++checked;
#define MOE_CHECK_Convert(FIELD)                                               \
  EXPECT_EQ(convert.FIELD, table.FIELD) << "convert-moe-to-nvgpu " #FIELD;     \
  ++checked;
#define MOE_CHECK_ConfigAndConvert(FIELD)                                      \
  MOE_CHECK_Config(FIELD) MOE_CHECK_Convert(FIELD)
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  MOE_CHECK_##PASSES(FIELD)
#include "moe/Pipelines/KernelChoices.def"
#undef MOE_CHECK_Config
#undef MOE_CHECK_Convert
#undef MOE_CHECK_ConfigAndConvert
  // Not vacuous: every entry names a pass.
  EXPECT_GE(checked, 16);
}

} // namespace
