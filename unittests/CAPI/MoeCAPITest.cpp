//===- MoeCAPITest.cpp - the C API (include/moe-c/MoeMLIR.h) --------------===//
//
// Drives the C API as a binding does: compile a layer, read the signature,
// run it on the reference model's inputs through C tensors, and compare
// every output bit with the C++ API's run of the same layer (and da, dWd
// with R_mx). Errors come back as NULL / non-zero with the message of the
// C++ API, and nothing is written on error.
//
//===----------------------------------------------------------------------===//

#include "moe-c/MoeMLIR.h"
#include "moe/JIT/MoeJIT.h"
#include "moe/Reference/MX.h"
#include "moe/Reference/Routing.h"

#include "../JIT/LayerBuffers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr const char *kLayer = "T=40,H=64,I=32,E=4,K=2,B=128";

/// Host buffers of one run of kLayer, described to the C API.
struct Buffers : moe::jit::testing::LayerBuffers {
  Buffers() { fill(*moe::jit::parseLayerDesc(kLayer), /*seed=*/7); }

  /// C tensors over the buffers, shapes from the executable's signature.
  void describe(const MoeExecutable *exe) {
    std::vector<void *> data = pointers();
    int32_t n = moeExecutableNumInputs(exe), m = moeExecutableNumOutputs(exe);
    shapes.assign(n + m, {});
    inputs.clear();
    outputs.clear();
    for (int32_t i = 0; i < n + m; ++i) {
      int32_t isOutput = i >= n, index = isOutput ? i - n : i;
      for (int32_t d = 0; d < moeExecutableTensorRank(exe, isOutput, index);
           ++d)
        shapes[i].push_back(moeExecutableTensorDim(exe, isOutput, index, d));
      MoeTensor t{data[i],
                  static_cast<MoeDType>(
                      moeExecutableTensorDType(exe, isOutput, index)),
                  static_cast<int32_t>(shapes[i].size()), shapes[i].data()};
      (isOutput ? outputs : inputs).push_back(t);
    }
  }

  std::vector<std::vector<int64_t>> shapes;
  std::vector<MoeTensor> inputs, outputs;
};

MoeCompileOptions fast() {
  MoeCompileOptions options;
  moeCompileOptionsInit(&options);
  options.optLevel = 0;
  return options;
}

TEST(MoeCAPI, OptionsDefaults) {
  MoeCompileOptions options;
  std::memset(&options, 0x5a, sizeof(options));
  moeCompileOptionsInit(&options);
  EXPECT_EQ(options.target, MOE_TARGET_HOST);
  EXPECT_EQ(options.fuse, 1);
  EXPECT_EQ(options.optLevel, 2);
  EXPECT_EQ(options.entry, nullptr);
  EXPECT_EQ(options.mmaPath, nullptr);
  EXPECT_EQ(options.gpuMode, nullptr);
  EXPECT_EQ(options.sourceName, nullptr);
  EXPECT_EQ(options.kernelChoices, nullptr);
}

