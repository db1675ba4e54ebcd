//===- moe-run.cpp - JIT runner of moe.blockwise_bwd layers ---------------===//
//
// Compiles a layer (a .mlir file holding a moe.blockwise_bwd, or a layer
// description on the command line) with the JIT API, runs it on seeded
// inputs (SPEC section 6) or inputs read from .npy files, and checks every
// output against the references R_mx and R_64 of lib/Reference:
//
//   layer --MoeJIT compile--> Executable --run--> outputs (poisoned first)
//   inputs --backwardMX / backward64--> references
//   table: rel. Frobenius error vs R_mx (gate: 2e-3) and R_64, unwritten
//          and NaN counts, PASS/FAIL; compile, run and reference times
//
// The last line is `moe-run: PASS` or `moe-run: FAIL`. Exit status: 0 when
// everything passes, 1 on a mismatch or an error in the input (IR, .npy,
// data), 2 on a bad command line.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "moe/JIT/MoeJIT.h"
#include "moe/Reference/BF16.h"
#include "moe/Reference/MX.h"
#include "moe/Reference/Model.h"
#include "moe/Reference/Npy.h"
#include "moe/Reference/Routing.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace jit = moe::jit;
namespace ref = moe::ref;
using moe::run::GemmDesc;
using moe::run::GemmInputs;
using moe::run::GemmSample;
using moe::run::gemmReference;
using moe::run::gemmToMLIR;
using moe::run::makeGemmInputs;
using moe::run::parseGemmDesc;

namespace {

/// A bad command line: exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Bad input (IR, files, data) or a failed compile or run: exit status 1.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// --help up to the flags of the kernel choices, which printHelp prints from
/// KernelChoices.def.
constexpr const char *kHelpHead = R"(usage: moe-run FILE.mlir [options]
       moe-run --layer SPEC [options]
       moe-run --gemm SPEC [options]

Compiles a moe.blockwise_bwd layer with the JIT, runs it, and compares
every output with the references R_mx (MX emulation; gate: relative
Frobenius error <= 2e-3, no NaN, every element written) and R_64 (fp64).

options:
  --layer SPEC         a layer description instead of FILE, e.g.
                       T=256,H=256,I=128,E=4,K=2,B=128,quant=e4m3,rule=rceil
                       keys: T H I E K B, act=swiglu|geglu,
                       affinity=on_i|on_h, quant=e4m3|e5m2|none,
                       rule=rceil|floor|floor_alt, clamp_gate=LO:HI,
                       clamp_up=LO:HI, bias=off|on|bf16|f32,
                       checkpoint=off|on|bf16|f32, dense=off|on,
                       dx=bf16|f32, dx_accumulate=f32|bf16,
                       weight_grads=f32|bf16, weights=bf16|mx
  --gemm SPEC          one GEMM of the backward alone instead of a layer:
                       M=..,N=..,K=..[,G=groups][,B=block][,kind=block|
                       expert][,quant=e4m3|e5m2|none][,rule=...]; both
                       operands MX-quantized along K, then moe.block_matmul
                       (C[M,N], rows in blocks of B, a weight [G,N,K]) or
                       moe.expert_matmul (C[G,M,N] over K slots); 16 rows
                       of C checked against the exact product in fp64;
                       prints TFLOPS = 2*M*N*K / median call
  --gemm-config ATTR   the GEMM's kernel configuration instead of the one
                       moe-gpu-kernel-config picks, e.g.
                       "#moe.gemm_config<mma = bf16_operands, tile = [128,
                       256, 64], mma_shape = [64, 256, 16], stages = 4,
                       warpgroups = [1, 2], registers = [40, 232]>"
  --gemm-config-at N=ATTR  FILE or --layer on a GPU target: GEMM N's kernel
                       configuration instead of the one moe-gpu-kernel-config
                       picks; N counts the GPU GEMMs after moe-decompose-bwd
                       in IR order (a layer's: 0 the recompute, 1 P1, 2 P2,
                       3 P3, 4 P4; with a checkpoint: 0 P1, 1 P2, ...);
                       once per GEMM
  --target T           host (default), sm90a, sm100a or sm120a (the last
                       two compile-verified only: running needs an sm_100 /
                       sm_120 GPU)
  --function NAME      the function to run (default: the one holding the
                       moe.blockwise_bwd)
  --seed S             seed of the generated inputs (default 0)
  --empty-experts N    the N highest experts receive no tokens
  --inputs DIR         read x.npy, dy.npy, affinities.npy, wgu.npy, wd.npy,
                       token_position_to_id.npy, block_to_expert.npy (and
                       bgu.npy, bd.npy, checkpoint.npy when used) instead;
                       values are rounded to the op's storage types (bf16
                       for biases and checkpoint, as the references hold
                       them) and pre-quantized weights are quantized here
  --outputs DIR        write every output as DIR/<name>.npy
  --no-fuse            skip moe-fuse in the host pipeline
  --cache-dir DIR      disk cache of object code and lowered modules
                       (default: $MOE_MLIR_CACHE_DIR, else
                       ~/.cache/moe-mlir; "" for none)
  --repeat N           run N times and report the fastest (default 1);
                       with N > 1 also the median, min and max call time;
                       sm90a resident: the buffers are copied to the device
                       once for all the runs
  --warmup W           run W times first, untimed (default 0)
  --times-json FILE    write every timed run's call, run and copy seconds
                       to FILE as JSON (for benchmark drivers)
  --mma-path P         sm90a: the MMA path of the GEMMs, fp8, bf16 or
                       bf16-operands (default: the target's, bf16-operands)
  --gpu-mode M         sm90a: resident (every phase on the GPU, buffers in
                       device memory) or hybrid (the GEMMs on the GPU, the
                       rest on the host); default resident unless the
                       layer has a bias or bf16 GEMMs (then hybrid)
  --opt-level N        LLVM optimization level of the generated code, 0..3
                       (default 2)
  --tolerance X        the gate on rel(R_mx) (default 2e-3, SPEC section 6)
  --check C            refs (default): compare with R_mx and R_64; none:
                       skip the references (layers too large for them on
                       a CPU) and check only that every element was
                       written and is not NaN; compare the --outputs with
                       `python3 -m moe_crosscheck torch-check` instead.
                       With --inputs, each file is read straight into the
                       buffer the function takes (f64 and f32 files
                       converted element by element), with no fp64 copy
  --print-layer-ir     print the module of --layer or --gemm and exit
  --compile-only       compile, print the compile line and exit: no
                       inputs, run or references (compile times of layers
                       too large to run here; sm90a needs no GPU for it)
  --emit F DIR         GPU targets: also write every kernel module into DIR
                       as F = ptx (<module>.ptx) or cubin (<module>.cubin,
                       needs ptxas): the artifacts of a chip this machine
                       lacks (e.g. --target=sm100a --compile-only)

GPU kernel choices: each flag sets one option of the GPU pipelines (the
pipelines of moe-opt take the same names); the outputs are the same bits
either way unless the option says otherwise.
)";

/// After the kernel choices of --help.
constexpr const char *kHelpTail = R"(
Options take their value as the next argument or after '='.
Exit status: 0 all outputs pass, 1 mismatch or input error, 2 usage error.
)";

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

