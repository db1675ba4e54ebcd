//===- ResidentCallTest.cpp - what a resident call asks of the driver ------===//
//
// Compiles a layer for sm90a in the resident mode and runs it against the
// fake libcuda of unittests/Runtime, which logs every driver call with its
// stream (it runs no kernel, so the outputs are not checked). The compiled
// call must make no allocation or release outside the stream-ordered pool,
// no host synchronization and no stream or event of its own: everything it
// does is queued on the run's stream. A second run of the same executable
// holds to the same. The kernels are loaded at the first run (compiling
// needs no driver), before the call, and only then.
//
// The test needs that fake as libcuda.so.1: test/Runtime/CUDA/
// resident-call-fake-driver.test runs it with LD_LIBRARY_PATH set so (it
// is not one of the *Tests binaries the unit suite runs without a driver).
//
// Where the call begins and ends in the log: Executable::run synchronizes
// the run's stream after copying the inputs in, right after the call (which
// makes the results readable), and after copying the outputs out; nothing
// else synchronizes. So the call is what lies between the first two
// cuStreamSynchronize, and a run with more than three has synchronized
// inside the call.
//
//===----------------------------------------------------------------------===//

#include "moe/JIT/MoeJIT.h"

#include "LayerBuffers.h"

#include "../Runtime/FakeCuda.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace moe::jit;

namespace {

/// The fake's log, read through libcuda.so.1: opened here, since the
/// runtime loads it only at the first run, and the same object the runtime
/// then gets (the loader opens a library once).
class FakeDriverLog {
public:
  FakeDriverLog() {
    handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (!handle)
      return;
    count = reinterpret_cast<decltype(count)>(
        dlsym(handle, "fakeCudaCallCount"));
    at = reinterpret_cast<decltype(at)>(dlsym(handle, "fakeCudaCallAt"));
    reset = reinterpret_cast<decltype(reset)>(dlsym(handle, "fakeCudaReset"));
  }
  ~FakeDriverLog() {
    if (handle)
      dlclose(handle);
  }
  bool loaded() const { return count && at && reset; }
  std::vector<FakeCall> calls() const {
    std::vector<FakeCall> out;
    for (int i = 0; i < count(); ++i)
      out.push_back(at(i));
    return out;
  }

