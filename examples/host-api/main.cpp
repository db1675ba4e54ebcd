//===- main.cpp - Running a MoE layer backward through the host API -------===//
//
// A complete program against the installed MoeMLIR package, written to be
// copied. It
//
//   1. compiles a layer description into an Executable and prints its
//      signature (the buffers run() takes, in order),
//   2. builds its own routing: a seeded top-K per token, laid out in the
//      blocked format the compiled code reads,
//   3. fills the other inputs with seeded random bf16 values, runs, and
//      prints the output norms and the compile and run times,
//   4. shows the error path: run() with an out-of-range token id and with a
//      wrong shape returns a message and writes no output,
//   5. shows the caches: the same Compiler answers from memory, and a second
//      Compiler given the same directory answers from disk,
//   6. with --sm90a, compiles the layer for the H200 (no driver needed) and
//      runs it on the same host buffers (the run copies them to the device
//      and back; it needs a CUDA driver and an sm_90 GPU).
//
// It needs only MoeJIT.h and libMoeJIT (no MLIR or LLVM headers) and exits
// non-zero when any check fails.
//
// Usage: moe-host-api-example [cache-dir] [--sm90a]
//
//===----------------------------------------------------------------------===//
#include "moe/JIT/MoeJIT.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace jit = moe::jit;