TEST(MoeCAPI, CompileDescribeRunMatchesTheCppAPI) {
  MoeCompiler *compiler = moeCompilerCreate(nullptr);
  ASSERT_NE(compiler, nullptr);
  MoeCompileOptions options = fast();
  MoeExecutable *exe = moeCompileLayer(compiler, kLayer, &options);
  ASSERT_NE(exe, nullptr) << moeGetLastError();
  // The executable outlives its compiler.
  moeCompilerDestroy(compiler);

  EXPECT_STREQ(moeExecutableTarget(exe), "host");
  EXPECT_STREQ(moeExecutableGpuMode(exe), "");
  ASSERT_EQ(moeExecutableNumInputs(exe), 7);
  ASSERT_EQ(moeExecutableNumOutputs(exe), 4);
  EXPECT_STREQ(moeExecutableTensorName(exe, 0, 5), "token_position_to_id");
  EXPECT_EQ(moeExecutableTensorDType(exe, 0, 5), MOE_DTYPE_I32);
  EXPECT_STREQ(moeExecutableTensorName(exe, 1, 2), "dwgu");
  EXPECT_EQ(moeExecutableTensorRank(exe, 1, 2), 4);
  EXPECT_EQ(moeExecutableTensorDim(exe, 1, 2, 3), 32);

  Buffers c;
  c.describe(exe);
  double seconds = -1;
  ASSERT_EQ(moeExecutableRun(exe, c.inputs.data(), 7, c.outputs.data(), 4,
                             &seconds),
            0)
      << moeGetLastError();
  EXPECT_GE(seconds, 0.0);

  // The same layer through the C++ API: the same bits.
  moe::jit::Compiler cpp;
  moe::jit::CompileOptions cppOptions;
  cppOptions.optLevel = 0;
  auto cppExe =
      cpp.compileLayer(*moe::jit::parseLayerDesc(kLayer), cppOptions);
  ASSERT_TRUE(cppExe) << cppExe.message();
  Buffers b;
  std::vector<moe::jit::ConstTensorRef> in;
  std::vector<moe::jit::TensorRef> out;
  b.describe(exe);
  for (const MoeTensor &t : b.inputs)
    in.push_back({t.data, static_cast<moe::jit::DType>(t.dtype),
                  std::vector<int64_t>(t.shape, t.shape + t.rank)});
  for (const MoeTensor &t : b.outputs)
    out.push_back({t.data, static_cast<moe::jit::DType>(t.dtype),
                   std::vector<int64_t>(t.shape, t.shape + t.rank)});
  ASSERT_TRUE(cppExe->run(in, out));
  EXPECT_EQ(c.dx, b.dx);
  EXPECT_EQ(0, std::memcmp(c.da.data(), b.da.data(), c.da.size() * 4));
  EXPECT_EQ(0, std::memcmp(c.dwgu.data(), b.dwgu.data(), c.dwgu.size() * 4));
  EXPECT_EQ(0, std::memcmp(c.dwd.data(), b.dwd.data(), c.dwd.size() * 4));
  moe::ref::LayerGrads rmx = moe::ref::backwardMX(c.cfg, c.ref);
  EXPECT_LE(moe::ref::relativeFrobenius(
                std::vector<double>(c.da.begin(), c.da.end()), rmx.da),
            2e-3);
  EXPECT_LE(moe::ref::relativeFrobenius(
                std::vector<double>(c.dwd.begin(), c.dwd.end()), rmx.dwd),
            2e-3);
  moeExecutableDestroy(exe);
}

