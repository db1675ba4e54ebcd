//===- MoeJITTest.cpp - tests of the C++ host JIT API ---------------------===//
//
// The API of include/moe/JIT/MoeJIT.h as a user sees it: layer descriptions
// (syntax, round trip, errors), compile errors as located messages, a run
// on an elementwise function, the in-memory and disk caches, and argument
// validation: every bad argument gives its error and leaves the output
// buffers untouched. The layer tests run a small moe.blockwise_bwd on
// seeded inputs and compare with R_mx.
//
//===----------------------------------------------------------------------===//

#include "moe/JIT/MoeJIT.h"

#include "LayerBuffers.h"
#include "moe/Reference/BF16.h"
#include "moe/Reference/Model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

using namespace moe::jit;

namespace {

//===----------------------------------------------------------------------===//
// Layer descriptions
//===----------------------------------------------------------------------===//

TEST(LayerDescTest, DefaultsAndKeys) {
  Expected<LayerDesc> layer = parseLayerDesc("T=40,H=64");
  ASSERT_TRUE(layer) << layer.message();
  EXPECT_EQ(layer->T, 40);
  EXPECT_EQ(layer->H, 64);
  EXPECT_EQ(layer->I, 128);
  EXPECT_EQ(layer->E, 4);
  EXPECT_EQ(layer->quant, Quant::E4M3);

  layer = parseLayerDesc(
      "T=8,H=32,I=32,B=256,act=geglu,affinity=on_h,quant=e5m2,rule=floor_alt,"
      "clamp_gate=:7,clamp_up=-7:7.5,bias=f32,checkpoint=on,dense=on,dx=f32,"
      "dx_accumulate=bf16,weight_grads=bf16,weights=mx");
  ASSERT_TRUE(layer) << layer.message();
  EXPECT_EQ(layer->E, 1);
  EXPECT_EQ(layer->K, 1);
  EXPECT_EQ(layer->B, 256);
  EXPECT_EQ(layer->act, Activation::GeGLU);
  EXPECT_EQ(layer->affinity, AffinityPlacement::OnH);
  EXPECT_EQ(layer->rule, ScaleRule::FloorAlt);
  EXPECT_FALSE(layer->gateLo.has_value());
  EXPECT_EQ(layer->gateHi, 7.0);
  EXPECT_EQ(layer->upLo, -7.0);
  EXPECT_EQ(layer->upHi, 7.5);
  EXPECT_TRUE(layer->bias);
  EXPECT_EQ(layer->biasDType, DType::F32);
  EXPECT_TRUE(layer->checkpoint);
  EXPECT_EQ(layer->checkpointDType, DType::BF16);
  EXPECT_TRUE(layer->dxF32);
  EXPECT_EQ(layer->dxAccumulate, DxAccumulate::BF16);
  EXPECT_TRUE(layer->weightGradBF16);
  EXPECT_TRUE(layer->prequantizedWeights);

  // toString writes every key; parsing it back gives the same layer.
  std::string text = toString(*layer);
  Expected<LayerDesc> again = parseLayerDesc(text);
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(toString(*again), text);
  EXPECT_EQ(again->upHi, 7.5);
}

TEST(LayerDescTest, Errors) {
  auto error = [](const char *spec) {
    Expected<LayerDesc> layer = parseLayerDesc(spec);
    EXPECT_FALSE(layer) << spec;
    return layer.message();
  };
  EXPECT_NE(error("T=4,X=1").find("unknown key 'X'"), std::string::npos);
  EXPECT_NE(error("T=0").find("T=0 is not an integer in [1, 1048576]"),
            std::string::npos);
  EXPECT_NE(error("T=1x").find("T=1x"), std::string::npos);
  EXPECT_NE(error("quant=fp4")
                .find("invalid value 'fp4' for quant "
                      "(expected e4m3|e5m2|none)"),
            std::string::npos);
  EXPECT_NE(error("T=4,T=5").find("key T given twice"), std::string::npos);
  EXPECT_NE(error("E=2,dense=on").find("dense=on needs E=1 and K=1"),
            std::string::npos);
  EXPECT_NE(error("clamp_up=3:1").find("needs LO < HI"), std::string::npos);
  EXPECT_NE(error("T=4,").find("expected key=value"), std::string::npos);
  EXPECT_NE(error("").find("empty description"), std::string::npos);
}

TEST(LayerDescTest, ToMLIR) {
  LayerDesc layer;
  layer.T = 40;
  layer.H = 64;
  layer.I = 32;
  layer.prequantizedWeights = true;
  layer.checkpoint = true;
  Expected<std::string> text = layerToMLIR(layer, "f");
  ASSERT_TRUE(text) << text.message();
  EXPECT_NE(text->find("func.func @f("), std::string::npos);
  EXPECT_NE(text->find("moe.blockwise_bwd"), std::string::npos);
  EXPECT_NE(text->find("gate_up(%arg3 : tensor<4x64x2x32xf8E4M3FN> scales "
                       "%arg4 : tensor<4x64x2x1xf8E8M0FNU>)"),
            std::string::npos)
      << *text;

  // The op verifier's message, not a crash.
  layer.H = 48;
  text = layerToMLIR(layer);
  ASSERT_FALSE(text);
  EXPECT_NE(text.message().find("invalid layer: 'moe.blockwise_bwd' op H "
                                "(hidden size) must be a positive multiple "
                                "of 32, got 48"),
            std::string::npos)
      << text.message();
}

//===----------------------------------------------------------------------===//
// Compiling
//===----------------------------------------------------------------------===//

constexpr const char *kAddModule = R"(
func.func @add(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = arith.addf %a, %b : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}
)";