struct Options {
  std::string file;
  std::string layerSpec;
  bool haveLayer = false;
  std::string gemmSpec;
  bool haveGemm = false;
  std::string gemmConfig;
  std::vector<std::pair<unsigned, std::string>> gemmConfigs;
  jit::Target target = jit::Target::Host;
  std::string function;
  uint64_t seed = 0;
  int64_t emptyExperts = 0;
  std::string inputsDir, outputsDir;
  std::string cacheDir = jit::defaultCacheDir();
  bool fuse = true;
  int64_t repeat = 1;
  int64_t warmup = 0;
  std::string timesJson;
  int optLevel = 2;
  std::string mmaPath;
  std::string gpuMode;
  /// The kernel choices (KernelChoices.def) in their CompileOptions fields,
  /// the flags' values over the defaults; run() compiles with them.
  jit::CompileOptions kernelChoices;
  double tolerance = 2e-3;
  bool compare = true;
  bool printLayerIR = false;
  bool compileOnly = false;
  /// --emit: the kernels' form and directory.
  std::string emitFormat, emitDir;
};

int64_t parseCount(const std::string &opt, const std::string &text, int64_t min,
                   int64_t max) {
  bool digits = !text.empty() &&
                text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  long long value = digits ? std::strtoll(text.c_str(), nullptr, 10) : -1;
  if (!digits || errno != 0 || value < min || value > max)
    throw UsageError("invalid value '" + text + "' for " + opt +
                     " (expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "])");
  return value;
}

/// The moe-run flag of a kernel choice: it sets the choice's field of
/// jit::CompileOptions.
struct KernelChoiceFlag {
  /// "--register-stores".
  const char *flag;
  /// An int's flag takes the value, a bool's none.
  bool takesValue;
  /// --help: what the flag sets, then what the option chooses.
  const char *help;
  /// Sets the field from the flag's value (a bool's: empty); throws
  /// UsageError for a bad value.
  void (*apply)(jit::CompileOptions &options, const std::string &value);
};

const KernelChoiceFlag kKernelChoiceFlags[] = {
#define MOE_KERNEL_CHOICE_BOOL(FIELD, OPTION, DEFAULT, PASSES, FLAG,           \
                               FLAG_SETS, DESC)                                \
  {FLAG, /*takesValue=*/false,                                                 \
   "sets " OPTION "=" #FLAG_SETS "; " OPTION " (default " #DEFAULT "): " DESC, \
   [](jit::CompileOptions &options, const std::string &) {                     \
     options.FIELD = FLAG_SETS;                                                \
   }},
#define MOE_KERNEL_CHOICE_INT(FIELD, OPTION, DEFAULT, PASSES, FLAG, MIN, MAX,  \
                              DESC)                                            \
  {FLAG, /*takesValue=*/true,                                                  \
   "sets " OPTION "=N, " #MIN " to " #MAX "; " OPTION " (default " #DEFAULT    \
   "): " DESC,                                                                 \
   [](jit::CompileOptions &options, const std::string &value) {                \
     options.FIELD = parseCount(FLAG, value, MIN, MAX);                        \
   }},
#include "moe/Pipelines/KernelChoices.def"
};

/// The kernel choice whose flag is `name`, or null.
const KernelChoiceFlag *findKernelChoiceFlag(const std::string &name) {
  for (const KernelChoiceFlag &choice : kKernelChoiceFlags)
    if (name == choice.flag)
      return &choice;
  return nullptr;
}

/// Prints one entry of --help: `name` in the first 23 columns (on a line of
/// its own when it does not fit), then `text` wrapped at 77 columns like
/// the entries of kHelpHead.
void printHelpEntry(const std::string &name, const std::string &text) {
  constexpr size_t indent = 23, width = 77;
  std::string line = "  " + name;
  if (line.size() + 2 > indent) {
    std::puts(line.c_str());
    line.clear();
  }
  line.resize(indent, ' ');
  bool empty = true;
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.find(' ', start), text.size());
    std::string word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty())
      continue;
    if (!empty && line.size() + 1 + word.size() > width) {
      std::puts(line.c_str());
      line.assign(indent, ' ');
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  std::puts(line.c_str());
}

/// Prints --help: kHelpHead, the flags of the kernel choices, kHelpTail.
void printHelp() {
  std::fputs(kHelpHead, stdout);
  for (const KernelChoiceFlag &choice : kKernelChoiceFlags)
    printHelpEntry(std::string(choice.flag) + (choice.takesValue ? " N" : ""),
                   choice.help);
  std::fputs(kHelpTail, stdout);
}

