//===- MoeMLIR.cpp - the C API over the JIT API ---------------------------===//
//
// include/moe-c/MoeMLIR.h: thin wrappers that turn moe::jit's Status and
// Expected into a NULL or non-zero return plus a thread-local message, and
// C tensors into ConstTensorRef / TensorRef. The enums mirror moe::jit's in
// order (checked below).
//
//===----------------------------------------------------------------------===//
#include "moe-c/MoeMLIR.h"

#include "moe/JIT/MoeJIT.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace moe::jit;

struct MoeCompiler {
  Compiler compiler;
  explicit MoeCompiler(CompilerOptions options)
      : compiler(std::move(options)) {}
};

struct MoeExecutable {
  Executable executable;
  /// Storage for the strings the accessors hand out.
  std::string target, gpuMode;
};

static_assert(MOE_DTYPE_BF16 == static_cast<int>(DType::BF16) &&
                  MOE_DTYPE_F32 == static_cast<int>(DType::F32) &&
                  MOE_DTYPE_I32 == static_cast<int>(DType::I32) &&
                  MOE_DTYPE_F8E4M3FN == static_cast<int>(DType::F8E4M3FN) &&
                  MOE_DTYPE_F8E5M2 == static_cast<int>(DType::F8E5M2) &&
                  MOE_DTYPE_F8E8M0FNU == static_cast<int>(DType::F8E8M0FNU),
              "MoeDType mirrors moe::jit::DType");
static_assert(MOE_TARGET_HOST == static_cast<int>(Target::Host) &&
                  MOE_TARGET_SM90A == static_cast<int>(Target::Sm90a) &&
                  MOE_TARGET_SM100A == static_cast<int>(Target::Sm100a) &&
                  MOE_TARGET_SM120A == static_cast<int>(Target::Sm120a),
              "MoeTarget mirrors moe::jit::Target");

namespace {

thread_local std::string lastError;

/// Records `message` as the thread's last error.
void fail(std::string message) { lastError = std::move(message); }

/// Records a failed status; returns 1 (a C status) when it failed.
int32_t report(const Status &status) {
  if (status)
    return 0;
  fail(status.message());
  return 1;
}

/// The C++ options of `options` (the defaults for NULL), or false with the
/// last error set. First the C-only part the C++ API cannot see (an enum
/// value out of range would be undefined behaviour after the cast), then
/// the kernel choices' text.
bool toCompileOptions(const MoeCompileOptions *options, CompileOptions &out) {
  out = CompileOptions();
  if (!options)
    return true;
  if (options->target != MOE_TARGET_HOST &&
      options->target != MOE_TARGET_SM90A &&
      options->target != MOE_TARGET_SM100A &&
      options->target != MOE_TARGET_SM120A) {
    fail("compile: unknown target " +
         std::to_string(static_cast<int>(options->target)) +
         " (MOE_TARGET_HOST, MOE_TARGET_SM90A, MOE_TARGET_SM100A or "
         "MOE_TARGET_SM120A)");
    return false;
  }
  out.target = static_cast<Target>(options->target);
  out.fuse = options->fuse != 0;
  out.optLevel = options->optLevel;
  if (options->entry)
    out.entry = options->entry;
  if (options->mmaPath)
    out.mmaPath = options->mmaPath;
  if (options->gpuMode)
    out.gpuMode = options->gpuMode;
  if (options->sourceName)
    out.sourceName = options->sourceName;
  if (options->kernelChoices)
    return report(setKernelChoices(out, options->kernelChoices)) == 0;
  return true;
}

MoeExecutable *wrap(Expected<Executable> exe) {
  if (!exe) {
    fail(exe.message());
    return nullptr;
  }
  auto *out = new MoeExecutable{*exe, toString(exe->target()),
                                exe->compileInfo().gpuMode};
  return out;
}

/// The spec of tensor `index` of `executable`'s inputs or outputs, or null
/// with the last error set.
const TensorSpec *specOf(const MoeExecutable *executable, int32_t isOutput,
                         int32_t index) {
  if (!executable) {
    fail("null MoeExecutable");
    return nullptr;
  }
  const Signature &sig = executable->executable.signature();
  const std::vector<TensorSpec> &list = isOutput ? sig.outputs : sig.inputs;
  if (index < 0 || static_cast<size_t>(index) >= list.size()) {
    fail(std::string(isOutput ? "output" : "input") + " index " +
         std::to_string(index) + " is outside [0, " +
         std::to_string(list.size()) + ")");
    return nullptr;
  }
  return &list[index];
}

/// C tensors as the C++ API's references; false (last error set) for a
/// negative count, a null array, a bad dtype or a negative rank.
template <typename Ref>
bool toRefs(const char *kind, const MoeTensor *tensors, int32_t count,
            std::vector<Ref> &refs) {
  if (count < 0 || (count > 0 && !tensors)) {
    fail(std::string("run: ") + kind + "s: " +
         (count < 0 ? "negative count" : "null array"));
    return false;
  }
  for (int32_t i = 0; i < count; ++i) {
    const MoeTensor &t = tensors[i];
    if (t.dtype < MOE_DTYPE_BF16 || t.dtype > MOE_DTYPE_F8E8M0FNU ||
        t.rank < 0 || (t.rank > 0 && !t.shape)) {
      fail(std::string("run: ") + kind + " #" + std::to_string(i) +
           ": bad dtype, rank or shape pointer");
      return false;
    }
    Ref ref;
    ref.data = t.data;
    ref.dtype = static_cast<DType>(t.dtype);
    ref.shape.assign(t.shape, t.shape + t.rank);
    refs.push_back(std::move(ref));
  }
  return true;
}

/// The references of a run; false (last error set) for a null executable
/// or a bad C tensor.
bool toRunArguments(const MoeExecutable *executable, const MoeTensor *inputs,
                    int32_t numInputs, const MoeTensor *outputs,
                    int32_t numOutputs, std::vector<ConstTensorRef> &in,
                    std::vector<TensorRef> &out) {
  if (!executable) {
    fail("null MoeExecutable");
    return false;
  }
  return toRefs("input", inputs, numInputs, in) &&
         toRefs("output", outputs, numOutputs, out);
}

} // namespace

