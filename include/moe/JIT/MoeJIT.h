//===- MoeJIT.h - C++ host API of the moe-mlir JIT --------------*- C++ -*-===//
//
// The public entry point for running what the compiler makes: compile moe IR
// (MLIR text) or a layer description for a target, get an Executable, query
// its signature and run it on caller-owned buffers.
//
//   moe::jit::Compiler compiler({/*cacheDir=*/"/tmp/moe-cache"});
//   moe::jit::LayerDesc layer;                 // T=256 H=256 I=128 E=4 K=2
//   auto exe = compiler.compileLayer(layer);
//   if (!exe) { std::cerr << exe.message(); return 1; }
//   for (const TensorSpec &in : exe->signature().inputs) ...
//   moe::jit::Status s = exe->run({{x, DType::BF16, {256, 256}}, ...},
//                                 {{dx, DType::BF16, {256, 256}}, ...});
//
// The header holds no MLIR or LLVM type (everything lives behind pimpl in
// the MoeJIT shared library), so programs using it need neither MLIR headers
// nor MLIR libraries. Errors are values: nothing here aborts or throws on
// bad input.
//
// Buffers are row-major, contiguous and aligned to their element size.
// Element storage: bf16 as uint16_t bits, f32 as float, i32 as int32_t, the
// FP8 types (f8E4M3FN, f8E5M2) and E8M0 scales (f8E8M0FNU) as uint8_t codes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_JIT_MOEJIT_H
#define MOE_JIT_MOEJIT_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(_WIN32)
#define MOE_JIT_EXPORT
#else
#define MOE_JIT_EXPORT __attribute__((visibility("default")))
#endif