TEST(MoeCAPI, ErrorsComeBackWithTheirMessage) {
  MoeCompiler *compiler = moeCompilerCreate("");
  MoeCompileOptions options = fast();

  EXPECT_EQ(moeCompileLayer(compiler, "T=40,H=64,Q=1", &options), nullptr);
  EXPECT_NE(std::string(moeGetLastError()).find("Q"), std::string::npos)
      << moeGetLastError();
  EXPECT_EQ(moeCompileModule(compiler, "func.func @f(", &options), nullptr);
  EXPECT_NE(std::string(moeGetLastError()).find("<input>:1:"),
            std::string::npos)
      << moeGetLastError();
  options.target = static_cast<MoeTarget>(7);
  EXPECT_EQ(moeCompileLayer(compiler, kLayer, &options), nullptr);
  EXPECT_STREQ(moeGetLastError(), "compile: unknown target 7 "
                                  "(MOE_TARGET_HOST, MOE_TARGET_SM90A, MOE_TARGET_SM100A or "
                                  "MOE_TARGET_SM120A)");
  options = fast();
  // Kernel choices: checked before anything is compiled, on every target.
  options.kernelChoices = "weight-reuse=65";
  EXPECT_EQ(moeCompileLayer(compiler, kLayer, &options), nullptr);
  EXPECT_STREQ(moeGetLastError(), "kernel choices: invalid value '65' for "
                                  "weight-reuse (expected an integer in [0, "
                                  "64])");
  options.kernelChoices = "swap-weights";
  EXPECT_EQ(moeCompileModule(compiler, "module {}", &options), nullptr);
  EXPECT_STREQ(moeGetLastError(),
               "kernel choices: 'swap-weights' is not OPTION=value");
  // The same check without a compile.
  EXPECT_EQ(moeCheckKernelChoices("weight-reuse=2,swap-weights=true"), 0);
  EXPECT_NE(moeCheckKernelChoices("tma-store=no"), 0);
  EXPECT_STREQ(moeGetLastError(), "kernel choices: invalid value 'no' for "
                                  "tma-store (expected true or false)");
  EXPECT_NE(moeCheckKernelChoices(nullptr), 0);
  EXPECT_STREQ(moeGetLastError(), "moeCheckKernelChoices: null text");
  options = fast();

  MoeExecutable *exe = moeCompileLayer(compiler, kLayer, &options);
  ASSERT_NE(exe, nullptr) << moeGetLastError();
  EXPECT_EQ(moeExecutableTensorName(exe, 1, 4), nullptr);
  EXPECT_STREQ(moeGetLastError(), "output index 4 is outside [0, 4)");
  EXPECT_EQ(moeExecutableTensorDim(exe, 0, 0, 2), 0);
  EXPECT_STREQ(moeGetLastError(), "dimension 2 is outside [0, 2)");

  Buffers b;
  b.describe(exe);
  // Too few inputs, a wrong dtype, a routing id out of range: rejected by
  // the C++ API's checks, nothing written.
  EXPECT_EQ(moeExecutableRun(exe, b.inputs.data(), 6, b.outputs.data(), 4,
                             nullptr),
            1);
  EXPECT_NE(std::string(moeGetLastError()).find("takes 7 inputs"),
            std::string::npos)
      << moeGetLastError();
  b.inputs[2].dtype = MOE_DTYPE_BF16;
  EXPECT_EQ(moeExecutableRun(exe, b.inputs.data(), 7, b.outputs.data(), 4,
                             nullptr),
            1);
  EXPECT_NE(std::string(moeGetLastError()).find("affinities"),
            std::string::npos)
      << moeGetLastError();
  b.inputs[2].dtype = MOE_DTYPE_F32;
  b.tok[0] = 40;
  EXPECT_EQ(moeExecutableRun(exe, b.inputs.data(), 7, b.outputs.data(), 4,
                             nullptr),
            1);
  EXPECT_NE(std::string(moeGetLastError()).find("token id 40"),
            std::string::npos)
      << moeGetLastError();
  b.inputs[0].dtype = static_cast<MoeDType>(9);
  EXPECT_EQ(moeExecutableRun(exe, b.inputs.data(), 7, b.outputs.data(), 4,
                             nullptr),
            1);
  EXPECT_STREQ(moeGetLastError(),
               "run: input #0: bad dtype, rank or shape pointer");
  EXPECT_TRUE(b.untouched());
  b.inputs[0].dtype = MOE_DTYPE_BF16;
  // A host executable cannot run on device buffers.
  EXPECT_EQ(moeExecutableRunOnDevice(exe, b.inputs.data(), 7,
                                     b.outputs.data(), 4, nullptr),
            1);
  EXPECT_NE(std::string(moeGetLastError()).find("use run()"),
            std::string::npos)
      << moeGetLastError();
  EXPECT_EQ(moeExecutableRun(nullptr, nullptr, 0, nullptr, 0, nullptr), 1);
  EXPECT_STREQ(moeGetLastError(), "null MoeExecutable");
  moeExecutableDestroy(exe);
  moeCompilerDestroy(compiler);
}