CompileOptions fastOptions() {
  CompileOptions options;
  options.optLevel = 0;
  return options;
}

// A temporary no allocator can give (2^52 bytes, beyond the address space
// even with overcommit; the lowering asks for 64 more to align it): the
// run fails with the size, the second time too, and the executable
// stays usable. The generated code allocates through the JIT's
// hooks; without them it would write through a null pointer.
constexpr const char *kHugeTemporaryModule = R"(
func.func @huge(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c1 = arith.constant 1 : index
  %t = tensor.empty() : tensor<1125899906842624xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      outs(%t : tensor<1125899906842624xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %v = arith.index_cast %i : index to i64
    %f = arith.sitofp %v : i64 to f32
    linalg.yield %f : f32
  } -> tensor<1125899906842624xf32>
  %e = tensor.extract %g[%c1] : tensor<1125899906842624xf32>
  %r = tensor.insert %e into %a[%c1] : tensor<4xf32>
  return %r : tensor<4xf32>
}
)";

TEST(RunTest, FailedHostAllocationIsAnError) {
  Compiler compiler;
  Expected<Executable> exe =
      compiler.compile(kHugeTemporaryModule, fastOptions());
  ASSERT_TRUE(exe) << exe.message();
  std::vector<float> a = {1, 2, 3, 4}, r(4, -1);
  std::vector<ConstTensorRef> in = {{a.data(), DType::F32, {4}}};
  std::vector<TensorRef> out = {{r.data(), DType::F32, {4}}};
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status s = exe->run(in, out);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.message().rfind("@huge: out of host memory: the generated "
                                "code could not allocate 4503599627370560 "
                                "bytes (it held ",
                                0),
              0u)
        << s.message();
  }
}

TEST(CompileTest, LocatedErrors) {
  Compiler compiler;
  CompileOptions options = fastOptions();
  options.sourceName = "bad.mlir";
  Expected<Executable> exe = compiler.compile("func.func @f(\n", options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message().rfind("bad.mlir:1:14: error: expected "
                                "non-function type\nfunc.func @f(\n",
                                0),
            0u)
      << exe.message();

  exe = compiler.compile("func.func @f(%a: memref<4xf32>) {\n  return\n}\n",
                         options);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.message().find("bad.mlir:1:1: error: argument #0 of @f has "
                               "type 'memref<4xf32>'"),
            std::string::npos)
      << exe.message();

  exe = compiler.compile("func.func private @f()\n", options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(),
            "bad.mlir: the module has no public function with a body");

  std::string two = std::string(kAddModule) +
                    "func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  return %a : tensor<4xf32>\n}\n";
  exe = compiler.compile(two, options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(), "bad.mlir: cannot choose the function to run "
                           "among @add, @g; name it (CompileOptions::entry, "
                           "moe-run --function)");
  options.entry = "missing";
  exe = compiler.compile(two, options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(),
            "bad.mlir: no public function @missing with a body in the module");

  exe = compiler.compileFile("/nonexistent/layer.mlir");
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(),
            "/nonexistent/layer.mlir: cannot open file (No such file or "
            "directory)");

  options = fastOptions();
  options.optLevel = 4;
  exe = compiler.compile(kAddModule, options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(), "optLevel 4 is outside [0, 3]");

  // The GPU options: a value outside their choices, or a host target.
  struct GPUOptionCase {
    Target target;
    std::string mmaPath, gpuMode, message;
  };
  for (const GPUOptionCase &c : std::vector<GPUOptionCase>{
           {Target::Sm90a, "fp4", "", "mmaPath 'fp4' is not fp8, bf16, bf16-operands or block-scale"},
           {Target::Host, "fp8", "", "mmaPath applies to GPU targets, not host"},
           {Target::Sm90a, "", "device",
            "gpuMode 'device' is not resident or hybrid"},
           {Target::Host, "", "hybrid",
            "gpuMode applies to GPU targets, not host"}}) {
    options = fastOptions();
    options.target = c.target;
    options.mmaPath = c.mmaPath;
    options.gpuMode = c.gpuMode;
    exe = compiler.compile(kAddModule, options);
    ASSERT_FALSE(exe) << c.message;
    EXPECT_EQ(exe.message(), c.message);
  }

  // The kernel files: a GPU target and a known form.
  options = fastOptions();
  options.kernelDir = "/tmp/unused";
  exe = compiler.compile(kAddModule, options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(), "kernelDir applies to GPU targets, not host");
  options.target = Target::Sm100a;
  options.kernelFormat = "sass";
  exe = compiler.compile(kAddModule, options);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.message(), "kernelFormat 'sass' is not ptx or cubin");
}