namespace {

//===----------------------------------------------------------------------===//
// Seeded data
//===----------------------------------------------------------------------===//

/// splitmix64: a tiny, good 64-bit mixer; every random value below is
/// mix(seed + counter), so a run is reproducible on any machine.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform double in [0, 1) from the top 53 bits of a hash.
double unit(uint64_t hash) { return (hash >> 11) * 0x1.0p-53; }

/// float -> bf16 bits, rounding to nearest, ties to even. bf16 is the top
/// half of an IEEE float, so rounding is an add on the dropped half.
uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep it a (quiet) NaN
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float fromBF16(uint16_t half) {
  uint32_t bits = static_cast<uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

//===----------------------------------------------------------------------===//
// Routing
//===----------------------------------------------------------------------===//

/// The routing inputs of a layer (docs/host-api.md, "Calling convention of
/// a layer").
struct Routing {
  std::vector<float> affinities;          ///< [T*E], zero where not routed
  std::vector<int32_t> tokenPositionToId; ///< [N*B], -1 for padding
  std::vector<int32_t> blockToExpert;     ///< [N]
};

/// Picks K experts per token by a seeded score (a stand-in for a router),
/// then lays the (token, expert) pairs out in blocks of B slots: experts in
/// ascending order, each expert's tokens in ascending order from the start
/// of its own first block, unused slots -1, and the spare blocks at the end
/// given to the last expert.
Routing makeRouting(const jit::LayerDesc &layer, int64_t numBlocks,
                    uint64_t seed) {
  const int64_t T = layer.T, E = layer.E, K = layer.K, B = layer.B;
  Routing r;
  r.affinities.assign(T * E, 0.0f);
  std::vector<std::vector<int32_t>> tokensOf(E);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> score(E);
    std::vector<int32_t> order(E);
    for (int64_t e = 0; e < E; ++e) {
      score[e] = unit(mix(seed + t * E + e));
      order[e] = static_cast<int32_t>(e);
    }
    std::partial_sort(
        order.begin(), order.begin() + K, order.end(),
        [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    // The K chosen scores, normalized to sum to 1, are the affinities.
    double sum = 0;
    for (int64_t k = 0; k < K; ++k)
      sum += score[order[k]];
    for (int64_t k = 0; k < K; ++k) {
      r.affinities[t * E + order[k]] =
          static_cast<float>(score[order[k]] / sum);
      tokensOf[order[k]].push_back(static_cast<int32_t>(t));
    }
  }

  r.tokenPositionToId.assign(numBlocks * B, -1);
  int64_t block = 0;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int32_t> &tokens = tokensOf[e]; // ascending already
    for (size_t i = 0; i < tokens.size(); ++i)
      r.tokenPositionToId[block * B + i] = tokens[i];
    int64_t blocks = (static_cast<int64_t>(tokens.size()) + B - 1) / B;
    r.blockToExpert.insert(r.blockToExpert.end(), blocks,
                           static_cast<int32_t>(e));
    block += blocks;
  }
  r.blockToExpert.resize(numBlocks, static_cast<int32_t>(E - 1));
  return r;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// The bytes of one tensor of the signature. std::vector's storage comes
/// from operator new, aligned for every element type the API uses.
struct Buffer {
  jit::TensorSpec spec;
  std::vector<unsigned char> bytes;

  explicit Buffer(jit::TensorSpec s)
      : spec(std::move(s)), bytes(spec.numBytes()) {}
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes.data()); }
  jit::ConstTensorRef in() const {
    return {bytes.data(), spec.dtype, spec.shape};
  }
  jit::TensorRef out() { return {bytes.data(), spec.dtype, spec.shape}; }
};

/// Element i of a bf16 or f32 buffer, as a double.
double element(Buffer &b, int64_t i) {
  return b.spec.dtype == jit::DType::BF16 ? fromBF16(b.as<uint16_t>()[i])
                                          : b.as<float>()[i];
}

/// Frobenius norm; NaN when any element is NaN (or was never written: the
/// outputs are poisoned with NaN before the run).
double norm(Buffer &b) {
  double sum = 0;
  for (int64_t i = 0; i < b.spec.numElements(); ++i)
    sum += element(b, i) * element(b, i);
  return std::sqrt(sum);
}

/// The arguments of Executable::run, one per buffer, in signature order.
std::vector<jit::ConstTensorRef> inputRefs(const std::vector<Buffer> &buffers) {
  std::vector<jit::ConstTensorRef> r;
  for (const Buffer &b : buffers)
    r.push_back(b.in());
  return r;
}

std::vector<jit::TensorRef> outputRefs(std::vector<Buffer> &buffers) {
  std::vector<jit::TensorRef> r;
  for (Buffer &b : buffers)
    r.push_back(b.out());
  return r;
}

/// The buffer of the signature entry `name`, or null.
Buffer *find(std::vector<Buffer> &buffers, const std::string &name) {
  for (Buffer &b : buffers)
    if (b.spec.name == name)
      return &b;
  return nullptr;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

int failures = 0;

/// Reports a failed check; the program then ends with FAIL.
void check(bool ok, const char *what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

} // namespace

int main(int argc, char **argv) {
  std::string cacheDir =
      (std::filesystem::temp_directory_path() / "moe-jit-cache").string();
  bool sm90a = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sm90a") == 0)
      sm90a = true;
    else
      cacheDir = argv[i];
  }

  // 1. Compile. A layer description is a LayerDesc, here parsed from the
  // spelling moe-run's --layer also takes. Errors are values, never aborts.
  jit::Expected<jit::LayerDesc> layer =
      jit::parseLayerDesc("T=256,H=256,I=128,E=4,K=2,B=128,quant=e4m3");
  if (!layer) {
    std::printf("FAIL: %s\n", layer.message().c_str());
    return 1;
  }
  jit::Compiler compiler(jit::CompilerOptions{cacheDir});
  jit::Expected<jit::Executable> exe = compiler.compileLayer(*layer);
  if (!exe) {
    std::printf("FAIL: %s\n", exe.message().c_str());
    return 1;
  }
  const jit::Signature &sig = exe->signature();
  const jit::CompileInfo &info = exe->compileInfo();
  std::printf("layer %s\n", jit::toString(*layer).c_str());
  std::printf("compiled @%s for %s (%s) in %.3f s\n", sig.function.c_str(),
              jit::toString(exe->target()), jit::toString(info.source),
              info.totalSeconds);
  for (const jit::TensorSpec &t : sig.inputs)
    std::printf("  input  %-22s %-5s %s\n", t.name.c_str(),
                jit::toString(t.dtype), jit::shapeToString(t.shape).c_str());
  for (const jit::TensorSpec &t : sig.outputs)
    std::printf("  output %-22s %-5s %s\n", t.name.c_str(),
                jit::toString(t.dtype), jit::shapeToString(t.shape).c_str());

  // 2-3. Inputs, one buffer per signature entry: routing by name, every
  // other input seeded random bf16 in [-1, 1).
  std::vector<Buffer> inputs(sig.inputs.begin(), sig.inputs.end());
  std::vector<Buffer> outputs(sig.outputs.begin(), sig.outputs.end());
  Buffer *tokenIds = find(inputs, "token_position_to_id");
  Buffer *blockExperts = find(inputs, "block_to_expert");
  Buffer *affinities = find(inputs, "affinities");
  if (!tokenIds || !blockExperts || !affinities) {
    std::printf("FAIL: the signature has no routing inputs\n");
    return 1;
  }
  Routing routing = makeRouting(*layer, blockExperts->spec.numElements(), 7);
  std::memcpy(tokenIds->bytes.data(), routing.tokenPositionToId.data(),
              tokenIds->bytes.size());
  std::memcpy(blockExperts->bytes.data(), routing.blockToExpert.data(),
              blockExperts->bytes.size());
  std::memcpy(affinities->bytes.data(), routing.affinities.data(),
              affinities->bytes.size());
  uint64_t counter = 1000;
  for (Buffer &b : inputs) {
    if (&b == tokenIds || &b == blockExperts || &b == affinities)
      continue;
    if (b.spec.dtype != jit::DType::BF16) {
      std::printf("FAIL: input %s: the example fills bf16 only\n",
                  b.spec.name.c_str());
      return 1;
    }
    for (int64_t i = 0; i < b.spec.numElements(); ++i)
      b.as<uint16_t>()[i] = toBF16(float(2 * unit(mix(counter++)) - 1));
  }
  // Poison the outputs (all-ones bytes are NaN in bf16 and f32): a NaN
  // norm afterwards would mean an element was not written.
  for (Buffer &b : outputs)
    std::fill(b.bytes.begin(), b.bytes.end(), 0xFF);

  auto start = std::chrono::steady_clock::now();
  jit::Status status = exe->run(inputRefs(inputs), outputRefs(outputs));
  double runSeconds = secondsSince(start);
  if (!status) {
    std::printf("FAIL: run: %s\n", status.message().c_str());
    return 1;
  }
  std::printf("ran in %.3f s\n", runSeconds);
  for (Buffer &b : outputs) {
    double n = norm(b);
    std::printf("  %-6s norm %.4e\n", b.spec.name.c_str(), n);
    check(std::isfinite(n) && n > 0, "an output is zero, NaN or unwritten");
  }
  // The affinity gradient is zero exactly where a token is not routed.
  Buffer *da = find(outputs, "da");
  bool daFollowsRouting = da != nullptr;
  for (int64_t i = 0; daFollowsRouting && i < da->spec.numElements(); ++i)
    daFollowsRouting =
        (routing.affinities[i] == 0) == (da->as<float>()[i] == 0);
  check(daFollowsRouting, "da is not zero exactly where tokens are unrouted");

  // 4. The error path: run() checks every argument before writing anything
  // and returns a Status naming the offending buffer.
  std::vector<std::vector<unsigned char>> saved;
  for (Buffer &b : outputs)
    saved.push_back(b.bytes);
  std::vector<jit::ConstTensorRef> bad = inputRefs(inputs);
  std::vector<int32_t> badIds = routing.tokenPositionToId;
  badIds[3] = static_cast<int32_t>(layer->T); // token ids are in [-1, T)
  for (jit::ConstTensorRef &ref : bad)
    if (ref.data == tokenIds->bytes.data())
      ref.data = badIds.data();
  jit::Status badToken = exe->run(bad, outputRefs(outputs));
  std::printf("out-of-range token id: %s\n", badToken.message().c_str());
  check(!badToken, "run() accepted an out-of-range token id");

  bad = inputRefs(inputs);
  bad[0].shape = {layer->T / 2, layer->H}; // half the rows of x
  jit::Status badShape = exe->run(bad, outputRefs(outputs));
  std::printf("wrong shape: %s\n", badShape.message().c_str());
  check(!badShape, "run() accepted a wrong shape");
  bool untouched = true;
  for (size_t i = 0; i < outputs.size(); ++i)
    untouched = untouched && outputs[i].bytes == saved[i];
  std::printf("outputs untouched by the failed runs: %s\n",
              untouched ? "yes" : "no");
  check(untouched, "a failed run wrote an output");

  // 5. The caches. The same layer again comes from this Compiler's memory;
  // a new Compiler (in this process or a later one) with the same cache
  // directory skips the MLIR pipeline and only regenerates machine code.
  jit::Expected<jit::Executable> again = compiler.compileLayer(*layer);
  check(again && again->compileInfo().source ==
                     jit::CompileInfo::Source::MemoryCache,
        "the same Compiler did not answer from memory");
  jit::Compiler second(jit::CompilerOptions{cacheDir});
  jit::Expected<jit::Executable> reloaded = second.compileLayer(*layer);
  if (!reloaded) {
    std::printf("FAIL: %s\n", reloaded.message().c_str());
    return 1;
  }
  std::printf("second compiler: %s in %.3f s (cache %s)\n",
              jit::toString(reloaded->compileInfo().source),
              reloaded->compileInfo().totalSeconds, cacheDir.c_str());
  check(reloaded->compileInfo().source == jit::CompileInfo::Source::DiskCache,
        "the second Compiler did not answer from the disk cache");
  // What comes back from the cache computes the same bits.
  std::vector<Buffer> outputs2(sig.outputs.begin(), sig.outputs.end());
  check(reloaded->run(inputRefs(inputs), outputRefs(outputs2)).ok(),
        "the reloaded executable failed to run");
  for (size_t i = 0; i < outputs.size(); ++i)
    check(outputs2[i].bytes == outputs[i].bytes,
          "the reloaded executable computed different bits");

  // 6. The same layer on the H200. Compiling needs no driver; running
  // copies the buffers to the device, runs every phase there, and copies
  // the outputs back.
  if (sm90a) {
    jit::CompileOptions gpu;
    gpu.target = jit::Target::Sm90a;
    jit::Expected<jit::Executable> onGpu = compiler.compileLayer(*layer, gpu);
    if (!onGpu) {
      std::printf("FAIL: %s\n", onGpu.message().c_str());
      return 1;
    }
    std::printf("compiled for %s (%s)\n", jit::toString(onGpu->target()),
                onGpu->compileInfo().gpuMode.c_str());
    std::vector<Buffer> outputs3(sig.outputs.begin(), sig.outputs.end());
    jit::Status ran = onGpu->run(inputRefs(inputs), outputRefs(outputs3));
    std::printf("sm90a run: %s\n", ran ? "ok" : ran.message().c_str());
    check(ran.ok(), "the sm90a run failed");
  }

  std::printf("%s\n", failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}