extern "C" {

const char *moeGetLastError(void) { return lastError.c_str(); }

void moeCompileOptionsInit(MoeCompileOptions *options) {
  if (!options)
    return;
  CompileOptions defaults;
  options->target = static_cast<MoeTarget>(defaults.target);
  options->fuse = defaults.fuse;
  options->optLevel = defaults.optLevel;
  options->entry = nullptr;
  options->mmaPath = nullptr;
  options->gpuMode = nullptr;
  options->sourceName = nullptr;
  options->kernelChoices = nullptr;
}

int32_t moeCheckKernelChoices(const char *kernelChoices) {
  if (!kernelChoices) {
    fail("moeCheckKernelChoices: null text");
    return 1;
  }
  CompileOptions options;
  return report(setKernelChoices(options, kernelChoices));
}

MoeCompiler *moeCompilerCreate(const char *cacheDir) {
  CompilerOptions options; // defaultCacheDir() unless given
  if (cacheDir)
    options.cacheDir = cacheDir;
  return new MoeCompiler(std::move(options));
}

void moeCompilerDestroy(MoeCompiler *compiler) { delete compiler; }

MoeExecutable *moeCompileLayer(MoeCompiler *compiler, const char *layerSpec,
                               const MoeCompileOptions *options) {
  if (!compiler || !layerSpec) {
    fail("moeCompileLayer: null compiler or layer spec");
    return nullptr;
  }
  CompileOptions compileOptions;
  if (!toCompileOptions(options, compileOptions))
    return nullptr;
  Expected<LayerDesc> layer = parseLayerDesc(layerSpec);
  if (!layer) {
    fail(layer.message());
    return nullptr;
  }
  return wrap(compiler->compiler.compileLayer(*layer, compileOptions));
}

MoeExecutable *moeCompileModule(MoeCompiler *compiler, const char *mlirText,
                                const MoeCompileOptions *options) {
  if (!compiler || !mlirText) {
    fail("moeCompileModule: null compiler or module text");
    return nullptr;
  }
  CompileOptions compileOptions;
  if (!toCompileOptions(options, compileOptions))
    return nullptr;
  return wrap(compiler->compiler.compile(mlirText, compileOptions));
}

void moeExecutableDestroy(MoeExecutable *executable) { delete executable; }

int32_t moeExecutableNumInputs(const MoeExecutable *executable) {
  if (!executable) {
    fail("null MoeExecutable");
    return -1;
  }
  return static_cast<int32_t>(executable->executable.signature().inputs.size());
}

int32_t moeExecutableNumOutputs(const MoeExecutable *executable) {
  if (!executable) {
    fail("null MoeExecutable");
    return -1;
  }
  return static_cast<int32_t>(
      executable->executable.signature().outputs.size());
}

const char *moeExecutableTensorName(const MoeExecutable *executable,
                                    int32_t isOutput, int32_t index) {
  const TensorSpec *spec = specOf(executable, isOutput, index);
  return spec ? spec->name.c_str() : nullptr;
}

int32_t moeExecutableTensorDType(const MoeExecutable *executable,
                                 int32_t isOutput, int32_t index) {
  const TensorSpec *spec = specOf(executable, isOutput, index);
  return spec ? static_cast<int32_t>(spec->dtype) : -1;
}

int32_t moeExecutableTensorRank(const MoeExecutable *executable,
                                int32_t isOutput, int32_t index) {
  const TensorSpec *spec = specOf(executable, isOutput, index);
  return spec ? static_cast<int32_t>(spec->shape.size()) : -1;
}

int64_t moeExecutableTensorDim(const MoeExecutable *executable,
                               int32_t isOutput, int32_t index, int32_t dim) {
  const TensorSpec *spec = specOf(executable, isOutput, index);
  if (!spec)
    return 0;
  if (dim < 0 || static_cast<size_t>(dim) >= spec->shape.size()) {
    fail("dimension " + std::to_string(dim) + " is outside [0, " +
         std::to_string(spec->shape.size()) + ")");
    return 0;
  }
  return spec->shape[dim];
}

const char *moeExecutableTarget(const MoeExecutable *executable) {
  return executable ? executable->target.c_str() : nullptr;
}

const char *moeExecutableGpuMode(const MoeExecutable *executable) {
  return executable ? executable->gpuMode.c_str() : nullptr;
}

int32_t moeExecutableRun(const MoeExecutable *executable,
                         const MoeTensor *inputs, int32_t numInputs,
                         const MoeTensor *outputs, int32_t numOutputs,
                         double *callSeconds) {
  std::vector<ConstTensorRef> in;
  std::vector<TensorRef> out;
  if (!toRunArguments(executable, inputs, numInputs, outputs, numOutputs, in,
                      out))
    return 1;
  RunStats stats;
  int32_t status = report(executable->executable.run(in, out, &stats));
  if (callSeconds)
    *callSeconds = stats.callSeconds;
  return status;
}

int32_t moeExecutableRunOnDevice(const MoeExecutable *executable,
                                 const MoeTensor *inputs, int32_t numInputs,
                                 const MoeTensor *outputs, int32_t numOutputs,
                                 void *stream) {
  std::vector<ConstTensorRef> in;
  std::vector<TensorRef> out;
  if (!toRunArguments(executable, inputs, numInputs, outputs, numOutputs, in,
                      out))
    return 1;
  return report(executable->executable.runOnDevice(in, out, stream));
}

int64_t moeRoutingNumBlocks(int64_t T, int64_t K, int64_t E, int64_t B) {
  if (T < 0 || K < 0 || E < 1 || B < 1) {
    fail("moeRoutingNumBlocks: sizes T = " + std::to_string(T) + ", K = " +
         std::to_string(K) + ", E = " + std::to_string(E) + ", B = " +
         std::to_string(B) + " out of range (T, K >= 0; E, B >= 1)");
    return -1;
  }
  LayerDesc layer;
  layer.T = T;
  layer.K = K;
  layer.E = E;
  layer.B = B;
  return layer.numBlocks();
}

int32_t moeBuildRouting(const int32_t *topkIdx, int64_t T, int64_t K,
                        int64_t E, int64_t B, int32_t *tokenPositionToId,
                        int32_t *blockToExpert) {
  if (!tokenPositionToId || !blockToExpert) {
    fail("moeBuildRouting: null output buffer");
    return 1;
  }
  Expected<RoutingLayout> layout = buildRouting(topkIdx, T, K, E, B);
  if (!layout)
    return report(layout.status());
  std::copy(layout->tokenPositionToId.begin(),
            layout->tokenPositionToId.end(), tokenPositionToId);
  std::copy(layout->blockToExpert.begin(), layout->blockToExpert.end(),
            blockToExpert);
  return 0;
}

int32_t moeMaskedAffinities(const int32_t *topkIdx, const float *topkScores,
                            int64_t T, int64_t K, int64_t E,
                            float *affinities) {
  if (!affinities) {
    fail("moeMaskedAffinities: null output buffer");
    return 1;
  }
  Expected<std::vector<float>> masked =
      maskedAffinities(topkIdx, topkScores, T, K, E);
  if (!masked)
    return report(masked.status());
  std::copy(masked->begin(), masked->end(), affinities);
  return 0;
}

int32_t moeQuantizeMX(const float *values, int64_t rows, int64_t cols,
                      const char *element, const char *rule, uint8_t *codes,
                      uint8_t *scales) {
  std::string e = element ? element : "", r = rule ? rule : "";
  Quant quant;
  ScaleRule scaleRule;
  if (e == "e4m3")
    quant = Quant::E4M3;
  else if (e == "e5m2")
    quant = Quant::E5M2;
  else {
    fail("moeQuantizeMX: element '" + e + "' (expected e4m3 or e5m2)");
    return 1;
  }
  if (r == "rceil")
    scaleRule = ScaleRule::RCeil;
  else if (r == "floor")
    scaleRule = ScaleRule::Floor;
  else if (r == "floor_alt")
    scaleRule = ScaleRule::FloorAlt;
  else {
    fail("moeQuantizeMX: rule '" + r + "' (expected rceil, floor or "
         "floor_alt)");
    return 1;
  }
  if (!codes || !scales) {
    fail("moeQuantizeMX: null output buffer");
    return 1;
  }
  Expected<MXQuantized> q = quantizeMX(values, rows, cols, quant, scaleRule);
  if (!q)
    return report(q.status());
  std::copy(q->codes.begin(), q->codes.end(), codes);
  std::copy(q->scales.begin(), q->scales.end(), scales);
  return 0;
}

} // extern "C"