TEST(MoeJIT, TargetsParseAndNameTheirChips) {
  for (auto [name, target, chip] :
       std::vector<std::tuple<std::string, Target, std::string>>{
           {"host", Target::Host, ""},
           {"sm90a", Target::Sm90a, "sm_90a"},
           {"sm_100a", Target::Sm100a, "sm_100a"},
           {"sm120a", Target::Sm120a, "sm_120a"}}) {
    Expected<Target> parsed = parseTarget(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(*parsed, target);
    EXPECT_EQ(std::string(chipOf(target)), chip);
    EXPECT_EQ(isGPUTarget(target), !chip.empty());
  }
  Expected<Target> bad = parseTarget("sm80");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(),
            "unknown target 'sm80' (expected host, sm90a, sm100a or sm120a)");
}

/// setKernelChoices: the text of KernelChoices.def's options, every error
/// with its message and nothing set on error.
TEST(MoeJIT, KernelChoicesFromText) {
  CompileOptions options;
  ASSERT_TRUE(setKernelChoices(options, ""));
  EXPECT_EQ(options.weightReuse, 5);
  Status status = setKernelChoices(options, "weight-reuse=2,swap-weights=true,"
                                            "tma-store=false,round-reuse=0");
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(options.weightReuse, 2);
  EXPECT_TRUE(options.swapWeights);
  EXPECT_FALSE(options.tmaStore);
  EXPECT_EQ(options.roundReuse, 0);
  // Printed back, the choices set the same choices.
  std::string printed = kernelChoicesToString(options);
  EXPECT_EQ(printed.rfind("operands-both-axes=true,", 0), 0u) << printed;
  EXPECT_NE(printed.find(",round-reuse=0,"), std::string::npos) << printed;
  CompileOptions fresh;
  ASSERT_TRUE(setKernelChoices(fresh, printed));
  EXPECT_EQ(kernelChoicesToString(fresh), printed);

  CompileOptions before = options;
  auto rejects = [&](const char *text, const std::string &message) {
    Status bad = setKernelChoices(options, text);
    ASSERT_FALSE(bad) << text;
    EXPECT_EQ(bad.message(), message);
    // Nothing set, not even the pairs before the bad one.
    EXPECT_EQ(options.roundReuse, before.roundReuse);
    EXPECT_EQ(options.weightReuse, before.weightReuse);
    EXPECT_EQ(options.lhsGather, before.lhsGather);
    EXPECT_EQ(kernelChoicesToString(options), kernelChoicesToString(before));
  };
  rejects("round-reuse=5,weight-reuse=-1",
          "kernel choices: invalid value '-1' for weight-reuse (expected an "
          "integer in [0, 64])");
  rejects("round-reuse=5,weight-reuse=65",
          "kernel choices: invalid value '65' for weight-reuse (expected an "
          "integer in [0, 64])");
  rejects("round-reuse=99999999999999999999",
          "kernel choices: invalid value '99999999999999999999' for "
          "round-reuse (expected an integer in [0, 64])");
  rejects("lhs-gather=false,swap-weights=1",
          "kernel choices: invalid value '1' for swap-weights (expected true "
          "or false)");
  rejects("round-reuse=5,swap-weight",
          "kernel choices: 'swap-weight' is not OPTION=value");
  Status unknown = setKernelChoices(options, "swapWeights=true");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.message().rfind(
                "kernel choices: unknown option 'swapWeights' (expected one "
                "of operands-both-axes, ",
                0),
            0u)
      << unknown.message();
  EXPECT_NE(unknown.message().find(", weight-reuse, "), std::string::npos);
}