Options parseCommandLine(const std::vector<std::string> &args) {
  Options opts;
  std::map<std::string, bool> seen;
  const std::vector<std::string> withValue = {
      "--layer",         "--target",    "--function", "--seed",
      "--gemm",          "--gemm-config", "--gemm-config-at",
      "--empty-experts", "--inputs",    "--outputs",  "--cache-dir",
      "--repeat",        "--opt-level", "--tolerance", "--mma-path",
      "--check",         "--gpu-mode",  "--warmup",   "--times-json",
      "--emit"};
  const std::vector<std::string> flags = {"--no-fuse", "--print-layer-ir",
                                          "--compile-only"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg.compare(0, 2, "--") != 0) {
      if (!opts.file.empty())
        throw UsageError("more than one input file ('" + opts.file + "' and '" +
                         arg + "')");
      opts.file = arg;
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const KernelChoiceFlag *choice = findKernelChoiceFlag(name);
    bool takesValue = choice && choice->takesValue, known = choice != nullptr;
    for (const std::string &o : withValue)
      if (o == name)
        known = takesValue = true;
    for (const std::string &o : flags)
      if (o == name)
        known = true;
    if (!known)
      throw UsageError("unknown option '" + name + "' (see moe-run --help)");
    // --gemm-config-at is given once per GEMM.
    if (seen[name] && name != "--gemm-config-at")
      throw UsageError("option " + name + " given twice");
    seen[name] = true;
    std::string value;
    if (!takesValue) {
      if (eq != std::string::npos)
        throw UsageError("option " + name + " takes no value");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= args.size())
        throw UsageError("missing value for " + name);
      value = args[++i];
      // `--layer --seed 1`: the next option is not this one's value.
      if (value.compare(0, 2, "--") == 0)
        throw UsageError("missing value for " + name + " (got the option '" +
                         value + "')");
    }
    // Only the cache folder has a meaning when empty (no disk cache).
    if (takesValue && value.empty() && name != "--cache-dir")
      throw UsageError("empty value for " + name);
    if (name == "--emit") {
      if (value != "ptx" && value != "cubin")
        throw UsageError("invalid kernel format '" + value +
                         "' for --emit (expected ptx or cubin)");
      if (i + 1 >= args.size() || args[i + 1].compare(0, 2, "--") == 0)
        throw UsageError("missing directory for --emit " + value);
      opts.emitFormat = value;
      opts.emitDir = args[++i];
    } else if (name == "--gemm") {
      opts.gemmSpec = value;
      opts.haveGemm = true;
    } else if (name == "--gemm-config") {
      opts.gemmConfig = value;
    } else if (name == "--gemm-config-at") {
      size_t sep = value.find('=');
      if (sep == std::string::npos || sep + 1 == value.size())
        throw UsageError("invalid value '" + value +
                         "' for --gemm-config-at (expected N=ATTR)");
      unsigned index = static_cast<unsigned>(parseCount(
          "--gemm-config-at", value.substr(0, sep), 0, 1 << 20));
      for (const auto &[seenIndex, config] : opts.gemmConfigs)
        if (seenIndex == index)
          throw UsageError("--gemm-config-at sets GEMM " +
                           std::to_string(index) + " twice");
      opts.gemmConfigs.push_back({index, value.substr(sep + 1)});
    } else if (name == "--layer") {
      opts.layerSpec = value;
      opts.haveLayer = true;
    } else if (name == "--target") {
      jit::Expected<jit::Target> target = jit::parseTarget(value);
      if (!target)
        throw UsageError(target.message());
      opts.target = *target;
    } else if (name == "--function") {
      opts.function = value;
    } else if (name == "--seed") {
      if (value.empty() ||
          value.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("invalid seed '" + value + "' for --seed");
      errno = 0;
      opts.seed = std::strtoull(value.c_str(), nullptr, 10);
      if (errno != 0)
        throw UsageError("seed '" + value + "' is out of range");
    } else if (name == "--empty-experts") {
      opts.emptyExperts = parseCount(name, value, 0, 1 << 20);
    } else if (name == "--inputs") {
      opts.inputsDir = value;
    } else if (name == "--outputs") {
      opts.outputsDir = value;
    } else if (name == "--cache-dir") {
      opts.cacheDir = value;
    } else if (name == "--repeat") {
      opts.repeat = parseCount(name, value, 1, 1000);
    } else if (name == "--warmup") {
      opts.warmup = parseCount(name, value, 0, 1000);
    } else if (name == "--times-json") {
      opts.timesJson = value;
    } else if (name == "--tolerance") {
      errno = 0;
      char *end = nullptr;
      opts.tolerance = value.empty() ? -1 : std::strtod(value.c_str(), &end);
      if (value.empty() || errno != 0 || *end != '\0' ||
          !(opts.tolerance >= 0) || !std::isfinite(opts.tolerance))
        throw UsageError("invalid value '" + value +
                         "' for --tolerance (expected a number >= 0)");
    } else if (name == "--check") {
      if (value != "refs" && value != "none")
        throw UsageError("invalid value '" + value +
                         "' for --check (expected refs or none)");
      opts.compare = value == "refs";
    } else if (name == "--mma-path") {
      if (value != "fp8" && value != "bf16" && value != "bf16-operands" &&
          value != "block-scale")
        throw UsageError("invalid MMA path '" + value +
                         "' for --mma-path (expected fp8, bf16, "
                         "bf16-operands or block-scale)");
      opts.mmaPath = value;
    } else if (name == "--gpu-mode") {
      if (value != "resident" && value != "hybrid")
        throw UsageError("invalid GPU mode '" + value +
                         "' for --gpu-mode (expected resident or hybrid)");
      opts.gpuMode = value;
    } else if (name == "--opt-level") {
      opts.optLevel = static_cast<int>(parseCount(name, value, 0, 3));
    } else if (name == "--no-fuse") {
      opts.fuse = false;
    } else if (name == "--print-layer-ir") {
      opts.printLayerIR = true;
    } else if (name == "--compile-only") {
      opts.compileOnly = true;
    } else if (choice) {
      choice->apply(opts.kernelChoices, value);
    }
  }
  int sources = !opts.file.empty() + opts.haveLayer + opts.haveGemm;
  if (sources != 1)
    throw UsageError(sources
                         ? "give one of FILE.mlir, --layer and --gemm"
                         : "no input: give FILE.mlir, --layer SPEC or --gemm "
                           "SPEC (see moe-run --help)");
  if (opts.printLayerIR && opts.file.size())
    throw UsageError("--print-layer-ir needs --layer or --gemm");
  if (!opts.gemmConfig.empty() && !opts.haveGemm)
    throw UsageError("--gemm-config needs --gemm");
  if (!opts.gemmConfigs.empty() && opts.haveGemm)
    throw UsageError("--gemm-config-at applies to FILE.mlir and --layer "
                     "(--gemm takes --gemm-config)");
  if (!opts.gemmConfigs.empty() && !jit::isGPUTarget(opts.target))
    throw UsageError("--gemm-config-at applies to GPU targets (--target "
                     "sm90a, sm100a or sm120a)");
  if (opts.haveGemm &&
      (!opts.inputsDir.empty() || !opts.outputsDir.empty() ||
       opts.emptyExperts || !opts.function.empty()))
    throw UsageError("--gemm makes its own inputs: --inputs, --outputs, "
                     "--empty-experts and --function do not apply");
  if (!opts.inputsDir.empty() && opts.emptyExperts > 0)
    throw UsageError("--empty-experts applies to generated inputs, not to "
                     "--inputs");
  if (!opts.emitDir.empty() && !jit::isGPUTarget(opts.target))
    throw UsageError("--emit applies to GPU targets (--target sm90a, sm100a "
                     "or sm120a)");
  return opts;
}

//===----------------------------------------------------------------------===//
// Layer and reference configuration
//===----------------------------------------------------------------------===//

/// The reference's view of a layer description.
ref::LayerConfig referenceConfig(const jit::LayerDesc &layer) {
  ref::LayerConfig cfg;
  cfg.T = layer.T;
  cfg.H = layer.H;
  cfg.I = layer.I;
  cfg.E = layer.E;
  cfg.K = layer.K;
  cfg.B = layer.B;
  cfg.act = layer.act == jit::Activation::SwiGLU ? ref::Activation::SwiGLU
                                                 : ref::Activation::GeGLU;
  cfg.affinity = layer.affinity == jit::AffinityPlacement::OnI
                     ? ref::AffinityPlacement::OnI
                     : ref::AffinityPlacement::OnH;
  cfg.quant.enabled = layer.quant != jit::Quant::None;
  cfg.quant.elem =
      layer.quant == jit::Quant::E5M2 ? ref::MXElem::E5M2 : ref::MXElem::E4M3;
  cfg.quant.rule = layer.rule == jit::ScaleRule::RCeil ? ref::ScaleRule::RCeil
                   : layer.rule == jit::ScaleRule::Floor
                       ? ref::ScaleRule::Floor
                       : ref::ScaleRule::FloorAlt;
  cfg.clamp.gateLo = layer.gateLo;
  cfg.clamp.gateHi = layer.gateHi;
  cfg.clamp.upLo = layer.upLo;
  cfg.clamp.upHi = layer.upHi;
  cfg.bias = layer.bias;
  cfg.checkpoint = layer.checkpoint;
  cfg.dense = layer.dense;
  cfg.dxAccumulate = layer.dxAccumulate == jit::DxAccumulate::F32
                         ? ref::DxAccumulate::F32
                         : ref::DxAccumulate::BF16;
  cfg.dxF32 = layer.dxF32;
  cfg.weightGradBF16 = layer.weightGradBF16;
  return cfg;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// A caller-owned tensor buffer (8-byte aligned storage).
struct Buffer {
  jit::TensorSpec spec;
  std::vector<uint64_t> storage;

  explicit Buffer(const jit::TensorSpec &s)
      : spec(s), storage((s.numBytes() + 7) / 8) {}
  uint8_t *bytes() { return reinterpret_cast<uint8_t *>(storage.data()); }
  const uint8_t *bytes() const {
    return reinterpret_cast<const uint8_t *>(storage.data());
  }
  size_t numBytes() const { return spec.numBytes(); }
};

/// One zeroed buffer per input of `sig`, in order.
std::vector<Buffer> inputBuffers(const jit::Signature &sig) {
  std::vector<Buffer> buffers;
  for (const jit::TensorSpec &spec : sig.inputs)
    buffers.emplace_back(spec);
  return buffers;
}

/// The buffer named `name`, or null.
Buffer *findBuffer(std::vector<Buffer> &buffers, const char *name) {
  for (Buffer &b : buffers)
    if (b.spec.name == name)
      return &b;
  return nullptr;
}

/// Poison patterns: signaling NaNs, which no arithmetic produces, so an
/// element still holding one was never written.
constexpr uint32_t kPoisonF32 = 0x7FA5A5A5u;
constexpr uint16_t kPoisonBF16 = 0x7FA5u;

void poison(Buffer &buffer) {
  int64_t n = buffer.spec.numElements();
  if (buffer.spec.dtype == jit::DType::BF16) {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(buffer.bytes() + 2 * i, &kPoisonBF16, 2);
  } else {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(buffer.bytes() + 4 * i, &kPoisonF32, 4);
  }
}

/// Fills a float-typed input buffer from fp64 values, rounding to its
/// storage type; returns the stored values (what the references get).
std::vector<double> storeFloats(Buffer &buffer,
                                const std::vector<double> &values) {
  std::vector<double> stored(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (buffer.spec.dtype == jit::DType::BF16) {
      uint16_t bits = ref::bf16FromFloat(ref::roundToBF16(values[i]));
      std::memcpy(buffer.bytes() + 2 * i, &bits, 2);
      stored[i] = ref::floatFromBF16(bits);
    } else {
      float f = static_cast<float>(values[i]);
      std::memcpy(buffer.bytes() + 4 * i, &f, 4);
      stored[i] = f;
    }
  }
  return stored;
}

void storeInts(Buffer &buffer, const std::vector<int32_t> &values) {
  std::memcpy(buffer.bytes(), values.data(), values.size() * 4);
}

/// MX-quantizes expert `e` of a weight [E, rows, cols] along its last axis
/// (cols), the axis its phase contracts: codes into `codes`, E8M0 scales
/// into `scales`.
ref::MXMatrix storeQuantizedExpert(Buffer &codes, Buffer &scales,
                                   const float *matrix, int64_t e,
                                   int64_t rows, int64_t cols,
                                   ref::MXElem elem, ref::ScaleRule rule) {
  int64_t per = rows * cols, scalesPer = rows * (cols / ref::kMXBlock);
  ref::MXMatrix q = ref::quantizeMatrix(matrix, rows, cols, 1, elem, rule);
  std::memcpy(codes.bytes() + e * per, q.codes.data(), per);
  std::memcpy(scales.bytes() + e * scalesPer, q.scales.data(), scalesPer);
  return q;
}

/// Pre-quantizes a weight [E, rows, cols] expert by expert. Returns the
/// dequantized values, which the references then use.
std::vector<double> storeQuantized(Buffer &codes, Buffer &scales,
                                   const std::vector<double> &values, int64_t E,
                                   int64_t rows, int64_t cols, ref::MXElem elem,
                                   ref::ScaleRule rule) {
  std::vector<double> dequantized(values.size());
  int64_t per = rows * cols;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<float> matrix(values.begin() + e * per,
                              values.begin() + (e + 1) * per);
    std::vector<float> d = storeQuantizedExpert(codes, scales, matrix.data(),
                                                e, rows, cols, elem, rule)
                               .dequantize();
    for (int64_t i = 0; i < per; ++i)
      dequantized[e * per + i] = d[i];
  }
  return dequantized;
}