  int (*count)() = nullptr;
  FakeCall (*at)(int) = nullptr;
  void (*reset)() = nullptr;

private:
  void *handle = nullptr;
};

/// The driver calls a compiled call must not make.
const std::set<std::string> &forbiddenInCall() {
  static const std::set<std::string> symbols = {
      "cuMemAlloc_v2",       "cuMemFree_v2",       "cuMemAllocManaged",
      "cuMemcpyHtoD_v2",     "cuStreamSynchronize", "cuCtxSynchronize",
      "cuEventSynchronize",  "cuStreamCreate",      "cuStreamDestroy_v2",
      "cuEventCreate",       "cuEventDestroy_v2",   "cuEventRecord",
      "cuStreamWaitEvent",   "cuMemPoolCreate",     "cuModuleLoadDataEx"};
  return symbols;
}

/// Checks the log of one runOnDevice: no forbidden driver call (but the
/// first call's module loads), and every call that names a stream names
/// `stream`. Returns the count of each symbol.
std::map<std::string, int> checkDeviceCall(const std::vector<FakeCall> &log,
                                           uintptr_t stream) {
  std::map<std::string, int> calls;
  for (const FakeCall &call : log) {
    const std::string symbol = call.symbol;
    ++calls[symbol];
    if (symbol != "cuModuleLoadDataEx") {
      EXPECT_EQ(forbiddenInCall().count(symbol), 0u) << symbol;
    }
    if (call.stream) {
      EXPECT_EQ(call.stream, stream) << symbol;
    }
  }
  return calls;
}

class ResidentCall : public ::testing::Test,
                     protected moe::jit::testing::LayerBuffers {
protected:
  void SetUp() override {
    desc = *parseLayerDesc("T=256,H=256,I=128,E=2,K=1,B=128");
    fill(desc, /*seed=*/5);
  }
  std::vector<ConstTensorRef> inputs(const Signature &sig) {
    return inputRefs(sig);
  }
  std::vector<TensorRef> outputs(const Signature &sig) {
    return outputRefs(sig);
  }
  /// The layer for sm90a (resident: the default mode), unoptimized host
  /// code.
  Expected<Executable> compileSm90a() {
    CompileOptions options;
    options.target = Target::Sm90a;
    options.optLevel = 0;
    return compiler.compileLayer(desc, options);
  }
  /// compileSm90a into `exe`, with the fake driver's log open in `fake`.
  /// Call as ASSERT_NO_FATAL_FAILURE(compileForFakeDriver()).
  void compileForFakeDriver() {
    Expected<Executable> compiled = compileSm90a();
    ASSERT_TRUE(compiled) << compiled.message();
    exe = *compiled;
    ASSERT_TRUE(fake.loaded())
        << "libcuda.so.1 is not the fake driver (run through lit)";
  }

  LayerDesc desc;
  Compiler compiler;
  Executable exe;
  FakeDriverLog fake;
};

/// Checks the log of one run: see the file comment.
void expectOneStreamNoSynchronization(const std::vector<FakeCall> &log) {
  std::vector<size_t> syncs;
  for (size_t i = 0; i < log.size(); ++i)
    if (std::string(log[i].symbol) == "cuStreamSynchronize")
      syncs.push_back(i);
  ASSERT_EQ(syncs.size(), 3u)
      << "the run synchronizes after the copies in, after the call and "
         "after the copies out, and nowhere else";
  const uintptr_t stream = log[syncs[0]].stream;
  ASSERT_NE(stream, 0u);
  EXPECT_EQ(log[syncs[1]].stream, stream);
  std::map<std::string, int> inCall;
  for (size_t i = syncs[0] + 1; i < syncs[1]; ++i) {
    const std::string symbol = log[i].symbol;
    ++inCall[symbol];
    EXPECT_EQ(forbiddenInCall().count(symbol), 0u)
        << symbol << " during the compiled call (call #" << i << ")";
    if (log[i].stream) {
      EXPECT_EQ(log[i].stream, stream)
          << symbol << " on another stream during the compiled call";
    }
  }
  // The call is not empty: its workspace comes from the pool and goes
  // back to it on the stream, the kernels (elementwise and the five GEMMs,
  // clusters or not) are launched on the stream, and the GEMMs' tensor maps
  // are encoded and uploaded on it, and freed on it when the call ends.
  EXPECT_GT(inCall["cuMemAllocFromPoolAsync"], 0);
  EXPECT_EQ(inCall["cuMemAllocFromPoolAsync"], inCall["cuMemFreeAsync"])
      << "every workspace buffer and descriptor copy is freed in the call";
  EXPECT_GE(inCall["cuLaunchKernel"] + inCall["cuLaunchKernelEx"], 6);
  EXPECT_GT(inCall["cuTensorMapEncodeTiled"], 0);
  EXPECT_EQ(inCall["cuMemcpyHtoDAsync_v2"], inCall["cuTensorMapEncodeTiled"]);
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].stream) {
      EXPECT_EQ(log[i].stream, stream)
          << log[i].symbol << " (call #" << i << ") is not on the run's stream";
    }
  }
}

TEST_F(ResidentCall, QueuesEverythingOnTheRunStreamWithoutSynchronizing) {
  ASSERT_NO_FATAL_FAILURE(compileForFakeDriver());
  ASSERT_EQ(exe.compileInfo().gpuMode, "resident");
  const Signature &sig = exe.signature();
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    fake.reset();
    RunStats stats;
    Status status = exe.run(inputs(sig), outputs(sig), &stats);
    ASSERT_TRUE(status) << status.message();
    EXPECT_GT(stats.callSeconds, 0.0);
    std::vector<FakeCall> log = fake.calls();
    expectOneStreamNoSynchronization(log);
    int moduleLoads = 0;
    for (const FakeCall &call : log)
      moduleLoads += std::string(call.symbol) == "cuModuleLoadDataEx";
    EXPECT_EQ(moduleLoads > 0, run == 0)
        << "the first run loads the kernels, and only the first";
  }
}