/// Buffers of the add function; `out` starts poisoned.
struct AddBuffers {
  std::vector<float> a, b, out;
  AddBuffers() : a(32), b(32), out(32, -123.0f) {
    for (int i = 0; i < 32; ++i) {
      a[i] = 0.5f * i;
      b[i] = 100.0f - i;
    }
  }
  std::vector<ConstTensorRef> inputs() const {
    return {{a.data(), DType::F32, {4, 8}}, {b.data(), DType::F32, {4, 8}}};
  }
  std::vector<TensorRef> outputs() {
    return {{out.data(), DType::F32, {4, 8}}};
  }
  bool untouched() const {
    for (float v : out)
      if (v != -123.0f)
        return false;
    return true;
  }
};

/// Target sm90a, gpuMode hybrid, on a module without MX block GEMMs:
/// nothing goes to the GPU, so it compiles and runs without a driver, and
/// the run's release of device state (moeCudaRuntimeReset) records no
/// error.
TEST(RunTest, Sm90aHybridWithoutGemmsRunsOnHost) {
  Compiler compiler;
  CompileOptions options = fastOptions();
  options.target = Target::Sm90a;
  options.gpuMode = "hybrid";
  Expected<Executable> exe = compiler.compile(kAddModule, options);
  ASSERT_TRUE(exe) << exe.message();
  EXPECT_EQ(exe->target(), Target::Sm90a);
  EXPECT_EQ(exe->compileInfo().gpuMode, "hybrid");
  for (int run = 0; run < 2; ++run) {
    AddBuffers buf;
    Status status = exe->run(buf.inputs(), buf.outputs());
    ASSERT_TRUE(status) << status.message();
    for (int i = 0; i < 32; ++i)
      EXPECT_EQ(buf.out[i], buf.a[i] + buf.b[i]) << "element " << i;
  }
}

/// The message of every sm90a run on a machine without libcuda.
constexpr const char *kNoDriver = "moe-cuda-runtime: libcuda.so.1 not found";

/// Every GEMM runs on the GPU in the default (resident) mode: bf16 GEMMs
/// (quant = none), GEMMs with a bias, and a block GEMM written by hand.
/// Compiling needs no driver.
TEST(CompileTest, Sm90aRunsEveryGemmResident) {
  const char *module =
      "func.func @gemm(%l: tensor<128x64xbf16>, %w: tensor<2x96x64xbf16>,\n"
      "    %blk: tensor<1xi32>) -> tensor<128x96xf32> {\n"
      "  %c = moe.block_matmul lhs(%l : tensor<128x64xbf16>)\n"
      "      rhs(%w : tensor<2x96x64xbf16>) experts(%blk : tensor<1xi32>)\n"
      "      {block_size = 128 : i64} -> tensor<128x96xf32>\n"
      "  return %c : tensor<128x96xf32>\n"
      "}\n";
  Compiler compiler;
  CompileOptions options = fastOptions();
  options.target = Target::Sm90a;
  options.sourceName = "gemm.mlir";
  auto expectResident = [](Expected<Executable> &exe, const char *what) {
    ASSERT_TRUE(exe) << what << ": " << exe.message();
    EXPECT_EQ(exe->compileInfo().gpuMode, "resident") << what;
  };
  Expected<Executable> exe = compiler.compile(module, options);
  expectResident(exe, "bf16 block GEMM");

  LayerDesc layer;
  layer.T = 64;
  layer.H = 64;
  layer.I = 32;
  layer.quant = Quant::None;
  exe = compiler.compileLayer(layer, options);
  expectResident(exe, "quant = none");

  layer.quant = LayerDesc().quant;
  layer.bias = true;
  options.gpuMode = "resident";
  exe = compiler.compileLayer(layer, options);
  expectResident(exe, "bias");
}