/// An output's count of elements still poisoned and of NaNs among the
/// written ones, and with `keepValues` its fp64 values (poisoned ones read
/// as 0) for the comparison with the references: 8 bytes an element, which
/// --check none must not pay.
struct OutputValues {
  std::vector<double> values;
  int64_t unwritten = 0, nans = 0;
};

OutputValues readOutput(const Buffer &buffer, bool keepValues) {
  OutputValues out;
  int64_t n = buffer.spec.numElements();
  if (keepValues)
    out.values.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    double v;
    bool poisoned;
    if (buffer.spec.dtype == jit::DType::BF16) {
      uint16_t bits;
      std::memcpy(&bits, buffer.bytes() + 2 * i, 2);
      poisoned = bits == kPoisonBF16;
      v = ref::floatFromBF16(bits);
    } else {
      uint32_t bits;
      std::memcpy(&bits, buffer.bytes() + 4 * i, 4);
      poisoned = bits == kPoisonF32;
      float f;
      std::memcpy(&f, &bits, 4);
      v = f;
    }
    if (poisoned) {
      ++out.unwritten;
      v = 0;
    } else if (std::isnan(v)) {
      ++out.nans;
    }
    if (keepValues)
      out.values[i] = v;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

std::string joinPath(const std::string &dir, const std::string &name) {
  return (std::filesystem::path(dir) / name).string();
}

/// Checks the dtype class and shape of `path`, the file of input `spec`,
/// against `shape` (what the file must hold).
void checkInput(const std::string &path, ref::NpyType type,
                const std::vector<int64_t> &fileShape,
                const jit::TensorSpec &spec, const std::vector<int64_t> &shape,
                const std::string &where, bool integer) {
  bool isInt = type == ref::NpyType::I32;
  bool isFloat = type == ref::NpyType::F64 || type == ref::NpyType::F32 ||
                 type == ref::NpyType::BF16;
  if (integer && !isInt)
    throw DataError(path + ": expected an int32 array ('<i4')");
  if (!integer && !isFloat)
    throw DataError(path + ": expected a float array (f64, f32 or bf16)");
  // Affinities may be stored flat [T*E] or as the [T, E] matrix.
  bool matches = fileShape == shape;
  if (!matches && spec.name == "affinities" && shape.size() == 1 &&
      fileShape.size() == 2)
    matches = fileShape[0] * fileShape[1] == shape[0];
  if (!matches)
    throw DataError(path + ": shape " + jit::shapeToString(fileShape) +
                    " does not match " + jit::shapeToString(shape) + " of " +
                    spec.name + " in " + where);
}

/// Reads DIR/<name>.npy for input `spec`, checking dtype class and shape.
ref::NpyArray readInput(const std::string &dir, const jit::TensorSpec &spec,
                        const std::vector<int64_t> &shape,
                        const std::string &where, bool integer) {
  std::string path = joinPath(dir, spec.name + ".npy");
  ref::NpyArray array;
  std::string error;
  if (!ref::readNpy(path, array, error))
    throw DataError(error);
  checkInput(path, array.type, array.shape, spec, shape, where, integer);
  return array;
}

/// The shape of the file of input `spec`. Weights are read as values in
/// the layer's shapes whether the function takes them as bf16 or as
/// pre-quantized codes (quantized here).
std::vector<int64_t> fileShape(const jit::TensorSpec &spec,
                               const ref::LayerConfig &cfg) {
  if (spec.name == "wgu")
    return {cfg.E, cfg.H, 2, cfg.I};
  if (spec.name == "wd")
    return {cfg.E, cfg.I, cfg.H};
  return spec.shape;
}

/// The layer's inputs: generated per SPEC section 6, or read from DIR.
ref::LayerInputs makeLayerInputs(const Options &opts, const jit::Signature &sig,
                                 const ref::LayerConfig &cfg,
                                 const std::string &where) {
  if (opts.inputsDir.empty()) {
    if (opts.emptyExperts > 0 && cfg.dense)
      throw UsageError("--empty-experts does not apply to a dense layer");
    if (cfg.K > cfg.E - opts.emptyExperts)
      throw UsageError("--empty-experts " + std::to_string(opts.emptyExperts) +
                       " leaves fewer than K=" + std::to_string(cfg.K) +
                       " experts to route to");
    return ref::makeInputs(cfg, opts.seed, opts.emptyExperts);
  }
  ref::LayerInputs in;
  for (const jit::TensorSpec &spec : sig.inputs) {
    const std::string &name = spec.name;
    if (name == "wgu_scales" || name == "wd_scales")
      continue; // derived from the weights
    bool integer = spec.dtype == jit::DType::I32;
    ref::NpyArray array = readInput(opts.inputsDir, spec, fileShape(spec, cfg),
                                    where, integer);
    if (name == "token_position_to_id")
      in.routing.tokenPositionToId = array.toInt32();
    else if (name == "block_to_expert")
      in.routing.blockToExpert = array.toInt32();
    else if (name == "x")
      in.x = array.toDouble();
    else if (name == "dy")
      in.dy = array.toDouble();
    else if (name == "affinities")
      in.affinities = array.toDouble();
    else if (name == "wgu")
      in.wgu = array.toDouble();
    else if (name == "wd")
      in.wd = array.toDouble();
    else if (name == "bgu")
      in.bgu = array.toDouble();
    else if (name == "bd")
      in.bd = array.toDouble();
    else if (name == "checkpoint")
      in.checkpoint = array.toDouble();
  }
  return in;
}

/// Fills the input buffers in signature order; rounds `in` to what the
/// buffers hold, so that the references see the kernel's inputs.
std::vector<Buffer> packInputs(const jit::Signature &sig,
                               const ref::LayerConfig &cfg,
                               const jit::LayerDesc &layer,
                               ref::LayerInputs &in) {
  // The references hold biases and the checkpoint as bf16 values whatever
  // their storage type, so f32-stored ones get bf16 values too (generated
  // inputs already are).
  for (std::vector<double> *values : {&in.bgu, &in.bd, &in.checkpoint})
    for (double &v : *values)
      v = ref::roundToBF16(v);
  std::vector<Buffer> buffers = inputBuffers(sig);
  auto find = [&](const char *name) { return findBuffer(buffers, name); };
  for (Buffer &b : buffers) {
    const std::string &name = b.spec.name;
    if (name == "x")
      in.x = storeFloats(b, in.x);
    else if (name == "dy")
      in.dy = storeFloats(b, in.dy);
    else if (name == "affinities")
      in.affinities = storeFloats(b, in.affinities);
    else if (name == "token_position_to_id")
      storeInts(b, in.routing.tokenPositionToId);
    else if (name == "block_to_expert")
      storeInts(b, in.routing.blockToExpert);
    else if (name == "checkpoint")
      in.checkpoint = storeFloats(b, in.checkpoint);
    else if (name == "bgu")
      in.bgu = storeFloats(b, in.bgu);
    else if (name == "bd")
      in.bd = storeFloats(b, in.bd);
    else if (name == "wgu" && !layer.prequantizedWeights)
      in.wgu = storeFloats(b, in.wgu);
    else if (name == "wd" && !layer.prequantizedWeights)
      in.wd = storeFloats(b, in.wd);
  }
  if (layer.prequantizedWeights) {
    // Round to bf16 first (the weights' source type), then quantize along
    // 2I (Wgu[e] as [H, 2I]) and H (Wd[e] as [I, H]).
    for (double &v : in.wgu)
      v = ref::roundToBF16(v);
    for (double &v : in.wd)
      v = ref::roundToBF16(v);
    in.wgu = storeQuantized(*find("wgu"), *find("wgu_scales"), in.wgu, cfg.E,
                            cfg.H, 2 * cfg.I, cfg.quant.elem, cfg.quant.rule);
    in.wd = storeQuantized(*find("wd"), *find("wd_scales"), in.wd, cfg.E, cfg.I,
                           cfg.H, cfg.quant.elem, cfg.quant.rule);
  }
  return buffers;
}

//===----------------------------------------------------------------------===//
// Inputs without references
//===----------------------------------------------------------------------===//

/// The data of a .npy file whose header readNpyHeader checked, read in
/// order into the caller's storage: the files go straight into the buffers
/// the function takes, with no copy of a whole file beside them.
class NpyReader {
public:
  NpyReader(const std::string &path, const ref::NpyHeader &header)
      : path(path), type(header.type), file(path, std::ios::binary) {
    file.seekg(static_cast<std::streamoff>(header.dataOffset));
    if (!file)
      throw DataError(path + ": read error");
  }

  void read(uint8_t *dest, size_t bytes) {
    file.read(reinterpret_cast<char *>(dest),
              static_cast<std::streamsize>(bytes));
    if (!file)
      throw DataError(path + ": read error");
  }

  /// Reads `count` float elements into `dest` as `to` (bf16 or f32),
  /// rounding each as storeFloats does, so that a file of another float
  /// type gives the buffer the fp64 path would; with `bf16Values` first to
  /// a bf16 value, as packInputs rounds biases and the checkpoint.
  void readFloats(uint8_t *dest, int64_t count, jit::DType to,
                  bool bf16Values) {
    size_t size = jit::byteSize(to);
    if ((type == ref::NpyType::BF16 && to == jit::DType::BF16) ||
        (type == ref::NpyType::F32 && to == jit::DType::F32 && !bf16Values))
      return read(dest, count * size);
    // Anything else is converted a chunk at a time: an f64 file would
    // otherwise cost four times its bf16 buffer.
    constexpr int64_t kChunk = 1 << 16;
    size_t from = ref::npyElementSize(type);
    std::vector<uint8_t> chunk(kChunk * from);
    for (int64_t done = 0; done < count; done += kChunk) {
      int64_t n = std::min(kChunk, count - done);
      read(chunk.data(), n * from);
      for (int64_t i = 0; i < n; ++i) {
        double v = valueAt(chunk.data() + i * from);
        if (bf16Values)
          v = ref::roundToBF16(v);
        uint8_t *p = dest + (done + i) * size;
        if (to == jit::DType::BF16) {
          uint16_t bits = ref::bf16FromFloat(ref::roundToBF16(v));
          std::memcpy(p, &bits, 2);
        } else {
          float f = static_cast<float>(v);
          std::memcpy(p, &f, 4);
        }
      }
    }
  }

private:
  std::string path;
  ref::NpyType type;
  std::ifstream file;

  /// One element of a float file (checkInput admits only these types).
  double valueAt(const uint8_t *p) const {
    if (type == ref::NpyType::F64) {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    if (type == ref::NpyType::F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return ref::floatFromBF16(bits);
  }
};

/// The values of a float input buffer (bf16 or f32) as fp64.
std::vector<double> floatValues(const Buffer &buffer) {
  std::vector<double> values(buffer.spec.numElements());
  for (size_t i = 0; i < values.size(); ++i) {
    if (buffer.spec.dtype == jit::DType::BF16) {
      uint16_t bits;
      std::memcpy(&bits, buffer.bytes() + 2 * i, 2);
      values[i] = ref::floatFromBF16(bits);
    } else {
      float f;
      std::memcpy(&f, buffer.bytes() + 4 * i, 4);
      values[i] = f;
    }
  }
  return values;
}

/// Names each float input (bf16 or f32) holding NaN or Inf: their count
/// and the first one's element index, on stdout before the run. The run
/// still happens (SPEC section 5: NaN propagates), so its outputs' NaN
/// counts can be traced to the input that carried them.
void reportNonFiniteInputs(const std::vector<Buffer> &inputs) {
  for (const Buffer &b : inputs) {
    if (b.spec.dtype != jit::DType::BF16 && b.spec.dtype != jit::DType::F32)
      continue;
    int64_t count = 0, first = -1;
    int64_t n = b.spec.numElements();
    for (int64_t i = 0; i < n; ++i) {
      float f;
      if (b.spec.dtype == jit::DType::BF16) {
        uint16_t bits;
        std::memcpy(&bits, b.bytes() + 2 * i, 2);
        f = ref::floatFromBF16(bits);
      } else {
        std::memcpy(&f, b.bytes() + 4 * i, 4);
      }
      if (!std::isfinite(f) && count++ == 0)
        first = i;
    }
    if (count)
      std::printf("moe-run: input '%s' holds %lld non-finite values (NaN or "
                  "Inf), the first at element %lld\n",
                  b.spec.name.c_str(), static_cast<long long>(count),
                  static_cast<long long>(first));
  }
}

/// --inputs with --check none: reads every file straight into the buffer
/// the function takes, with the checks and roundings of makeLayerInputs,
/// packInputs and ref::validate but without their fp64 copies (8 bytes an
/// element: ~187 GB at the benchmark's largest layer). Files of any float
/// type are accepted, as on the fp64 path, and converted element by element.
std::vector<Buffer> readInputBuffers(const Options &opts,
                                     const jit::Signature &sig,
                                     const ref::LayerConfig &cfg,
                                     const jit::LayerDesc &layer,
                                     const std::string &where) {
  std::vector<Buffer> buffers = inputBuffers(sig);
  auto find = [&](const char *name) { return findBuffer(buffers, name); };
  for (Buffer &b : buffers) {
    const std::string &name = b.spec.name;
    if (name == "wgu_scales" || name == "wd_scales")
      continue; // written with the codes
    std::string path = joinPath(opts.inputsDir, name + ".npy");
    ref::NpyHeader header;
    std::string error;
    if (!ref::readNpyHeader(path, header, error))
      throw DataError(error);
    bool integer = b.spec.dtype == jit::DType::I32;
    checkInput(path, header.type, header.shape, b.spec, fileShape(b.spec, cfg),
               where, integer);
    NpyReader reader(path, header);
    if (integer) {
      reader.read(b.bytes(), b.numBytes());
    } else if ((name == "wgu" || name == "wd") && layer.prequantizedWeights) {
      // As packInputs: round to bf16 (the weights' source type), then
      // quantize each expert along its contraction axis; one expert's
      // values at a time.
      bool gateUp = name == "wgu";
      int64_t rows = gateUp ? cfg.H : cfg.I;
      int64_t cols = gateUp ? 2 * cfg.I : cfg.H;
      Buffer &scales = *find(gateUp ? "wgu_scales" : "wd_scales");
      std::vector<float> matrix(rows * cols);
      for (int64_t e = 0; e < cfg.E; ++e) {
        reader.readFloats(reinterpret_cast<uint8_t *>(matrix.data()),
                          rows * cols, jit::DType::F32, /*bf16Values=*/true);
        storeQuantizedExpert(b, scales, matrix.data(), e, rows, cols,
                             cfg.quant.elem, cfg.quant.rule);
      }
    } else {
      bool bf16Values = name == "bgu" || name == "bd" || name == "checkpoint";
      reader.readFloats(b.bytes(), b.spec.numElements(), b.spec.dtype,
                        bf16Values);
    }
  }

  // The routing checks of ref::validate; the shapes were checked above.
  ref::Routing routing;
  std::vector<double> affinities;
  auto ints = [&](const char *name) {
    std::vector<int32_t> values;
    if (Buffer *b = find(name)) {
      values.resize(b->spec.numElements());
      std::memcpy(values.data(), b->bytes(), b->numBytes());
    }
    return values;
  };
  routing.tokenPositionToId = ints("token_position_to_id");
  routing.blockToExpert = ints("block_to_expert");
  if (Buffer *b = find("affinities"))
    affinities = floatValues(*b);
  std::string problem = ref::validateRouting(cfg, routing, affinities);
  if (!problem.empty())
    throw DataError(opts.inputsDir + ": invalid layer inputs: " + problem);
  return buffers;
}

/// A checksum of a buffer's bytes, which tells whether a run modified an
/// input without a copy of every input. Each step is a bijection of the
/// state for a given word, so a change of one word always shows.
uint64_t checksum(const Buffer &buffer) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t word : buffer.storage) {
    h ^= word;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

const std::vector<double> *referenceOutput(const ref::LayerGrads &grads,
                                           const std::string &name) {
  if (name == "dx")
    return &grads.dx;
  if (name == "da")
    return &grads.da;
  if (name == "dwgu")
    return &grads.dwgu;
  if (name == "dwd")
    return &grads.dwd;
  if (name == "dbgu")
    return &grads.dbgu;
  if (name == "dbd")
    return &grads.dbd;
  return nullptr;
}

/// Seconds of each timed run: the compiled call, the whole run, and the
/// device copies around it.
struct RunTimes {
  std::vector<double> call, run, copy;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// --times-json: {"warmup": W, "repeat": N, "call_s": [...], "run_s": [...],
/// "copy_s": [...]}, one entry per timed run in run order.
void writeTimesJson(const std::string &path, int64_t warmup,
                    const RunTimes &times) {
  std::FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    throw DataError(path + ": cannot write: " + std::strerror(errno));
  auto list = [&](const char *key, const std::vector<double> &values) {
    std::fprintf(file, ", \"%s\": [", key);
    for (size_t i = 0; i < values.size(); ++i)
      std::fprintf(file, "%s%.9g", i ? ", " : "", values[i]);
    std::fprintf(file, "]");
  };
  std::fprintf(file, "{\"warmup\": %lld, \"repeat\": %zu",
               static_cast<long long>(warmup), times.call.size());
  list("call_s", times.call);
  list("run_s", times.run);
  list("copy_s", times.copy);
  std::fprintf(file, "}\n");
  if (std::fclose(file) != 0)
    throw DataError(path + ": cannot write: " + std::strerror(errno));
}

/// "compile: 1.234 s (compiled; parse ..., pipeline ..., codegen ...)".
void printCompileLine(double compileSeconds, const jit::CompileInfo &info) {
  std::printf("compile: %.3f s (%s; parse %.3f s, pipeline %.3f s, "
              "codegen %.3f s)\n",
              compileSeconds, jit::toString(info.source), info.parseSeconds,
              info.pipelineSeconds, info.codegenSeconds);
  if (!info.kernelFiles.empty())
    std::printf("kernels: %zu modules written (%s ... %s)\n",
                info.kernelFiles.size(), info.kernelFiles.front().c_str(),
                info.kernelFiles.back().c_str());
  std::fflush(stdout);
}

/// Runs `exe` --warmup + --repeat times, `outputs` poisoned before each
/// run, and returns the times of the timed runs (written to --times-json
/// when given). A failed run throws, after the compile line: the
/// compilation succeeded (on a GPU target even without a driver, which only
/// running needs), so its cost is reported before the run's error.
RunTimes timedRuns(const Options &opts, const jit::Executable &exe,
                   const std::vector<jit::ConstTensorRef> &inRefs,
                   const std::vector<jit::TensorRef> &outRefs,
                   std::vector<Buffer> &outputs, const std::string &where,
                   double compileSeconds) {
  RunTimes times;
  if (exe.compileInfo().gpuMode == "resident") {
    // The buffers are copied to the device once for all the runs, as a
    // caller whose buffers stay there has them (the copies took 6 s a run
    // at T=8192 H=7168 I=2048 E=256).
    for (Buffer &b : outputs)
      poison(b);
    std::vector<double> calls;
    jit::RunStats stats;
    jit::Status status = exe.runRepeated(inRefs, outRefs,
                                         opts.warmup + opts.repeat, calls,
                                         &stats);
    if (!status) {
      printCompileLine(compileSeconds, exe.compileInfo());
      throw DataError(where + ": run failed: " + status.message());
    }
    times.call.assign(calls.begin() + opts.warmup, calls.end());
    times.run = times.call;
    times.copy.assign(times.call.size(), stats.copySeconds);
    if (!opts.timesJson.empty())
      writeTimesJson(opts.timesJson, opts.warmup, times);
    return times;
  }
  for (int64_t r = 0; r < opts.warmup + opts.repeat; ++r) {
    for (Buffer &b : outputs)
      poison(b);
    Clock::time_point t0 = Clock::now();
    jit::RunStats stats;
    jit::Status status = exe.run(inRefs, outRefs, &stats);
    double t = seconds(t0, Clock::now());
    if (!status) {
      printCompileLine(compileSeconds, exe.compileInfo());
      throw DataError(where + ": run failed: " + status.message());
    }
    if (r < opts.warmup)
      continue;
    times.call.push_back(stats.callSeconds);
    times.run.push_back(t);
    times.copy.push_back(stats.copySeconds);
  }
  if (!opts.timesJson.empty())
    writeTimesJson(opts.timesJson, opts.warmup, times);
  return times;
}

//===----------------------------------------------------------------------===//
// --gemm: one GEMM alone (Gemm.h)
//===----------------------------------------------------------------------===//

int runGemm(const Options &opts, const jit::CompileOptions &compileOptions) {
  GemmDesc desc;
  if (std::string error = parseGemmDesc(opts.gemmSpec, desc); !error.empty())
    throw UsageError(error);
  std::string text = gemmToMLIR(desc, opts.gemmConfig);
  if (opts.printLayerIR) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  jit::Compiler compiler({opts.cacheDir, /*memoryCache=*/true});
  jit::CompileOptions options = compileOptions;
  options.sourceName = "--gemm";
  Clock::time_point compileStart = Clock::now();
  jit::Expected<jit::Executable> exe = compiler.compile(text, options);
  if (!exe)
    throw DataError(exe.message());
  double compileSeconds = seconds(compileStart, Clock::now());
  const jit::CompileInfo &info = exe->compileInfo();
  const jit::Signature &sig = exe->signature();
  std::string where = "--gemm (@" + sig.function + ")";
  if (opts.compileOnly) {
    std::printf("moe-run: %s, target %s, compile only\n", where.c_str(),
                jit::toString(opts.target));
    printCompileLine(compileSeconds, info);
    return 0;
  }

  GemmInputs in = makeGemmInputs(desc, opts.seed);
  std::vector<Buffer> inputs = inputBuffers(sig);
  if (inputs.size() != 3 || sig.outputs.size() != 1)
    throw DataError(where + ": unexpected signature");
  std::memcpy(inputs[0].bytes(), in.a.data(), 2 * in.a.size());
  std::memcpy(inputs[1].bytes(), in.b.data(), 2 * in.b.size());
  std::memcpy(inputs[2].bytes(), in.blocks.data(), 4 * in.blocks.size());
  std::vector<Buffer> outputs = {Buffer(sig.outputs[0])};
  Buffer &output = outputs[0];
  std::vector<jit::ConstTensorRef> inRefs;
  for (const Buffer &b : inputs)
    inRefs.push_back({b.bytes(), b.spec.dtype, b.spec.shape});
  std::vector<jit::TensorRef> outRefs = {
      {output.bytes(), output.spec.dtype, output.spec.shape}};
  RunTimes times = timedRuns(opts, *exe, inRefs, outRefs, outputs, where,
                             compileSeconds);

  // Sampled rows against the exact product; every element written, no NaN.
  OutputValues got = readOutput(output, /*keepValues=*/opts.compare);
  double rel = NAN;
  if (opts.compare) {
    double diff = 0, norm = 0;
    for (const GemmSample &sample : gemmReference(desc, in))
      for (size_t n = 0; n < sample.values.size(); ++n) {
        double e = got.values[sample.offset + n] - sample.values[n];
        diff += e * e;
        norm += sample.values[n] * sample.values[n];
      }
    rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  }
  bool pass = got.unwritten == 0 && got.nans == 0 &&
              (!opts.compare || rel <= opts.tolerance);
  std::printf("moe-run: %s, target %s, seed %llu\n", where.c_str(),
              jit::toString(opts.target),
              static_cast<unsigned long long>(opts.seed));
  std::printf("gemm: %s\n", desc.toString().c_str());
  std::printf("%-6s %-18s %-5s %11s %9s %5s  %s\n", "output", "shape",
              "dtype", "rel(exact)", "unwritten", "NaN", "status");
  char relText[32] = "-";
  if (opts.compare)
    std::snprintf(relText, sizeof(relText), "%.3e", rel);
  std::printf("%-6s %-18s %-5s %11s %9lld %5lld  %s\n",
              output.spec.name.c_str(),
              jit::shapeToString(output.spec.shape).c_str(),
              jit::toString(output.spec.dtype), relText,
              static_cast<long long>(got.unwritten),
              static_cast<long long>(got.nans), pass ? "PASS" : "FAIL");
  printCompileLine(compileSeconds, info);
  double best = *std::min_element(times.call.begin(), times.call.end());
  double typical = median(times.call);
  std::printf("timing: call median %.6f s, min %.6f s over %lld runs after "
              "%lld warm-up\n",
              typical, best, static_cast<long long>(opts.repeat),
              static_cast<long long>(opts.warmup));
  std::printf("gemm: %.1f TFLOPS (2*M*N*K / median call)%s\n",
              desc.flops() / typical * 1e-12,
              jit::isGPUTarget(opts.target)
                  ? ", the call including its operand kernels"
                  : "");
  std::printf("references: %s\n",
              opts.compare ? "16 sampled rows of the exact MX product (fp64)"
                           : "not computed (--check none)");
  std::printf("moe-run: %s\n", pass ? "PASS" : "FAIL");
  std::fflush(stdout);
  return pass ? 0 : 1;
}

int run(const Options &opts) {
  jit::Compiler compiler({opts.cacheDir, /*memoryCache=*/true});
  jit::CompileOptions compileOptions = opts.kernelChoices;
  compileOptions.target = opts.target;
  compileOptions.fuse = opts.fuse;
  compileOptions.entry = opts.function;
  compileOptions.optLevel = opts.optLevel;
  compileOptions.mmaPath = opts.mmaPath;
  compileOptions.gpuMode = opts.gpuMode;
  compileOptions.gemmConfigs = opts.gemmConfigs;
  compileOptions.kernelDir = opts.emitDir;
  compileOptions.kernelFormat = opts.emitFormat;
  if (opts.haveGemm)
    return runGemm(opts, compileOptions);

  std::string where = opts.file;
  Clock::time_point compileStart = Clock::now();
  jit::Expected<jit::Executable> exe = jit::Status::error("not compiled");
  if (opts.haveLayer) {
    jit::Expected<jit::LayerDesc> layer = jit::parseLayerDesc(opts.layerSpec);
    if (!layer)
      throw UsageError(layer.message());
    if (opts.printLayerIR) {
      jit::Expected<std::string> text = jit::layerToMLIR(*layer);
      if (!text)
        throw DataError(text.message());
      std::fputs(text->c_str(), stdout);
      return 0;
    }
    where = "--layer";
    exe = compiler.compileLayer(*layer, compileOptions);
  } else {
    exe = compiler.compileFile(opts.file, compileOptions);
  }
  if (!exe)
    throw DataError(exe.message());
  double compileSeconds = seconds(compileStart, Clock::now());
  const jit::CompileInfo &info = exe->compileInfo();
  const jit::Signature &sig = exe->signature();
  where += " (@" + sig.function + ")";
  if (opts.compileOnly) {
    std::printf("moe-run: %s, target %s, compile only\n", where.c_str(),
                jit::toString(opts.target));
    printCompileLine(compileSeconds, info);
    return 0;
  }

  jit::Expected<jit::LayerDesc> layer = exe->layer();
  if (!layer)
    throw DataError(where +
                    ": moe-run cannot make inputs for it: " + layer.message());
  ref::LayerConfig cfg = referenceConfig(*layer);

  // The references need every input in fp64; without them, files go
  // straight into the buffers (generated inputs are made in fp64 anyway).
  ref::LayerInputs in;
  std::vector<Buffer> inputs;
  if (!opts.compare && !opts.inputsDir.empty()) {
    inputs = readInputBuffers(opts, sig, cfg, *layer, where);
  } else {
    in = makeLayerInputs(opts, sig, cfg, where);
    inputs = packInputs(sig, cfg, *layer, in);
    std::string problem = ref::validate(cfg, in);
    if (!problem.empty())
      throw DataError((opts.inputsDir.empty() ? std::string("generated inputs")
                                              : opts.inputsDir) +
                      ": invalid layer inputs: " + problem);
  }

  reportNonFiniteInputs(inputs);

  std::vector<Buffer> outputs;
  for (const jit::TensorSpec &spec : sig.outputs)
    outputs.emplace_back(spec);
  std::vector<jit::ConstTensorRef> inRefs;
  for (const Buffer &b : inputs)
    inRefs.push_back({b.bytes(), b.spec.dtype, b.spec.shape});
  std::vector<jit::TensorRef> outRefs;
  for (Buffer &b : outputs)
    outRefs.push_back({b.bytes(), b.spec.dtype, b.spec.shape});
  std::vector<uint64_t> inputChecksums;
  for (const Buffer &b : inputs)
    inputChecksums.push_back(checksum(b));

  // The warm-up runs are not timed: the first run of a GPU target loads
  // its kernels and the first touches of memory fault pages in.
  RunTimes times = timedRuns(opts, *exe, inRefs, outRefs, outputs, where,
                             compileSeconds);
  // The fastest call and the copies of that run; the fastest run apart.
  size_t fastest = static_cast<size_t>(
      std::min_element(times.call.begin(), times.call.end()) -
      times.call.begin());
  double callSeconds = times.call[fastest], copySeconds = times.copy[fastest];
  double runSeconds = *std::min_element(times.run.begin(), times.run.end());

  Clock::time_point r0 = Clock::now();
  ref::LayerGrads rmx, r64;
  if (opts.compare)
    rmx = ref::backwardMX(cfg, in);
  Clock::time_point r1 = Clock::now();
  if (opts.compare)
    r64 = ref::backward64(cfg, in);
  Clock::time_point r2 = Clock::now();

  bool pass = true;
  std::printf("moe-run: %s, target %s, %s\n", where.c_str(),
              jit::toString(opts.target),
              opts.inputsDir.empty()
                  ? ("seed " + std::to_string(opts.seed) +
                     (opts.emptyExperts ? ", empty experts " +
                                              std::to_string(opts.emptyExperts)
                                        : std::string()))
                        .c_str()
                  : ("inputs " + opts.inputsDir).c_str());
  std::printf("layer: %s\n", jit::toString(*layer).c_str());
  std::printf("%-6s %-18s %-5s %11s %11s %9s %5s  %s\n", "output", "shape",
              "dtype", "rel(R_mx)", "rel(R_64)", "unwritten", "NaN", "status");
  for (const Buffer &b : outputs) {
    OutputValues got = readOutput(b, opts.compare);
    double relMX = NAN, rel64 = NAN;
    if (opts.compare) {
      const std::vector<double> *mx = referenceOutput(rmx, b.spec.name);
      const std::vector<double> *exact = referenceOutput(r64, b.spec.name);
      relMX = mx ? ref::relativeFrobenius(got.values, *mx) : NAN;
      rel64 = exact ? ref::relativeFrobenius(got.values, *exact) : NAN;
    }
    bool ok = got.unwritten == 0 && got.nans == 0 &&
              (!opts.compare || relMX <= opts.tolerance);
    pass &= ok;
    auto rel = [&](double value) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.3e", value);
      return opts.compare ? std::string(text) : std::string("-");
    };
    std::printf("%-6s %-18s %-5s %11s %11s %9lld %5lld  %s\n",
                b.spec.name.c_str(), jit::shapeToString(b.spec.shape).c_str(),
                jit::toString(b.spec.dtype), rel(relMX).c_str(),
                rel(rel64).c_str(),
                static_cast<long long>(got.unwritten),
                static_cast<long long>(got.nans), ok ? "PASS" : "FAIL");
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (checksum(inputs[i]) != inputChecksums[i]) {
      std::printf("input %s was modified by the run: FAIL\n",
                  inputs[i].spec.name.c_str());
      pass = false;
    }

  printCompileLine(compileSeconds, info);
  std::string best =
      opts.repeat > 1 ? " (best of " + std::to_string(opts.repeat) + ")" : "";
  std::printf("run: %.6f s%s\n", runSeconds, best.c_str());
  // On a GPU the call alone (what a caller holding device buffers pays),
  // then the copies of the resident mode's buffers.
  if (!info.gpuMode.empty())
    std::printf("gpu: mode %s, call %.6f s%s, device copies %.6f s\n",
                info.gpuMode.c_str(), callSeconds, best.c_str(), copySeconds);
  // A benchmark wants the typical call, not only the luckiest one.
  if (opts.repeat > 1)
    std::printf("timing: call median %.6f s, min %.6f s, max %.6f s over %lld "
                "runs after %lld warm-up\n",
                median(times.call), callSeconds,
                *std::max_element(times.call.begin(), times.call.end()),
                static_cast<long long>(opts.repeat),
                static_cast<long long>(opts.warmup));
  if (opts.compare)
    std::printf("references: R_mx %.3f s, R_64 %.3f s\n", seconds(r0, r1),
                seconds(r1, r2));
  else
    std::printf("references: not computed (--check none): the status checks "
                "only unwritten elements and NaN\n");

  if (!opts.outputsDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opts.outputsDir, ec);
    if (ec || !std::filesystem::is_directory(opts.outputsDir))
      throw DataError(opts.outputsDir + ": cannot create directory");
    for (const Buffer &b : outputs) {
      ref::NpyArray array;
      array.type = b.spec.dtype == jit::DType::BF16 ? ref::NpyType::BF16
                                                    : ref::NpyType::F32;
      array.shape = b.spec.shape;
      array.data.assign(b.bytes(), b.bytes() + b.numBytes());
      std::string error;
      if (!ref::writeNpy(joinPath(opts.outputsDir, b.spec.name + ".npy"), array,
                         error))
        throw DataError(error);
    }
  }
  std::printf("moe-run: %s\n", pass ? "PASS" : "FAIL");
  std::fflush(stdout);
  return pass ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string &arg : args)
    if (arg == "--help" || arg == "-h") {
      printHelp();
      return 0;
    }
  try {
    return run(parseCommandLine(args));
  } catch (const UsageError &e) {
    std::fprintf(stderr, "moe-run: error: %s\n", e.what());
    return 2;
  } catch (const DataError &e) {
    std::fprintf(stderr, "moe-run: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "moe-run: error: out of memory\n");
    return 1;
  } catch (const std::exception &e) {
    // The reference reports invalid data (routing, shapes) by throwing.
    std::fprintf(stderr, "moe-run: error: %s\n", e.what());
    return 1;
  }
}