/// runRepeated: the buffers are copied once for all the calls; each call
/// is its own launches and ends with a synchronization of the run's stream.
TEST_F(ResidentCall, RunRepeatedCopiesOnceForAllCalls) {
  ASSERT_NO_FATAL_FAILURE(compileForFakeDriver());
  const Signature &sig = exe.signature();
  std::vector<double> calls;
  // Once to load the kernels, then the runs that are compared.
  ASSERT_TRUE(exe.runRepeated(inputs(sig), outputs(sig), 1, calls));
  auto count = [&](int64_t n) {
    fake.reset();
    Status status = exe.runRepeated(inputs(sig), outputs(sig), n, calls);
    EXPECT_TRUE(status) << status.message();
    EXPECT_EQ(calls.size(), static_cast<size_t>(n));
    std::map<std::string, int> counts;
    for (const FakeCall &call : fake.calls())
      ++counts[call.symbol];
    return counts;
  };
  std::map<std::string, int> one = count(1), three = count(3);
  EXPECT_GT(one["cuMemcpyAsync"], 0);
  EXPECT_EQ(three["cuMemcpyAsync"], one["cuMemcpyAsync"])
      << "the buffers are copied once";
  EXPECT_EQ(three["cuLaunchKernel"] + three["cuLaunchKernelEx"],
            3 * (one["cuLaunchKernel"] + one["cuLaunchKernelEx"]));
  EXPECT_EQ(three["cuStreamSynchronize"], one["cuStreamSynchronize"] + 2)
      << "one synchronization more per call";
  Status none = exe.runRepeated(inputs(sig), outputs(sig), 0, calls);
  EXPECT_FALSE(none);
  EXPECT_EQ(none.message(), "runRepeated: 0 calls (at least 1)");
}

/// runOnDevice: the caller's buffers and stream. The fake driver runs no
/// kernel, so the caller's "device" buffers are host vectors here; what
/// matters is the log: the call makes no forbidden driver call at all (no
/// copy of the arguments, no synchronization, no stream of its own),
/// everything that names a stream names the caller's, and the call leaves
/// nothing allocated: a training loop calls it every step on buffers that
/// move, so descriptors kept across calls would pile up.
TEST_F(ResidentCall, RunOnDeviceQueuesOnTheCallersStream) {
  ASSERT_NO_FATAL_FAILURE(compileForFakeDriver());
  const Signature &sig = exe.signature();
  void *stream = reinterpret_cast<void *>(uintptr_t(0x5eed0));
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    fake.reset();
    RunStats stats;
    // The last run on other output buffers, as the next step's would be.
    std::vector<std::vector<char>> moved;
    std::vector<TensorRef> outs = outputs(sig);
    if (run == 2)
      for (size_t i = 0; i < outs.size(); ++i) {
        moved.emplace_back(sig.outputs[i].numBytes() + 64);
        outs[i].data = moved.back().data() + 64;
      }
    Status status = exe.runOnDevice(inputs(sig), outs, stream, &stats);
    ASSERT_TRUE(status) << status.message();
    std::map<std::string, int> calls =
        checkDeviceCall(fake.calls(), reinterpret_cast<uintptr_t>(stream));
    EXPECT_EQ(calls["cuMemcpyHtoD_v2"] + calls["cuMemcpyDtoH_v2"], 0);
    EXPECT_GE(calls["cuLaunchKernel"] + calls["cuLaunchKernelEx"], 6);
    EXPECT_EQ(calls["cuMemAllocFromPoolAsync"], calls["cuMemFreeAsync"])
        << "the call frees its workspace and its tensor maps' copies on the "
           "stream";
    // Every call encodes and uploads its descriptors, none is left from
    // the call before.
    EXPECT_GT(calls["cuTensorMapEncodeTiled"], 0);
    EXPECT_EQ(calls["cuMemcpyHtoDAsync_v2"], calls["cuTensorMapEncodeTiled"]);
  }
}

/// The null stream is the legacy default stream (torch's default stream):
/// the call queues on it by its explicit handle, CU_STREAM_LEGACY, and
/// stays asynchronous. (The runtime reads a null call stream as no call in
/// progress, where every allocation, free and descriptor upload
/// synchronizes: 2.6x the call's time on the H200.)
TEST_F(ResidentCall, RunOnDeviceOnTheNullStreamUsesTheLegacyHandle) {
  ASSERT_NO_FATAL_FAILURE(compileForFakeDriver());
  const Signature &sig = exe.signature();
  // Once to load the kernels, then the call that is checked.
  ASSERT_TRUE(exe.runOnDevice(inputs(sig), outputs(sig), nullptr));
  fake.reset();
  Status status = exe.runOnDevice(inputs(sig), outputs(sig), nullptr);
  ASSERT_TRUE(status) << status.message();
  std::map<std::string, int> calls = checkDeviceCall(fake.calls(), 0x1);
  EXPECT_EQ(calls["cuModuleLoadDataEx"], 0);
  EXPECT_GE(calls["cuLaunchKernel"] + calls["cuLaunchKernelEx"], 6);
  EXPECT_GT(calls["cuMemAllocFromPoolAsync"], 0);
  EXPECT_EQ(calls["cuMemAllocFromPoolAsync"], calls["cuMemFreeAsync"]);
}