/// Target sm90a in the default (resident) mode: the addition is a GPU
/// kernel. Without a driver the run fails with the runtime's message
/// (loading the kernels) and writes nothing; with one, it copies the
/// buffers through device memory and gets the sums.
TEST(RunTest, Sm90aResidentRunsOnTheDevice) {
  Compiler compiler;
  CompileOptions options = fastOptions();
  options.target = Target::Sm90a;
  Expected<Executable> exe = compiler.compile(kAddModule, options);
  ASSERT_TRUE(exe) << exe.message();
  EXPECT_EQ(exe->compileInfo().gpuMode, "resident");
  AddBuffers buf;
  RunStats stats;
  Status status = exe->run(buf.inputs(), buf.outputs(), &stats);
  if (!status) {
    EXPECT_EQ(status.message().rfind(kNoDriver, 0), 0u) << status.message();
    EXPECT_TRUE(buf.untouched());
    return;
  }
  EXPECT_GT(stats.copySeconds, 0.0);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(buf.out[i], buf.a[i] + buf.b[i]) << "element " << i;
}

TEST(RunTest, ElementwiseAndValidation) {
  Compiler compiler;
  Expected<Executable> exe = compiler.compile(kAddModule, fastOptions());
  ASSERT_TRUE(exe) << exe.message();
  const Signature &sig = exe->signature();
  EXPECT_EQ(sig.function, "add");
  ASSERT_EQ(sig.inputs.size(), 2u);
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.inputs[1].name, "arg1");
  EXPECT_EQ(sig.outputs[0].name, "result0");
  EXPECT_EQ(sig.outputs[0].dtype, DType::F32);
  EXPECT_EQ(sig.outputs[0].shape, (std::vector<int64_t>{4, 8}));
  Expected<LayerDesc> layer = exe->layer();
  ASSERT_FALSE(layer);
  EXPECT_EQ(layer.message(), "@add holds 0 moe.blockwise_bwd ops, not "
                             "exactly one");

  AddBuffers buf;
  // Each bad argument: its message, and nothing written.
  auto rejects = [&](std::vector<ConstTensorRef> in, std::vector<TensorRef> out,
                     const std::string &message) {
    Status status = exe->run(in, out);
    EXPECT_FALSE(status);
    EXPECT_EQ(status.message(), message);
    EXPECT_TRUE(buf.untouched()) << message;
  };
  rejects({buf.inputs()[0]}, buf.outputs(),
          "@add takes 2 inputs and 1 outputs, got 1 and 1");
  auto in = buf.inputs();
  in[1].dtype = DType::BF16;
  rejects(in, buf.outputs(),
          "input 'arg1' (#1): dtype bf16 does not match the signature's f32");
  in = buf.inputs();
  in[0].shape = {8, 4};
  rejects(in, buf.outputs(),
          "input 'arg0' (#0): shape [8, 4] does not match the signature's "
          "[4, 8]");
  auto out = buf.outputs();
  out[0].data = nullptr;
  rejects(buf.inputs(), out, "output 'result0' (#0): null data pointer");
  in = buf.inputs();
  in[0].data = reinterpret_cast<const char *>(buf.a.data()) + 2;
  Status misaligned = exe->run(in, buf.outputs());
  EXPECT_NE(misaligned.message().find("input 'arg0' (#0): data pointer "),
            std::string::npos);
  EXPECT_NE(misaligned.message().find(" is not aligned to 4 bytes (f32)"),
            std::string::npos);
  EXPECT_TRUE(buf.untouched());
  in = buf.inputs();
  in[1].data = buf.out.data() + 4;
  rejects(in, buf.outputs(),
          "output 'result0' (#0) overlaps input 'arg1' "
          "(#1)");

  Status status = exe->run(buf.inputs(), buf.outputs());
  ASSERT_TRUE(status) << status.message();
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(buf.out[i], buf.a[i] + buf.b[i]) << i;
  // The inputs are read-only to the generated code.
  EXPECT_EQ(buf.a[3], 1.5f);
  EXPECT_EQ(buf.b[3], 97.0f);

  Status empty = Executable().run({}, {});
  EXPECT_FALSE(empty);
}