namespace moe::jit {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Success, or an error with a message.
class MOE_JIT_EXPORT Status {
public:
  /// Success.
  Status() = default;
  static Status error(std::string message) {
    Status status;
    status.failed_ = true;
    status.message_ = std::move(message);
    return status;
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  /// Empty on success.
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

/// A value, or the error that prevented computing it.
template <typename T> class Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  /// `status` must be an error.
  Expected(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = Status::error("Expected built from a success status");
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  /// The value; only when ok().
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  const Status &status() const { return status_; }
  /// The error message; empty when ok().
  const std::string &message() const { return status_.message(); }

private:
  std::optional<T> value_;
  Status status_;
};

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// Element types of the tensors a compiled function takes and returns.
enum class DType { BF16, F32, I32, F8E4M3FN, F8E5M2, F8E8M0FNU };

/// Bytes per element (the storage sizes of the file comment).
MOE_JIT_EXPORT size_t byteSize(DType dtype);
/// MLIR spelling: "bf16", "f32", "i32", "f8E4M3FN", "f8E5M2", "f8E8M0FNU".
MOE_JIT_EXPORT const char *toString(DType dtype);
/// "[4, 128, 256]".
MOE_JIT_EXPORT std::string shapeToString(const std::vector<int64_t> &shape);

/// One input or output of a compiled function.
struct TensorSpec {
  /// The operand's role when the argument feeds moe.blockwise_bwd directly
  /// (the file names of `moe-ref gen`: x, dy, affinities, wgu, wgu_scales,
  /// wd, wd_scales, token_position_to_id, block_to_expert, checkpoint, bgu,
  /// bd; results dx, da, dwgu, dwd, dbgu, dbd), else "arg<i>" / "result<i>".
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t numBytes() const { return numElements() * byteSize(dtype); }
};

/// The calling signature of an Executable: inputs, then outputs, in the
/// order of the function's arguments and results.
struct Signature {
  std::string function;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

/// A caller-owned input buffer.
struct ConstTensorRef {
  const void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

/// A caller-owned output buffer; the run writes every element.
struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

//===----------------------------------------------------------------------===//
// Layer descriptions
//===----------------------------------------------------------------------===//

enum class Activation { SwiGLU, GeGLU };
enum class AffinityPlacement { OnI, OnH };
/// MX element type of the GEMM operands; None keeps bf16 operands.
enum class Quant { E4M3, E5M2, None };
enum class ScaleRule { RCeil, Floor, FloorAlt };
enum class DxAccumulate { F32, BF16 };

/// One moe.blockwise_bwd layer: the shapes and every option of the op
/// (mirrors moe::ref::LayerConfig, plus the storage types the reference
/// does not model). Defaults: the embedded example (T=256, H=256, I=128,
/// E=4, K=2, B=128, e4m3, rceil, swiglu, affinity on I).
struct LayerDesc {
  int64_t T = 256, H = 256, I = 128, E = 4, K = 2, B = 128;
  Activation act = Activation::SwiGLU;
  AffinityPlacement affinity = AffinityPlacement::OnI;
  Quant quant = Quant::E4M3;
  ScaleRule rule = ScaleRule::RCeil;
  std::optional<double> gateLo, gateHi, upLo, upHi;
  /// Bias operands and gradients; biasDType is their storage type (bf16 or
  /// f32).
  bool bias = false;
  DType biasDType = DType::BF16;
  /// Take g and u from the gate/up checkpoint [N,2,I,B] (bf16 or f32)
  /// instead of recomputing them.
  bool checkpoint = false;
  DType checkpointDType = DType::BF16;
  /// Single-expert dense mode (E = 1, K = 1, identity routing).
  bool dense = false;
  DxAccumulate dxAccumulate = DxAccumulate::F32;
  /// dx in f32 instead of bf16; dWgu and dWd in bf16 instead of f32.
  bool dxF32 = false;
  bool weightGradBF16 = false;
  /// Wgu and Wd arrive pre-quantized: FP8 codes of the quant element type
  /// plus E8M0 scales along 2I (Wgu) and H (Wd). Needs quant != None and a
  /// checkpoint.
  bool prequantizedWeights = false;

  /// N = ceil((T*K - (E-1)) / B) + E - 1, at least 1 (the ceiling of a
  /// negative numerator rounds toward zero).
  int64_t numBlocks() const {
    int64_t rest = T * K - (E - 1);
    int64_t ceilTerm = rest >= 0 ? (rest + B - 1) / B : -((-rest) / B);
    return ceilTerm + E - 1 > 1 ? ceilTerm + E - 1 : 1;
  }
};

/// Parses the command-line spelling, comma-separated key=value pairs, e.g.
/// "T=256,H=256,I=128,E=4,K=2,B=128,quant=e4m3,rule=rceil,act=swiglu".
/// Keys: T H I E K B (positive integers), act=swiglu|geglu,
/// affinity=on_i|on_h, quant=e4m3|e5m2|none, rule=rceil|floor|floor_alt,
/// clamp_gate=LO:HI and clamp_up=LO:HI (either side may be empty; "none"),
/// bias=off|on|bf16|f32, checkpoint=off|on|bf16|f32, dense=off|on,
/// dx=bf16|f32, dx_accumulate=f32|bf16, weight_grads=f32|bf16,
/// weights=bf16|mx. Unset keys keep LayerDesc's defaults; dense=on sets E
/// and K to 1. Errors name the offending key.
MOE_JIT_EXPORT Expected<LayerDesc> parseLayerDesc(std::string_view spec);
/// The spelling parseLayerDesc reads, every key written.
MOE_JIT_EXPORT std::string toString(const LayerDesc &layer);

/// The MLIR module compileLayer compiles: one public function
/// `@<function>` holding a moe.blockwise_bwd with the layer's shapes and
/// attributes, its arguments and results the op's operands and results.
/// Fails with the op verifier's message when the layer is invalid.
MOE_JIT_EXPORT Expected<std::string>
layerToMLIR(const LayerDesc &layer,
            const std::string &function = "moe_layer_bwd");

//===----------------------------------------------------------------------===//
// Routing helpers
//===----------------------------------------------------------------------===//

/// The blocked routing layout of a layer's inputs (SPEC section 4):
/// token_position_to_id [N*B] (-1 for padding) and block_to_expert [N].
struct RoutingLayout {
  std::vector<int32_t> tokenPositionToId;
  std::vector<int32_t> blockToExpert;
};

/// Builds the layout from a router's top-k expert indices `topkIdx` [T, K]
/// (row-major), deterministically (experts ascending, each expert's tokens
/// ascending, spare blocks at the end for expert E-1): what moe.route
/// computes, and what a layer of T tokens, E experts, top-K and block size B
/// takes. Errors (nothing returned) for sizes out of range (T, K >= 0;
/// E, B >= 1), a null `topkIdx` with T*K > 0, an index outside [0, E), or
/// an expert twice in a token's row, naming the token and k.
MOE_JIT_EXPORT Expected<RoutingLayout>
buildRouting(const int32_t *topkIdx, int64_t T, int64_t K, int64_t E,
             int64_t B);

/// The masked affinities [T*E] of a layer's inputs: a[t*E + idx[t,k]] =
/// scores[t,k], zero elsewhere. The indices are checked as buildRouting
/// checks them.
MOE_JIT_EXPORT Expected<std::vector<float>>
maskedAffinities(const int32_t *topkIdx, const float *topkScores, int64_t T,
                 int64_t K, int64_t E);

/// FP8 codes and E8M0 scale bytes of a matrix quantized along its rows.
struct MXQuantized {
  std::vector<uint8_t> codes;  ///< [rows, cols]
  std::vector<uint8_t> scales; ///< [rows, cols / 32]
};

/// MX-quantizes the row-major [rows, cols] matrix `values` in blocks of 32
/// consecutive elements of a row (cols a multiple of 32), with the element
/// type of `quant` (E4M3 or E5M2) and the scale rule `rule`: the reference
/// model's quantizer, whose numerics every lowering shares. What a layer
/// with weights=mx takes: wgu / wgu_scales from Wgu as rows E*H*2 of I,
/// wd / wd_scales from Wd as rows E*I of H. Errors for Quant::None, sizes
/// out of range, cols not a multiple of 32, or a null `values`.
MOE_JIT_EXPORT Expected<MXQuantized> quantizeMX(const float *values,
                                                int64_t rows, int64_t cols,
                                                Quant quant, ScaleRule rule);

//===----------------------------------------------------------------------===//
// Compiling and running
//===----------------------------------------------------------------------===//

/// Where compiled code runs. Host: everything on the CPU. Sm90a: the five
/// MX GEMMs (recompute, P1..P4; e4m3 or e5m2) as sm_90a kernels, the rest
/// where CompileOptions::gpuMode says. Compiling needs
/// libmoe_cuda_runtime.so (next to libMoeJIT.so, else on the loader's path)
/// and, for a cubin, ptxas (MOE_CUDA_ROOT, CUDA_ROOT, CUDA_HOME, CUDA_PATH,
/// /usr/local/cuda or PATH; without it the kernels are PTX that the driver
/// compiles), but no driver or GPU: the kernels are loaded at the
/// executable's first run. Running needs a CUDA driver and an sm_90 GPU;
/// their absence, a kernel the driver rejects and the first failing CUDA
/// call are the run's error (a failed load, of every later run too). Each
/// run releases its device memory. Sm90a ignores CompileOptions::fuse: its
/// pipelines always form the kernel regions (moe-fuse), from which the GEMM
/// kernels take their epilogues. Sm100a: the same for sm_100a (B200
/// class), the GEMMs on tcgen05.mma block_scale; compile-verified only, no
/// such GPU has run it (docs/numerics.md). Running it needs an sm_100 GPU:
/// elsewhere the driver refuses its kernels, the run's error. Sm120a: the
/// same for sm_120a (RTX 50 / RTX PRO 6000 class), the GEMMs on mma.sync
/// block_scale, compile-verified only too.
enum class Target { Host, Sm90a, Sm100a, Sm120a };
MOE_JIT_EXPORT const char *toString(Target target);
/// "host", "sm90a", "sm100a" or "sm120a" (also "sm_90a", "sm_100a",
/// "sm_120a").
MOE_JIT_EXPORT Expected<Target> parseTarget(std::string_view name);
/// Whether `target` runs kernels on a GPU.
inline bool isGPUTarget(Target target) { return target != Target::Host; }
/// The chip of a GPU target ("sm_90a", "sm_100a", "sm_120a"); empty for
/// Host.
MOE_JIT_EXPORT const char *chipOf(Target target);

/// Options of one compilation. Everything but sourceName is part of the
/// cache key.
struct CompileOptions {
  Target target = Target::Host;
  /// Run moe-fuse before lowering (the host result is the same either way).
  bool fuse = true;
  /// The function to run. Empty: the only public function of the module, or
  /// else the one public function holding a moe.blockwise_bwd.
  std::string entry;
  /// LLVM optimization level of the generated code, 0..3.
  int optLevel = 2;
  /// GPU targets: the MMA path of the GEMMs, "fp8", "bf16" or
  /// "bf16-operands"; empty for the chip's default (bf16-operands on sm_90a:
  /// each operand rounded to its MX values in bf16 by its own kernel, then
  /// bf16 wgmma; docs/results).
  std::string mmaPath;
  /// GPU targets: where the phases other than the MX GEMMs run and the
  /// buffers live. "resident": every phase on the GPU, every buffer in
  /// device memory (run copies the caller's buffers in and out around
  /// the call); "hybrid": the GEMMs on the GPU, the rest in host loops.
  /// Empty: resident unless the IR has a GEMM that runs on the host (bias,
  /// bf16 operands), which only the hybrid form handles.
  std::string gpuMode;
  /// GPU targets: the kernel choices, one field per entry of
  /// moe/Pipelines/KernelChoices.def (operandsBothAxes, tmaStore, ...).
  /// The entry gives the field's type and default, what it chooses and why
  /// its default is what it is; the field sets the GPU pipelines' option of
  /// the same name.
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  TYPE FIELD = DEFAULT;
#include "moe/Pipelines/KernelChoices.def"
  /// GPU targets: kernel configurations set by hand, in place of
  /// moe-gpu-kernel-config's choice (a tuner's sweep with one build): the
  /// GEMM's index among the GPU GEMMs after moe-decompose-bwd, in IR order
  /// (a layer's: 0 the recompute, 1 P1, 2 P2, 3 P3, 4 P4; with a checkpoint
  /// there is no recompute: 0 P1, 1 P2, ...), and the text of
  /// its `#moe.gemm_config`. convert-moe-to-nvgpu rejects a configuration
  /// the GEMM's kernel cannot take.
  std::vector<std::pair<unsigned, std::string>> gemmConfigs;
  /// GPU targets: also write each serialized kernel module into this
  /// directory (created if needed) as <module>.ptx or <module>.cubin, the
  /// artifacts of a chip this machine lacks. Empty: none. A compilation
  /// that writes them reads no cache.
  std::string kernelDir;
  /// The form of the kernels: "ptx", "cubin" (needs ptxas) or empty (cubin
  /// when ptxas is found, else PTX for the driver to compile).
  std::string kernelFormat;
  /// Buffer name in diagnostics ("file.mlir:3:7: error: ...").
  std::string sourceName = "<input>";
};

/// Sets kernel choices of `options` from their text: comma-separated
/// `OPTION=value` pairs, OPTION the option of an entry of
/// moe/Pipelines/KernelChoices.def ("weight-reuse=2,swap-weights=true"; the
/// names of the pipelines' options, which moe-run's flags set too), a bool's
/// value `true` or `false`, an int's a decimal integer in the entry's range.
/// Empty text sets nothing. An unknown option, a bad value or a pair without
/// `=` is an error, and then nothing is set.
MOE_JIT_EXPORT Status setKernelChoices(CompileOptions &options,
                                       std::string_view text);
/// Every kernel choice of `options` as setKernelChoices's text, in the
/// table's order ("operands-both-axes=true,...,round-reuse=3,..."):
/// setKernelChoices of it sets the same choices.
MOE_JIT_EXPORT std::string kernelChoicesToString(const CompileOptions &options);

/// How an Executable was obtained, and what it cost.
struct CompileInfo {
  enum class Source { Compiled, MemoryCache, DiskCache };
  Source source = Source::Compiled;
  /// Hex digest of the IR text, target, options and compiler build.
  std::string key;
  /// Wall-clock seconds: parsing and verification, the MLIR pipeline (0 on
  /// a disk-cache hit, which reloads the lowered module or the object code
  /// instead), LLVM code generation (on an object-code hit, loading it),
  /// and the whole call.
  double parseSeconds = 0, pipelineSeconds = 0, codegenSeconds = 0,
         totalSeconds = 0;
  /// GPU targets: the mode used, "resident" or "hybrid"; empty on the host.
  std::string gpuMode;
  /// The kernel files written to CompileOptions::kernelDir.
  std::vector<std::string> kernelFiles;
};

MOE_JIT_EXPORT const char *toString(CompileInfo::Source source);

/// What one Executable::run cost, in wall-clock seconds.
struct RunStats {
  /// The compiled function alone, without the argument checks and, for
  /// gpuMode resident, without the copies of the caller's buffers to and
  /// from device memory. Host time from its entry until its work is done on
  /// the device: the hybrid function synchronizes before it returns; the
  /// resident one returns with its work queued on the run's stream, and
  /// the time runs to the synchronization with that stream that follows
  /// the call.
  double callSeconds = 0;
  /// gpuMode resident: the device allocations and copies around the call.
  double copySeconds = 0;
};

/// A compiled function, ready to run. Cheap to copy (shared state); safe to
/// run from several threads at once on disjoint outputs (runs on a GPU
/// target take turns: the CUDA runtime's state is per process).
class MOE_JIT_EXPORT Executable {
public:
  struct Impl;
  Executable();
  ~Executable();
  Executable(const Executable &);
  Executable &operator=(const Executable &);

  const Signature &signature() const;
  Target target() const;
  const CompileInfo &compileInfo() const;

  /// The moe.blockwise_bwd layer of the entry function, when the function
  /// holds exactly one such op whose operands are its arguments and whose
  /// results it returns (what moe-run needs to make inputs and references).
  /// Otherwise an error saying why not.
  Expected<LayerDesc> layer() const;

  /// Runs on caller-owned buffers: `inputs` and `outputs` in signature
  /// order. Checks everything before writing anything: argument counts,
  /// null and misaligned pointers, dtypes, shapes, outputs overlapping
  /// other buffers, and, for a moe.blockwise_bwd entry, token ids in
  /// [-1, T), expert ids in [0, E) and the ordering of the routing layout.
  /// With gpuMode resident the buffers are copied to device memory first
  /// and the outputs back after the call. `stats`, when given, receives
  /// the times of the run.
  Status run(const std::vector<ConstTensorRef> &inputs,
             const std::vector<TensorRef> &outputs,
             RunStats *stats = nullptr) const;

  /// run() with the compiled function called `calls` times in a row on one
  /// copy of the buffers (gpuMode resident: the inputs copied to the device
  /// once, the outputs back once, after the last call), for timing what a
  /// caller whose buffers stay on the device pays per call. `callSeconds`
  /// receives each call's time (for a GPU target up to the synchronization
  /// with its stream); `stats` the copies and the last call.
  Status runRepeated(const std::vector<ConstTensorRef> &inputs,
                     const std::vector<TensorRef> &outputs, int64_t calls,
                     std::vector<double> &callSeconds,
                     RunStats *stats = nullptr) const;

  /// Runs a resident GPU executable (target Sm90a, gpuMode resident) on
  /// device buffers, queued on the caller's CUDA stream `stream` (a
  /// CUstream; null: the legacy default stream). Nothing is allocated
  /// outside the stream-ordered pool, nothing is copied and nothing
  /// synchronizes: the call returns with the backward queued, and the
  /// outputs are ready when `stream` has reached that point (the caller's
  /// next work on the stream, or its synchronization). The same checks as
  /// run() but the routing layout's contents, which are on the device:
  /// they must hold the layout contract (docs/host-api.md). Errors the
  /// driver reports while queuing come back here; a fault of a kernel is
  /// the stream's (the caller's next synchronization). Runs on different
  /// streams may overlap on the device; the queuing takes turns.
  /// `stats->callSeconds` is the queuing time.
  Status runOnDevice(const std::vector<ConstTensorRef> &inputs,
                     const std::vector<TensorRef> &outputs, void *stream,
                     RunStats *stats = nullptr) const;

private:
  friend class Compiler;
  std::shared_ptr<const Impl> impl_;
  CompileInfo info_;
};

/// The disk cache a Compiler uses unless told otherwise:
/// $MOE_MLIR_CACHE_DIR when set (empty: no disk cache), else
/// $XDG_CACHE_HOME/moe-mlir, else $HOME/.cache/moe-mlir, else none.
MOE_JIT_EXPORT std::string defaultCacheDir();

/// Options of a Compiler.
struct CompilerOptions {
  /// A directory for the disk cache (created on demand; empty: no disk
  /// cache). A later Compiler, in this process or another, given the same
  /// directory loads the object code stored for IR it has seen (same
  /// options, optimization level and host CPU; milliseconds), or else the
  /// lowered module (no MLIR pipeline, code generation again). By default
  /// defaultCacheDir(): the cache is on unless the environment turns it off.
  std::string cacheDir = defaultCacheDir();
  /// Keep compiled executables in memory, keyed like the disk cache.
  bool memoryCache = true;
};

/// Compiles modules and layers; owns the in-memory cache. Thread-safe.
class MOE_JIT_EXPORT Compiler {
public:
  explicit Compiler(CompilerOptions options = {});
  ~Compiler();
  Compiler(const Compiler &) = delete;
  Compiler &operator=(const Compiler &) = delete;

  /// Compiles MLIR text. Parse and verifier errors come back located
  /// (sourceName:line:col).
  Expected<Executable> compile(const std::string &mlirText,
                               const CompileOptions &options = {});
  /// Reads `path` and compiles it; sourceName defaults to `path`.
  Expected<Executable> compileFile(const std::string &path,
                                   CompileOptions options = {});
  /// Compiles layerToMLIR(layer).
  Expected<Executable> compileLayer(const LayerDesc &layer,
                                    const CompileOptions &options = {});

  /// Executables held by the in-memory cache.
  size_t memoryCacheSize() const;
  void clearMemoryCache();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace moe::jit

#endif // MOE_JIT_MOEJIT_H