/// Kernel launches in a fake driver log.
int launches(const std::vector<FakeCall> &log) {
  int n = 0;
  for (const FakeCall &call : log) {
    const std::string symbol = call.symbol;
    n += symbol == "cuLaunchKernel" || symbol == "cuLaunchKernelEx";
  }
  return n;
}

/// The GPU path under concurrency (issue 13): threads compile different
/// layers for sm90a at once on one Compiler and run them against the fake
/// driver. The fake runs no kernel, so the outputs hold nothing to
/// compare; what must equal the single-threaded runs is the work: every
/// run succeeds and the launches add up to those of the same runs made one
/// after the other, none lost or doubled (the runs take turns on the
/// runtime's per-process state). MoeJITTest's ConcurrencyTest compares the
/// host target's bits.
TEST_F(ResidentCall, ThreadsCompileAndRunDifferentLayers) {
  ASSERT_TRUE(fake.loaded())
      << "libcuda.so.1 is not the fake driver (run through lit)";
  const char *specs[] = {"T=256,H=256,I=128,E=2,K=1,B=128",
                         "T=64,H=64,I=64,E=2,K=2,B=128,act=geglu",
                         "T=128,H=128,I=64,E=4,K=2,B=128,quant=e5m2"};
  constexpr int kLayers = 3;
  CompileOptions options;
  options.target = Target::Sm90a;
  options.optLevel = 0;
  int alone = 0;
  {
    Compiler single;
    for (const char *spec : specs) {
      LayerDesc layer = *parseLayerDesc(spec);
      Expected<Executable> exe = single.compileLayer(layer, options);
      ASSERT_TRUE(exe) << exe.message();
      moe::jit::testing::LayerBuffers b;
      b.fill(layer, /*seed=*/3);
      fake.reset();
      Status status = exe->run(b.inputRefs(exe->signature()),
                               b.outputRefs(exe->signature()));
      ASSERT_TRUE(status) << spec << ": " << status.message();
      int n = launches(fake.calls());
      EXPECT_GE(n, 6) << spec;
      alone += n;
    }
  }

  Compiler shared;
  std::vector<std::string> errors(2 * kLayers);
  fake.reset();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * kLayers; ++t)
    threads.emplace_back([&, t] {
      LayerDesc layer = *parseLayerDesc(specs[t % kLayers]);
      Expected<Executable> exe = shared.compileLayer(layer, options);
      if (!exe) {
        errors[t] = "compile: " + exe.message();
        return;
      }
      moe::jit::testing::LayerBuffers b;
      b.fill(layer, /*seed=*/3);
      Status status = exe->run(b.inputRefs(exe->signature()),
                               b.outputRefs(exe->signature()));
      if (!status)
        errors[t] = "run: " + status.message();
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < 2 * kLayers; ++t)
    EXPECT_EQ(errors[t], "") << "thread " << t << " (" << specs[t % kLayers]
                             << ")";
  EXPECT_EQ(launches(fake.calls()), 2 * alone);
  EXPECT_EQ(shared.memoryCacheSize(), static_cast<size_t>(kLayers));
}

/// runOnDevice needs an executable compiled for device buffers; the
/// arguments are checked as run() checks them.
TEST_F(ResidentCall, RunOnDeviceRejectsWhatItCannotRun) {
  Expected<Executable> host = compiler.compileLayer(desc, {});
  ASSERT_TRUE(host) << host.message();
  const Signature &sig = host->signature();
  Status status = host->runOnDevice(inputs(sig), outputs(sig), nullptr);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "runOnDevice: @moe_layer_bwd was not compiled for device buffers "
            "(it needs target sm90a with gpuMode resident; this one is "
            "host): use run()");

  Expected<Executable> exe = compileSm90a();
  ASSERT_TRUE(exe) << exe.message();
  std::vector<TensorRef> outs = outputs(sig);
  outs[0].data = nullptr;
  status = exe->runOnDevice(inputs(sig), outs, nullptr);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(), "output 'dx' (#0): null data pointer");
}

} // namespace