/// The default disk cache: $MOE_MLIR_CACHE_DIR (empty: none), else the
/// per-user cache folder.
TEST(CacheTest, DefaultDirectory) {
  const char *saved = std::getenv("MOE_MLIR_CACHE_DIR");
  std::string keep = saved ? saved : "";
  setenv("MOE_MLIR_CACHE_DIR", "/tmp/moe-cache-test", 1);
  EXPECT_EQ(defaultCacheDir(), "/tmp/moe-cache-test");
  EXPECT_EQ(CompilerOptions().cacheDir, "/tmp/moe-cache-test");
  setenv("MOE_MLIR_CACHE_DIR", "", 1);
  EXPECT_EQ(defaultCacheDir(), "");
  unsetenv("MOE_MLIR_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(defaultCacheDir(), "/tmp/xdg/moe-mlir");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(defaultCacheDir(), "/home/someone/.cache/moe-mlir");
  if (saved)
    setenv("MOE_MLIR_CACHE_DIR", keep.c_str(), 1);
}

TEST(CacheTest, MemoryAndDisk) {
  std::string dir = ::testing::TempDir() + "moe_jit_cache_test";
  std::filesystem::remove_all(dir);
  {
    Compiler first({dir});
    Expected<Executable> a = first.compile(kAddModule, fastOptions());
    ASSERT_TRUE(a) << a.message();
    EXPECT_EQ(a->compileInfo().source, CompileInfo::Source::Compiled);
    EXPECT_EQ(a->compileInfo().key.size(), 32u);
    Expected<Executable> b = first.compile(kAddModule, fastOptions());
    ASSERT_TRUE(b);
    EXPECT_EQ(b->compileInfo().source, CompileInfo::Source::MemoryCache);
    EXPECT_EQ(b->compileInfo().key, a->compileInfo().key);
    EXPECT_EQ(first.memoryCacheSize(), 1u);
    EXPECT_TRUE(
        std::filesystem::exists(dir + "/" + a->compileInfo().key + ".mlirbc"));
    // Another option is another key.
    CompileOptions noFuse = fastOptions();
    noFuse.fuse = false;
    Expected<Executable> c = first.compile(kAddModule, noFuse);
    ASSERT_TRUE(c);
    EXPECT_NE(c->compileInfo().key, a->compileInfo().key);
    EXPECT_EQ(first.memoryCacheSize(), 2u);
    first.clearMemoryCache();
    EXPECT_EQ(first.memoryCacheSize(), 0u);
  }
  // The object code of the key at -O0 for this CPU, with its constructor
  // list: <key>-O0-<cpu>.o and .o.ctors.
  std::string key;
  {
    Compiler probe({dir});
    key = probe.compile(kAddModule, fastOptions())->compileInfo().key;
  }
  std::string object;
  for (const auto &file : std::filesystem::directory_iterator(dir)) {
    std::string name = file.path().filename().string();
    if (name.rfind(key + "-O0-", 0) == 0 && file.path().extension() == ".o")
      object = file.path().string();
  }
  ASSERT_FALSE(object.empty()) << "no object code stored for " << key;
  EXPECT_TRUE(std::filesystem::exists(object + ".ctors"));

  // A second compiler with the same directory loads the object code: no
  // pipeline, no code generation, and the same results.
  Compiler second({dir});
  Expected<Executable> d = second.compile(kAddModule, fastOptions());
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->compileInfo().source, CompileInfo::Source::DiskCache);
  EXPECT_EQ(d->compileInfo().pipelineSeconds, 0.0);
  AddBuffers buf;
  ASSERT_TRUE(d->run(buf.inputs(), buf.outputs()));
  EXPECT_EQ(buf.out[31], buf.a[31] + buf.b[31]);

  // A damaged object is a miss of that level: the lowered module is
  // reloaded (no pipeline) and the code generated again.
  { std::ofstream(object, std::ios::trunc) << "not an object"; }
  Compiler third({dir});
  Expected<Executable> e = third.compile(kAddModule, fastOptions());
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->compileInfo().source, CompileInfo::Source::DiskCache);
  EXPECT_EQ(e->compileInfo().pipelineSeconds, 0.0);
  AddBuffers buf2;
  ASSERT_TRUE(e->run(buf2.inputs(), buf2.outputs()));
  EXPECT_EQ(buf2.out[31], buf2.a[31] + buf2.b[31]);

  // With the lowered module damaged too, everything is compiled again.
  { std::ofstream(object, std::ios::trunc) << "not an object"; }
  std::string entry = dir + "/" + key + ".mlirbc";
  { std::ofstream(entry, std::ios::trunc) << "not bytecode"; }
  Compiler fourth({dir});
  Expected<Executable> f = fourth.compile(kAddModule, fastOptions());
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(f->compileInfo().source, CompileInfo::Source::Compiled);
  std::filesystem::remove_all(dir);
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