/// The routing helpers: the layout of the reference model's builder (which
/// moe.route is specified by), and the argument checks before it.
TEST(MoeCAPI, RoutingHelpers) {
  // Tokens 0..3 with top-2 experts out of 3; expert 1 gets no token.
  const int32_t idx[] = {0, 2, 2, 0, 0, 2, 2, 0};
  const float scores[] = {0.5f, 0.25f, 0.75f, 0.125f,
                          1.0f, 2.0f,  3.0f,  4.0f};
  int64_t n = moeRoutingNumBlocks(4, 2, 3, 32);
  ASSERT_EQ(n, moe::ref::numBlocks(4, 2, 3, 32));
  std::vector<int32_t> tok(n * 32, 99), blk(n, 99);
  ASSERT_EQ(moeBuildRouting(idx, 4, 2, 3, 32, tok.data(), blk.data()), 0)
      << moeGetLastError();
  moe::ref::Routing want = moe::ref::buildRouting(idx, 4, 2, 3, 32);
  EXPECT_EQ(tok, want.tokenPositionToId);
  EXPECT_EQ(blk, want.blockToExpert);
  EXPECT_EQ(moe::ref::verifyRouting(want, 4, 3, 32), "");
  EXPECT_EQ(std::vector<int32_t>(tok.begin(), tok.begin() + 5),
            (std::vector<int32_t>{0, 1, 2, 3, -1}));
  std::vector<float> aff(12, 99.0f);
  ASSERT_EQ(moeMaskedAffinities(idx, scores, 4, 2, 3, aff.data()), 0);
  EXPECT_EQ(aff, (std::vector<float>{0.5f, 0, 0.25f, 0.125f, 0, 0.75f, 1.0f,
                                     0, 2.0f, 4.0f, 0, 3.0f}));

  EXPECT_EQ(moeRoutingNumBlocks(4, 2, 0, 32), -1);
  EXPECT_STREQ(moeGetLastError(), "moeRoutingNumBlocks: sizes T = 4, K = 2, "
                                  "E = 0, B = 32 out of range (T, K >= 0; "
                                  "E, B >= 1)");
  const int32_t twice[] = {0, 2, 1, 1};
  std::fill(tok.begin(), tok.end(), 99);
  EXPECT_EQ(moeBuildRouting(twice, 2, 2, 3, 32, tok.data(), blk.data()), 1);
  EXPECT_STREQ(moeGetLastError(), "buildRouting: token 1, k = 1: expert 1 "
                                  "appears twice in the token's row");
  EXPECT_EQ(tok, std::vector<int32_t>(tok.size(), 99)) << "nothing written";
  const int32_t outside[] = {0, 3};
  EXPECT_EQ(moeMaskedAffinities(outside, scores, 1, 2, 3, aff.data()), 1);
  EXPECT_STREQ(moeGetLastError(), "maskedAffinities: token 0, k = 1: expert "
                                  "3 is outside [0, 3)");
  EXPECT_EQ(moeBuildRouting(idx, 4, 2, 3, 0, tok.data(), blk.data()), 1);
  EXPECT_STREQ(moeGetLastError(), "buildRouting: B = 0 must be positive");
  EXPECT_EQ(moeBuildRouting(idx, 4, 2, 3, 32, nullptr, blk.data()), 1);
  EXPECT_STREQ(moeGetLastError(), "moeBuildRouting: null output buffer");
}

/// The MX quantizer: the reference's codes and scales along the rows, and
/// its argument errors.
TEST(MoeCAPI, QuantizeMX) {
  std::vector<float> values(3 * 64);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::ldexp(static_cast<float>(i % 17) - 8.0f,
                           static_cast<int>(i % 11) - 5);
  std::vector<uint8_t> codes(values.size()), scales(3 * 2);
  ASSERT_EQ(moeQuantizeMX(values.data(), 3, 64, "e5m2", "floor", codes.data(),
                          scales.data()),
            0)
      << moeGetLastError();
  moe::ref::MXMatrix want =
      moe::ref::quantizeMatrix(values.data(), 3, 64, /*axis=*/1,
                               moe::ref::MXElem::E5M2,
                               moe::ref::ScaleRule::Floor);
  EXPECT_EQ(codes, want.codes);
  EXPECT_EQ(scales, want.scales);
  std::vector<uint8_t> untouched(codes.size(), 7);
  codes = untouched;
  EXPECT_EQ(moeQuantizeMX(values.data(), 3, 64, "e3m4", "rceil",
                          codes.data(), scales.data()),
            1);
  EXPECT_STREQ(moeGetLastError(),
               "moeQuantizeMX: element 'e3m4' (expected e4m3 or e5m2)");
  EXPECT_EQ(moeQuantizeMX(values.data(), 3, 64, "e4m3", "ceil", codes.data(),
                          scales.data()),
            1);
  EXPECT_STREQ(moeGetLastError(), "moeQuantizeMX: rule 'ceil' (expected "
                                  "rceil, floor or floor_alt)");
  EXPECT_EQ(moeQuantizeMX(values.data(), 4, 48, "e4m3", "rceil", codes.data(),
                          scales.data()),
            1);
  EXPECT_STREQ(moeGetLastError(), "quantizeMX: [4, 48] must have "
                                  "non-negative sizes and a multiple of 32 "
                                  "columns");
  EXPECT_EQ(codes, untouched) << "nothing written on error";
}

} // namespace