/// One small layer compiled once for the suite, with seeded inputs packed
/// into buffers of the op's dtypes.
class LayerTest : public ::testing::Test,
                  protected moe::jit::testing::LayerBuffers {
protected:
  static void SetUpTestSuite() {
    desc = *parseLayerDesc("T=40,H=64,I=32,E=4,K=2,B=128");
    compiler = new Compiler();
    Expected<Executable> compiled = compiler->compileLayer(desc, fastOptions());
    ASSERT_TRUE(compiled) << compiled.message();
    exe = new Executable(*compiled);
  }
  static void TearDownTestSuite() {
    delete exe;
    delete compiler;
  }

  void SetUp() override {
    fill(desc, /*seed=*/3);
    rmx = moe::ref::backwardMX(cfg, ref);
  }

  std::vector<ConstTensorRef> inputs() { return inputRefs(exe->signature()); }
  std::vector<TensorRef> outputs() { return outputRefs(exe->signature()); }
  /// Runs; expects the error `fragment` and no output written.
  void expectRejected(const std::string &fragment) {
    Status status = exe->run(inputs(), outputs());
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << status.message();
    EXPECT_TRUE(untouched()) << fragment;
  }

  static inline LayerDesc desc;
  static inline Compiler *compiler = nullptr;
  static inline Executable *exe = nullptr;
  moe::ref::LayerGrads rmx;
};

TEST_F(LayerTest, SignatureAndLayer) {
  const Signature &sig = exe->signature();
  EXPECT_EQ(sig.function, "moe_layer_bwd");
  std::vector<std::string> names;
  for (const TensorSpec &s : sig.inputs)
    names.push_back(s.name);
  for (const TensorSpec &s : sig.outputs)
    names.push_back(s.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"x", "dy", "affinities", "wgu", "wd",
                                      "token_position_to_id", "block_to_expert",
                                      "dx", "da", "dwgu", "dwd"}));
  EXPECT_EQ(sig.inputs[5].shape, (std::vector<int64_t>{4 * 128}));
  EXPECT_EQ(sig.inputs[5].dtype, DType::I32);
  Expected<LayerDesc> layer = exe->layer();
  ASSERT_TRUE(layer) << layer.message();
  EXPECT_EQ(toString(*layer), toString(desc));
}

/// Issue 11, item 2: compiling a layer for sm90a needs no driver, only
/// running does. The compilation gives a resident executable (also from
/// the memory cache). Without a driver, every run fails with the runtime's
/// message and writes nothing, and a host run afterwards still works; with
/// one, the run gets through (the GPU tests check its results).
TEST_F(LayerTest, Sm90aCompilesWithoutADriver) {
  CompileOptions options = fastOptions();
  options.target = Target::Sm90a;
  Expected<Executable> gpu = compiler->compileLayer(desc, options);
  ASSERT_TRUE(gpu) << gpu.message();
  EXPECT_EQ(gpu->target(), Target::Sm90a);
  EXPECT_EQ(gpu->compileInfo().source, CompileInfo::Source::Compiled);
  EXPECT_EQ(gpu->compileInfo().gpuMode, "resident");
  Expected<Executable> cached = compiler->compileLayer(desc, options);
  ASSERT_TRUE(cached) << cached.message();
  EXPECT_EQ(cached->compileInfo().source, CompileInfo::Source::MemoryCache);
  EXPECT_EQ(cached->compileInfo().gpuMode, "resident");

  // The kernels load once, at the first run; a failed load fails every
  // run of the executable.
  for (const Executable *run : {&*gpu, &*gpu, &*cached}) {
    Status status = run->run(inputs(), outputs());
    if (status)
      return;
    EXPECT_EQ(status.message().rfind(kNoDriver, 0), 0u) << status.message();
    EXPECT_TRUE(untouched());
  }
  Status status = exe->run(inputs(), outputs());
  EXPECT_TRUE(status) << status.message();
}

TEST_F(LayerTest, RunMatchesReference) {
  Status status = exe->run(inputs(), outputs());
  ASSERT_TRUE(status) << status.message();
  std::vector<double> got(da.begin(), da.end());
  EXPECT_LE(moe::ref::relativeFrobenius(got, rmx.da), 2e-3);
  got.assign(dwd.begin(), dwd.end());
  EXPECT_LE(moe::ref::relativeFrobenius(got, rmx.dwd), 2e-3);
}

TEST_F(LayerTest, RejectsBadRouting) {
  // Slot 0 holds expert 0's first token; make it an id past T, then -2.
  tok[0] = 40;
  expectRejected("input 'token_position_to_id' (#5): element 0 is token id "
                 "40, outside [-1, 40)");
  tok[0] = -2;
  expectRejected("element 0 is token id -2, outside [-1, 40)");
  tok = ref.routing.tokenPositionToId;
  blk[1] = 4;
  expectRejected("input 'block_to_expert' (#6): element 1 is expert id 4, "
                 "outside [0, 4)");
  blk = ref.routing.blockToExpert;
  // Ids in range but out of order: the ordering contract.
  std::swap(tok[0], tok[1]);
  expectRejected("break the routing layout contract: slot 1 (block 0)");
  tok = ref.routing.tokenPositionToId;
  std::swap(blk[0], blk[3]);
  expectRejected("break the routing layout contract: block 1");
}

TEST_F(LayerTest, RejectsBadBuffers) {
  auto in = inputs();
  in[0].dtype = DType::F32;
  Status status = exe->run(in, outputs());
  EXPECT_EQ(status.message(),
            "input 'x' (#0): dtype f32 does not match the signature's bf16");
  in = inputs();
  in[3].shape = {4, 64, 32, 2};
  status = exe->run(in, outputs());
  EXPECT_EQ(status.message(), "input 'wgu' (#3): shape [4, 64, 32, 2] does "
                              "not match the signature's [4, 64, 2, 32]");
  auto out = outputs();
  out[2].data = static_cast<char *>(out[2].data) + 1;
  status = exe->run(inputs(), out);
  EXPECT_NE(status.message().find("output 'dwgu' (#2): data pointer"),
            std::string::npos);
  EXPECT_TRUE(untouched());
}

} // namespace

namespace {

/// Several threads compile and run different layers at once on one
/// Compiler (the API says it is thread-safe): each result has the bits of
/// the same layer run alone, and the shared memory cache ends with one
/// entry per layer.
TEST(ConcurrencyTest, ThreadsCompileAndRunDifferentLayers) {
  const char *specs[] = {"T=40,H=64,I=32,E=4,K=2,B=128",
                         "T=64,H=32,I=64,E=2,K=1,B=128,act=geglu",
                         "T=48,H=64,I=32,E=4,K=2,B=128,quant=e5m2",
                         "T=40,H=64,I=32,E=4,K=2,B=128,rule=floor"};
  constexpr int kLayers = 4;
  // Alone, one after the other.
  std::vector<std::vector<float>> alone(kLayers);
  {
    Compiler compiler(CompilerOptions{""});
    for (int i = 0; i < kLayers; ++i) {
      LayerDesc desc = *parseLayerDesc(specs[i]);
      Expected<Executable> exe = compiler.compileLayer(desc, fastOptions());
      ASSERT_TRUE(exe) << exe.message();
      moe::jit::testing::LayerBuffers b;
      b.fill(desc, /*seed=*/11 + i);
      ASSERT_TRUE(exe->run(b.inputRefs(exe->signature()),
                           b.outputRefs(exe->signature())));
      alone[i] = b.dwgu;
      alone[i].insert(alone[i].end(), b.da.begin(), b.da.end());
    }
  }
  // Together: two threads per layer.
  Compiler shared(CompilerOptions{""});
  std::vector<std::vector<float>> together(2 * kLayers);
  std::vector<std::string> errors(2 * kLayers);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * kLayers; ++t)
    threads.emplace_back([&, t] {
      int i = t % kLayers;
      LayerDesc desc = *parseLayerDesc(specs[i]);
      Expected<Executable> exe = shared.compileLayer(desc, fastOptions());
      if (!exe) {
        errors[t] = exe.message();
        return;
      }
      moe::jit::testing::LayerBuffers b;
      b.fill(desc, /*seed=*/11 + i);
      Status s = exe->run(b.inputRefs(exe->signature()),
                          b.outputRefs(exe->signature()));
      if (!s) {
        errors[t] = s.message();
        return;
      }
      together[t] = b.dwgu;
      together[t].insert(together[t].end(), b.da.begin(), b.da.end());
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < 2 * kLayers; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    if (!errors[t].empty())
      continue;
    ASSERT_EQ(together[t].size(), alone[t % kLayers].size());
    EXPECT_EQ(0, std::memcmp(together[t].data(), alone[t % kLayers].data(),
                             alone[t % kLayers].size() * sizeof(float)))
        << "thread " << t << " (" << specs[t % kLayers] << ")";
  }
  EXPECT_EQ(shared.memoryCacheSize(), static_cast<size_t>(kLayers));
}

} // namespace
