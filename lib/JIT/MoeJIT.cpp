//===- MoeJIT.cpp - the JIT behind MoeJIT.h -------------------------------===//
//
// Compiles moe IR for the host, or for the host plus an sm_90a GPU, and runs
// it on caller-owned buffers:
//
//   MLIR text --parse, verify--> module --analyze--> Signature, layer, routing
//     |                                                  roles of the entry
//     +--key = SHA-256(text, target, options, build)
//     |     memory cache hit: reuse the Executable
//     |     disk cache hit:   <cacheDir>/<key>-O<n>-<cpu>.o (object code,
//     |                       loaded into a JIT of its own: no lowering, no
//     |                       code generation) or else <cacheDir>/<key>.mlirbc
//     |                       (LLVM dialect bytecode: no lowering)
//     |     miss:             buildHostPipeline (Host) or
//     |                       buildGPUResidentPipeline / buildGPUHybrid-
//     |                       Pipeline (Sm90a, gpuMode) -> LLVM
//     |                       dialect (+ gpu.binary, gpu.launch_func) -> store
//     +--mlir::ExecutionEngine (LLVM -O<n>) -> _mlir__mlir_ciface_<entry>
//
// Target Sm90a: the generated code calls the mgpu* entry points of
// libmoe_cuda_runtime.so, which the JIT loads (RTLD_GLOBAL, from the
// directory of this library, else the loader's search path) so that ORC
// resolves them; the library needs no driver until its first call, so
// compiling does not either. The module's global constructor loads the
// kernels (cubin, or PTX without ptxas) into the driver; the JIT runs it at
// the executable's first run, not at compile time, so that a machine
// without a GPU can compile. A failed load is the error of that run and of
// every later one. A run fails with the runtime's sticky error, if any, and
// ends with moeCudaRuntimeReset() so that nothing stays allocated between
// runs (the runtime's stream-ordered pool keeps the memory for the next).
// A resident run copies the caller's buffers to the device on a stream of
// the run, passes that stream to the compiled call (which queues all its
// work there and never synchronizes), then synchronizes with it: the one
// host synchronization of the backward, outside the compiled code.
//
// Calling convention (the contract of include/moe/Pipelines/Pipelines.h):
// after the host pipeline the entry `@f(tensor inputs...) -> (tensor
// results...)` is `_mlir_ciface_f(desc *in0, ..., desc *out0, ...)` where
// each desc is a StridedMemRefType {allocated, aligned, offset, sizes[R],
// strides[R]} with identity layout. Executable::run builds one descriptor
// per caller buffer and calls the packed wrapper the ExecutionEngine
// generates, so outputs are written in place into the caller's memory. The
// resident pipeline's entry takes one more pointer, last: the CUstream.
// Entry arguments are marked `bufferization.writable = false` before the
// pipeline, so the code never writes into an input buffer.
//
//===----------------------------------------------------------------------===//
#include "moe/JIT/MoeJIT.h"

#include <cstdlib>

#include "HostAllocations.h"
#include "LayerBuilder.h"

#include "moe/Conversion/MoeToNVGPU/GemmConfig.h"
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"
#include "moe/Pipelines/Pipelines.h"
#include "moe/Reference/Routing.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace ::moe::jit;

//===----------------------------------------------------------------------===//
// Shared state
//===----------------------------------------------------------------------===//

namespace {
struct CudaRuntimeApi;
} // namespace

namespace moe::jit {

struct Executable::Impl {
  /// The code: an ExecutionEngine over the lowered module, or, from the
  /// disk cache's object code, a JIT of that object with its global
  /// constructors (run where the engine would run its initializers).
  std::unique_ptr<ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> objectJit;
  std::vector<void (*)()> constructors;
  /// `_mlir__mlir_ciface_<entry>(void **args)`.
  void (*packed)(void **) = nullptr;
  Signature signature;
  Target target = Target::Host;
  /// The CUDA runtime the code calls (target Sm90a), else null.
  const CudaRuntimeApi *cuda = nullptr;
  /// Target Sm90a: whether the first run ran the global constructors that
  /// load the kernels, and the error of that load (empty: loaded). Guarded
  /// by gpuMutex(): the load uses the runtime's per-process sticky error.
  mutable bool kernelsLoaded = false;
  mutable std::string kernelLoadError;
  /// gpuMode resident: the entry takes device buffers.
  bool deviceArguments = false;
  /// CompileInfo::gpuMode, for memory-cache hits.
  std::string gpuMode;
  std::optional<LayerDesc> layer;
  std::string layerProblem;
  /// Inputs holding the routing layout (-1: not an input) and the shapes
  /// their contents are checked against.
  int tokenInput = -1, expertInput = -1;
  int64_t numTokens = 0, numExperts = 0, blockSize = 0;
};

struct Compiler::Impl {
  CompilerOptions options;
  mutable std::mutex mutex;
  std::map<std::string, std::shared_ptr<const Executable::Impl>> memory;

  /// The threads of every GPU compile of this compiler: nested pass
  /// pipelines run on them, and moe-gpu-module-to-binary serializes the
  /// GPU modules on them at the same time (a cold sm90a compile is mostly
  /// the NVPTX back end and ptxas). Made on the first one, kept.
  llvm::ThreadPoolInterface &threads() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!pool)
      pool = std::make_unique<llvm::DefaultThreadPool>();
    return *pool;
  }

private:
  std::unique_ptr<llvm::DefaultThreadPool> pool;
};

} // namespace moe::jit

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// LLVM's native target and the process's symbols (libc, libm) for the
/// JIT, once per process.
void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::sys::DynamicLibrary::LoadLibraryPermanently(nullptr);
  });
}

/// LLVM cannot go on after one of its own allocations failed: by default it
/// prints "LLVM ERROR: out of memory" and aborts, a signal. The JIT's private
/// copy of LLVM reports it instead and exits with status 1 (issue 13: no
/// exit by a signal under `ulimit -v`). The handler allocates nothing.
void installOutOfMemoryHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::install_bad_alloc_error_handler(
        [](void *, const char *, bool) {
          static const char kMessage[] =
              "moe-mlir: error: out of memory inside LLVM/MLIR (the compiler "
              "cannot recover from that); exiting with status 1\n";
          (void)!::write(2, kMessage, sizeof(kMessage) - 1);
          std::_Exit(1);
        });
  });
}

/// The CUDA runtime's state (streams, allocations, the sticky error, the
/// reset that ends a run) is per process: GPU runs, and the loading of a
/// new executable's kernels, take turns under this lock.
std::mutex &gpuMutex() {
  static std::mutex mutex;
  return mutex;
}

/// The host API of libmoe_cuda_runtime.so (include/moe/Runtime/
/// CudaRuntime.h) that the JIT calls around the generated code.
struct CudaRuntimeApi {
  int32_t (*hasError)() = nullptr;
  const char *(*getLastError)() = nullptr;
  void (*clearError)() = nullptr;
  void (*reset)() = nullptr;
  void (*setCallStream)(void *) = nullptr;
  // The mgpu* entry points that move a resident run's buffers.
  void *(*streamCreate)() = nullptr;
  void (*streamSynchronize)(void *) = nullptr;
  void *(*memAlloc)(int64_t, void *, int8_t) = nullptr;
  void (*memcpy)(void *, void *, int64_t, void *) = nullptr;

  /// The recorded error, cleared; empty when there is none.
  std::string takeError() const {
    if (!hasError())
      return std::string();
    const char *text = getLastError();
    std::string message = text ? text : "moe-cuda-runtime: unknown error";
    clearError();
    return message;
  }
};

/// Loads libmoe_cuda_runtime.so once per process, with its symbols global
/// so that ORC resolves the generated code's mgpu* calls: first from the
/// directory of this library (the build's lib/ and the bundle keep them
/// together), then through the loader's search path. The error says where
/// it looked.
Expected<const CudaRuntimeApi *> loadCudaRuntime() {
  static std::mutex mutex;
  static std::optional<CudaRuntimeApi> api;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (api)
    return &*api;
  if (!failure.empty())
    return Status::error(failure);
  const char *name = "libmoe_cuda_runtime.so";
  std::vector<std::string> candidates;
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&loadCudaRuntime), &info) &&
      info.dli_fname) {
    llvm::SmallString<256> path(info.dli_fname);
    llvm::sys::path::remove_filename(path);
    llvm::sys::path::append(path, name);
    candidates.push_back(path.str().str());
  }
  candidates.push_back(name);
  std::string tried;
  for (const std::string &candidate : candidates) {
    std::string error;
    if (!llvm::sys::DynamicLibrary::LoadLibraryPermanently(candidate.c_str(),
                                                           &error)) {
      void *handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL);
      CudaRuntimeApi loaded;
      auto lookup = [&](auto &fn, const char *symbol) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
            handle ? dlsym(handle, symbol) : nullptr);
        return fn != nullptr;
      };
      if (lookup(loaded.hasError, "moeCudaRuntimeHasError") &&
          lookup(loaded.getLastError, "moeCudaRuntimeGetLastError") &&
          lookup(loaded.clearError, "moeCudaRuntimeClearError") &&
          lookup(loaded.reset, "moeCudaRuntimeReset") &&
          lookup(loaded.setCallStream, "moeCudaRuntimeSetCallStream") &&
          lookup(loaded.streamCreate, "mgpuStreamCreate") &&
          lookup(loaded.streamSynchronize, "mgpuStreamSynchronize") &&
          lookup(loaded.memAlloc, "mgpuMemAlloc") &&
          lookup(loaded.memcpy, "mgpuMemcpy")) {
        // Errors reach the caller through Status: the runtime need not
        // print them too.
        void (*setErrorPrinting)(int32_t) = nullptr;
        if (lookup(setErrorPrinting, "moeCudaRuntimeSetErrorPrinting"))
          setErrorPrinting(0);
        api = loaded;
        return &*api;
      }
      error = "it lacks the moeCudaRuntime* host API";
    }
    tried += "\n  " + candidate + ": " + error;
  }
  failure = "target sm90a needs the CUDA runtime library " + std::string(name) +
            ", which could not be loaded:" + tried;
  return Status::error(failure);
}

/// An unranked memref as the LLVM lowering passes it: the rank and a
/// pointer to {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemRef {
  int64_t rank;
  int64_t *descriptor;
};

/// `memrefCopy`, which memref.copy between non-identity layouts lowers to.
/// The JIT provides it itself so that generated code needs no MLIR runtime
/// library at run time.
void copyMemRef(int64_t elemSize, UnrankedMemRef *src, UnrankedMemRef *dst) {
  int64_t rank = src->rank;
  const int64_t *s = src->descriptor, *d = dst->descriptor;
  const char *from = reinterpret_cast<const char *>(s[1]) + s[2] * elemSize;
  char *to = reinterpret_cast<char *>(d[1]) + d[2] * elemSize;
  const int64_t *sizes = s + 3, *fromStrides = s + 3 + rank,
                *toStrides = d + 3 + rank;
  int64_t total = 1;
  bool contiguous = true;
  for (int64_t i = rank - 1, expected = 1; i >= 0; --i) {
    total *= sizes[i];
    contiguous &= sizes[i] == 1 ||
                  (fromStrides[i] == expected && toStrides[i] == expected);
    expected *= sizes[i];
  }
  if (total == 0)
    return;
  if (contiguous) {
    std::memmove(to, from, total * elemSize);
    return;
  }
  // Odometer over the index space, element by element.
  std::vector<int64_t> index(rank, 0);
  int64_t fromOffset = 0, toOffset = 0;
  for (int64_t n = 0; n < total; ++n) {
    std::memcpy(to + toOffset * elemSize, from + fromOffset * elemSize,
                elemSize);
    for (int64_t i = rank - 1; i >= 0; --i) {
      fromOffset += fromStrides[i];
      toOffset += toStrides[i];
      if (++index[i] < sizes[i])
        break;
      fromOffset -= fromStrides[i] * sizes[i];
      toOffset -= toStrides[i] * sizes[i];
      index[i] = 0;
    }
  }
}

/// Runtime functions the JIT provides to generated code, by symbol name.
const std::pair<const char *, void *> kRuntimeSymbols[] = {
    {"memrefCopy", reinterpret_cast<void *>(&copyMemRef)},
    {"_mlir_memref_to_llvm_alloc",
     reinterpret_cast<void *>(&::moe::jit::detail::hostAlloc)},
    {"_mlir_memref_to_llvm_aligned_alloc",
     reinterpret_cast<void *>(&::moe::jit::detail::hostAlignedAlloc)},
    {"_mlir_memref_to_llvm_free", reinterpret_cast<void *>(&::moe::jit::detail::hostFree)},
};

/// Runs the entry through the allocation hooks: an error naming the host
/// allocation that failed, if one did.
Status callEntry(const Executable::Impl &impl, void **args) {
  ::moe::jit::detail::AllocationFailure failure;
  if (::moe::jit::detail::callEntry(impl.packed, args, failure))
    return Status();
  return Status::error(
      "@" + impl.signature.function +
      ": out of host memory: the generated code could not allocate " +
      std::to_string(failure.requestedBytes) + " bytes (it held " +
      std::to_string(failure.liveBytes) +
      " bytes of temporaries, now freed); the outputs are incomplete");
}

/// Error unless every function the module declares but does not define is
/// an intrinsic, a JIT runtime function or a symbol of this process. (ORC
/// would otherwise print its own message to stderr before failing.)
Status checkExternalSymbols(ModuleOp module) {
  for (auto func : module.getOps<LLVM::LLVMFuncOp>()) {
    if (!func.isExternal())
      continue;
    llvm::StringRef name = func.getSymName();
    if (name.starts_with("llvm."))
      continue;
    bool provided = llvm::any_of(kRuntimeSymbols, [&](const auto &symbol) {
      return name == symbol.first;
    });
    if (!provided &&
        !llvm::sys::DynamicLibrary::SearchForAddressOfSymbol(name.str()))
      return Status::error("the lowered module calls '" + name.str() +
                           "', which neither the JIT runtime nor the "
                           "process provides");
  }
  return Status();
}

/// Dialects of every input the JIT accepts and every stage of the pipeline,
/// plus the LLVM IR translations the ExecutionEngine needs.
void fillRegistry(DialectRegistry &registry) {
  registry.insert<mlir::moe::MoeDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect, tensor::TensorDialect,
                  linalg::LinalgDialect, scf::SCFDialect, memref::MemRefDialect,
                  bufferization::BufferizationDialect, LLVM::LLVMDialect>();
  mlir::moe::registerPipelineDependencies(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // gpu.binary -> the embedded image and its load in a global constructor.
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

/// Identifies the build of this library (its file's path, size and
/// modification time), so that a rebuilt compiler never reuses lowered
/// modules that an older one left in a disk cache.
std::string buildIdentity() {
  static const std::string identity = [] {
    Dl_info info;
    struct stat st;
    if (dladdr(reinterpret_cast<void *>(&buildIdentity), &info) &&
        info.dli_fname && stat(info.dli_fname, &st) == 0)
      return std::string(info.dli_fname) + ":" + std::to_string(st.st_size) +
             ":" + std::to_string(st.st_mtime);
    return std::string("unknown-build");
  }();
  return identity;
}

/// The cache key: a hex SHA-256 prefix of everything that decides the
/// lowered module. (optLevel only affects code generation, which is never
/// cached on disk; the memory cache appends it.)
std::string cacheKey(const std::string &text, const CompileOptions &options,
                     const std::string &gpuFormat) {
  llvm::SHA256 hasher;
  auto add = [&](llvm::StringRef part) {
    hasher.update(part);
    hasher.update(llvm::StringRef("\0", 1));
  };
  add("moe-jit-cache-v2");
  add(buildIdentity());
  add(toString(options.target));
  add(options.fuse ? "fuse" : "no-fuse");
  add(options.entry);
  add(options.mmaPath);
  add(options.gpuMode);
  // Every kernel choice as `OPTION=value`: named by the option, no two
  // settings of the choices share a key, whatever their defaults.
  add(kernelChoicesToString(options));
  for (const auto &[index, config] : options.gemmConfigs)
    add("gemm-config " + std::to_string(index) + " " + config);
  add(gpuFormat);
  add(text);
  std::array<uint8_t, 32> digest = hasher.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest).take_front(16),
                     /*LowerCase=*/true);
}

/// The root of a CUDA toolkit with an executable bin/ptxas (MOE_CUDA_ROOT,
/// CUDA_ROOT, CUDA_HOME, CUDA_PATH, /usr/local/cuda, then PATH), or empty.
std::string findCudaToolkit() {
  auto hasPtxas = [](const std::string &root) {
    llvm::SmallString<256> path(root);
    llvm::sys::path::append(path, "bin", "ptxas");
    return llvm::sys::fs::can_execute(path);
  };
  for (const char *variable :
       {"MOE_CUDA_ROOT", "CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(variable); root && hasPtxas(root))
      return root;
  if (hasPtxas("/usr/local/cuda"))
    return "/usr/local/cuda";
  if (llvm::ErrorOr<std::string> ptxas = llvm::sys::findProgramByName("ptxas"))
    return llvm::sys::path::parent_path(llvm::sys::path::parent_path(*ptxas))
        .str();
  return std::string();
}

/// Collects the context's diagnostics as located text ("name:line:col:
/// error: ..." with the source line and a caret) for error values.
class DiagnosticCollector {
public:
  DiagnosticCollector(MLIRContext &context, llvm::SourceMgr &sourceMgr)
      : stream(text), handler(sourceMgr, &context, stream) {}
  /// The collected text without the trailing newline; clears it.
  std::string take() {
    std::string out = text;
    text.clear();
    while (!out.empty() && out.back() == '\n')
      out.pop_back();
    return out;
  }

private:
  std::string text;
  llvm::raw_string_ostream stream;
  SourceMgrDiagnosticHandler handler;
};

/// Sets hand-chosen `moe.gemm_config`s on the GPU GEMMs (by their index in
/// IR order) just before moe-gpu-kernel-config runs: the GEMMs exist from
/// moe-decompose-bwd on, and that pass keeps a configuration it finds.
class GemmConfigOverrides : public PassInstrumentation {
public:
  GemmConfigOverrides(ArrayRef<std::pair<unsigned, Attribute>> configs,
                      std::string &error)
      : configs(configs), error(error) {}

  void runBeforePass(Pass *pass, Operation *op) override {
    if (pass->getArgument() != "moe-gpu-kernel-config")
      return;
    SmallVector<Operation *> gemms;
    op->walk([&](Operation *gemm) {
      if (mlir::moe::isGPUGemm(gemm))
        gemms.push_back(gemm);
    });
    for (const auto &[index, config] : configs) {
      if (index >= gemms.size()) {
        error = "no GEMM " + std::to_string(index) + " to configure: the " +
                "module has " + std::to_string(gemms.size()) + " GPU GEMMs";
        return;
      }
      gemms[index]->setAttr(mlir::moe::kGemmConfigAttrName, config);
    }
  }

private:
  ArrayRef<std::pair<unsigned, Attribute>> configs;
  std::string &error;
};

std::optional<DType> dtypeOf(Type type) {
  if (type.isBF16())
    return DType::BF16;
  if (type.isF32())
    return DType::F32;
  if (type.isSignlessInteger(32))
    return DType::I32;
  if (isa<Float8E4M3FNType>(type))
    return DType::F8E4M3FN;
  if (isa<Float8E5M2Type>(type))
    return DType::F8E5M2;
  if (isa<Float8E8M0FNUType>(type))
    return DType::F8E8M0FNU;
  return std::nullopt;
}

/// The TensorSpec of a function argument or result; emits an error at
/// `func` when the type is not a static tensor of a supported dtype.
FailureOr<TensorSpec> specOf(func::FuncOp func, Type type,
                             const std::string &what) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  std::optional<DType> dtype =
      tensor ? dtypeOf(tensor.getElementType()) : std::nullopt;
  if (!tensor || !tensor.hasStaticShape() || !dtype) {
    func.emitError() << what << " of @" << func.getSymName() << " has type "
                     << type
                     << "; the JIT takes statically shaped tensors of bf16, "
                        "f32, i32, f8E4M3FN, f8E5M2 or f8E8M0FNU";
    return failure();
  }
  TensorSpec spec;
  spec.dtype = *dtype;
  spec.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  return spec;
}

/// What compile() learns from the tensor-level module before lowering it.
struct Analysis {
  func::FuncOp entry;
  std::shared_ptr<Executable::Impl> impl;
};

/// Picks the entry function (see CompileOptions::entry). The errors are
/// about the whole module, so they name the file rather than a line.
FailureOr<func::FuncOp>
findEntry(ModuleOp module, const CompileOptions &options, std::string &error) {
  const std::string &file = options.sourceName;
  if (!options.entry.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(options.entry);
    if (!func || func.isExternal() || !func.isPublic()) {
      error = file + ": no public function @" + options.entry +
              " with a body in the module";
      return failure();
    }
    return func;
  }
  SmallVector<func::FuncOp> candidates, withLayer;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    candidates.push_back(func);
    if (func.walk([](mlir::moe::BlockwiseBwdOp) {
              return WalkResult::interrupt();
            })
            .wasInterrupted())
      withLayer.push_back(func);
  }
  if (candidates.size() == 1)
    return candidates.front();
  if (withLayer.size() == 1)
    return withLayer.front();
  if (candidates.empty()) {
    error = file + ": the module has no public function with a body";
    return failure();
  }
  std::string names;
  for (func::FuncOp func : withLayer.empty() ? candidates : withLayer)
    names += (names.empty() ? "@" : ", @") + func.getSymName().str();
  error = file + ": cannot choose the function to run among " + names +
          "; name it (CompileOptions::entry, moe-run --function)";
  return failure();
}

/// Signature, layer and routing roles of the entry. Sets `error`, or emits
/// a located diagnostic, on failure.
LogicalResult analyze(ModuleOp module, const CompileOptions &options,
                      Analysis &out, std::string &error) {
  FailureOr<func::FuncOp> entry = findEntry(module, options, error);
  if (failed(entry))
    return failure();
  func::FuncOp func = *entry;
  auto impl = std::make_shared<Executable::Impl>();
  impl->target = options.target;
  impl->signature.function = func.getSymName().str();

  SmallVector<mlir::moe::BlockwiseBwdOp> layers;
  func.walk([&](mlir::moe::BlockwiseBwdOp op) { layers.push_back(op); });
  mlir::moe::BlockwiseBwdOp op = layers.size() == 1 ? layers.front() : nullptr;
  // Results are named by the values returned, when one func.return says.
  SmallVector<func::ReturnOp> returns;
  func.walk([&](func::ReturnOp ret) { returns.push_back(ret); });

  std::vector<std::string> problems;
  if (!op)
    problems.push_back("@" + impl->signature.function + " holds " +
                       std::to_string(layers.size()) +
                       " moe.blockwise_bwd ops, not exactly one");

  auto unique = [](const std::vector<TensorSpec> &specs,
                   const std::string &name) {
    for (const TensorSpec &spec : specs)
      if (spec.name == name)
        return false;
    return true;
  };
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    FailureOr<TensorSpec> spec =
        specOf(func, arg.getType(), "argument #" + std::to_string(i));
    if (failed(spec))
      return failure();
    std::string name = op ? operandName(op, arg) : "";
    if (name.empty() || !unique(impl->signature.inputs, name)) {
      if (op)
        problems.push_back("argument #" + std::to_string(i) +
                           " is not a distinct operand of moe.blockwise_bwd");
      name = "arg" + std::to_string(i);
    }
    if (name == "token_position_to_id")
      impl->tokenInput = static_cast<int>(i);
    if (name == "block_to_expert")
      impl->expertInput = static_cast<int>(i);
    spec->name = name;
    impl->signature.inputs.push_back(*spec);
  }
  for (auto [j, type] : llvm::enumerate(func.getResultTypes())) {
    FailureOr<TensorSpec> spec =
        specOf(func, type, "result #" + std::to_string(j));
    if (failed(spec))
      return failure();
    std::string name = op && returns.size() == 1
                           ? resultName(op, returns.front().getOperand(j))
                           : "";
    if (name.empty() || !unique(impl->signature.outputs, name)) {
      if (op)
        problems.push_back("result #" + std::to_string(j) +
                           " is not a distinct result of moe.blockwise_bwd");
      name = "result" + std::to_string(j);
    }
    spec->name = name;
    impl->signature.outputs.push_back(*spec);
  }

  if (op) {
    impl->numTokens = op.getNumTokens();
    impl->numExperts = op.getNumExperts();
    impl->blockSize = op.getBlockSize();
    for (Value operand : op->getOperands())
      if (!isa<BlockArgument>(operand) ||
          cast<BlockArgument>(operand).getOwner() != &func.getBody().front())
        problems.push_back("operand '" + operandName(op, operand) +
                           "' of moe.blockwise_bwd is not an argument of @" +
                           impl->signature.function);
    for (Value result : op->getResults())
      if (unique(impl->signature.outputs, resultName(op, result)))
        problems.push_back("result '" + resultName(op, result) +
                           "' of moe.blockwise_bwd is not returned");
    Expected<LayerDesc> layer = describeLayer(op);
    if (!layer)
      problems.push_back(layer.message());
    else if (problems.empty())
      impl->layer = *layer;
  }
  if (!problems.empty())
    impl->layerProblem = problems.front();
  out.entry = func;
  out.impl = std::move(impl);
  return success();
}

/// Error unless `module` is all LLVM dialect (plus, for a GPU target, the
/// gpu.binary and gpu.launch_func ops that the translation lowers) and
/// exports the C interface of `entry` with one pointer argument per input
/// and output, and the stream last with `streamArgument`.
Status checkLowered(ModuleOp module, const Signature &signature,
                    const std::string &sourceName, Target target,
                    bool streamArgument) {
  Operation *stray = nullptr;
  module.walk([&](Operation *op) {
    bool gpuOp = target != Target::Host &&
                 isa<gpu::BinaryOp, gpu::LaunchFuncOp>(op);
    if (op != module.getOperation() && !gpuOp &&
        !isa_and_nonnull<LLVM::LLVMDialect>(op->getDialect()))
      stray = op;
    return stray ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (stray) {
    std::string loc;
    llvm::raw_string_ostream os(loc);
    os << stray->getLoc();
    return Status::error(sourceName + ": the host pipeline left '" +
                         stray->getName().getStringRef().str() + "' at " + loc +
                         " (the lowering to the LLVM dialect is incomplete)");
  }
  std::string name = "_mlir_ciface_" + signature.function;
  auto cface = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
  size_t want = signature.inputs.size() + signature.outputs.size() +
                (streamArgument ? 1 : 0);
  if (!cface || cface.isExternal())
    return Status::error(sourceName + ": the host pipeline did not define " +
                         name + " (the C interface of @" + signature.function +
                         ")");
  LLVM::LLVMFunctionType type = cface.getFunctionType();
  bool allPointers = llvm::all_of(
      type.getParams(), [](Type t) { return isa<LLVM::LLVMPointerType>(t); });
  if (type.getNumParams() != want || !allPointers ||
      !isa<LLVM::LLVMVoidType>(type.getReturnType())) {
    std::string got;
    llvm::raw_string_ostream os(got);
    os << type;
    return Status::error(
        sourceName + ": " + name + " has type " + got +
        "; the calling convention needs " + std::to_string(want) +
        " pointer arguments (inputs, then one out-param per "
        "result" +
        (streamArgument ? ", then the stream" : "") + ") and no result");
  }
  return Status();
}

/// Reads a cached lowered module; null on a miss or an unreadable entry.
OwningOpRef<ModuleOp> loadCached(MLIRContext &context,
                                 const std::string &path) {
  if (!llvm::sys::fs::exists(path))
    return nullptr;
  // A stale or truncated entry is a miss, not an error: swallow its
  // diagnostics and lower again.
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  ParserConfig config(&context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(path, config);
  if (!module || failed(verify(*module)))
    return nullptr;
  return module;
}

/// Writes `path` atomically: `write` fills a temporary file beside it
/// (false: it failed, with `error` saying why), which is then renamed.
Status storeAtomically(
    const std::string &path,
    llvm::function_ref<bool(llvm::raw_ostream &, std::string &)> write) {
  static std::atomic<unsigned> counter{0};
  std::string temp = path + ".tmp." +
                     std::to_string(llvm::sys::Process::getProcessId()) + "." +
                     std::to_string(counter++);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(temp, ec);
    if (ec)
      return Status::error(temp + ": cannot write (" + ec.message() + ")");
    std::string error;
    if (!write(os, error)) {
      os.close();
      llvm::sys::fs::remove(temp);
      return Status::error(temp + ": " + error);
    }
    os.close();
    if (os.has_error()) {
      llvm::sys::fs::remove(temp);
      return Status::error(temp + ": write failed (" + os.error().message() +
                           ")");
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return Status::error(path + ": cannot store (" + ec.message() + ")");
  }
  return Status();
}

/// Writes each object of each gpu.binary of `module` into `dir` as
/// <binary>.ptx (assembly) or <binary>.cubin, and lists them in `files`.
Status writeKernelFiles(ModuleOp module, const std::string &dir,
                        std::vector<std::string> &files) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return Status::error(dir + ": cannot create the kernel directory (" +
                         ec.message() + ")");
  Status status;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute attr : binary.getObjects()) {
      auto object = dyn_cast<gpu::ObjectAttr>(attr);
      if (!object || !status)
        continue;
      bool ptx = object.getFormat() == gpu::CompilationTarget::Assembly;
      llvm::SmallString<256> path(dir);
      llvm::sys::path::append(path, binary.getSymName() +
                                        (ptx ? ".ptx" : ".cubin"));
      StringRef bytes = object.getObject().getValue();
      status = storeAtomically(
          path.str().str(), [&](llvm::raw_ostream &os, std::string &) {
            os << bytes;
            return true;
          });
      if (status)
        files.push_back(path.str().str());
    }
  });
  return status;
}

/// Writes `module` to `path` atomically (temporary file, then rename).
Status storeCached(ModuleOp module, const std::string &dir,
                   const std::string &path) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return Status::error(dir + ": cannot create the cache directory (" +
                         ec.message() + ")");
  return storeAtomically(path, [&](llvm::raw_ostream &os, std::string &error) {
    if (succeeded(writeBytecodeToFile(module, os)))
      return true;
    error = "cannot write the module as bytecode";
    return false;
  });
}

/// Runs the code's global constructors (on a GPU target, the loads of the
/// kernels into the driver).
void runInitializers(const Executable::Impl &impl) {
  if (impl.engine) {
    impl.engine->initialize();
    return;
  }
  for (void (*constructor)() : impl.constructors)
    constructor();
}

/// The disk cache's object-code entry of a key: the host CPU is part of
/// its name (the code is compiled for it).
std::string objectCachePath(const std::string &dir, const std::string &key) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path,
                          key + "-" + llvm::sys::getHostCPUName().str() + ".o");
  return path.str().str();
}

/// Writes `text` to `path` atomically (temporary file, then rename).
Status storeText(const std::string &path, const std::string &text) {
  return storeAtomically(path, [&](llvm::raw_ostream &os, std::string &) {
    os << text;
    return true;
  });
}

/// Loads the object code the disk cache holds at `objectPath` (with its
/// constructor list beside it) into a JIT of its own and looks up the
/// entry's wrapper and the constructors. False when the entry is missing
/// or unusable: the caller compiles instead.
bool loadObjectCode(const std::string &objectPath, Executable::Impl &impl) {
  auto object = llvm::MemoryBuffer::getFile(objectPath);
  auto ctorList = llvm::MemoryBuffer::getFile(objectPath + ".ctors");
  if (!object || !ctorList)
    return false;
  initializeLLVM();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    llvm::consumeError(jit.takeError());
    return false;
  }
  llvm::orc::JITDylib &dylib = (*jit)->getMainJITDylib();
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(),
                                      (*jit)->getDataLayout());
  llvm::orc::SymbolMap symbols;
  for (const auto &[name, address] : kRuntimeSymbols)
    symbols[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                             llvm::JITSymbolFlags::Exported};
  auto search = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!search || dylib.define(llvm::orc::absoluteSymbols(symbols))) {
    if (!search)
      llvm::consumeError(search.takeError());
    return false;
  }
  dylib.addGenerator(std::move(*search));
  if (llvm::Error err = (*jit)->addObjectFile(std::move(*object))) {
    llvm::consumeError(std::move(err));
    return false;
  }
  auto packed = (*jit)->lookup("_mlir__mlir_ciface_" + impl.signature.function);
  if (!packed) {
    llvm::consumeError(packed.takeError());
    return false;
  }
  std::vector<void (*)()> constructors;
  llvm::SmallVector<llvm::StringRef> names;
  (*ctorList)->getBuffer().split(names, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef name : names) {
    auto ctor = (*jit)->lookup(name);
    if (!ctor) {
      llvm::consumeError(ctor.takeError());
      return false;
    }
    constructors.push_back(ctor->toPtr<void (*)()>());
  }
  impl.packed = packed->toPtr<void (*)(void **)>();
  impl.constructors = std::move(constructors);
  impl.objectJit = std::move(*jit);
  if (!impl.cuda)
    runInitializers(impl);
  return true;
}

/// JIT-compiles an LLVM-dialect module and looks up the entry's wrapper.
/// The global constructors run here only on the host: on a GPU target they
/// load the kernels into the driver, which loadKernels does at the first
/// run. With `objectPath`, the object code and the constructor list go to
/// the disk cache there, for loadObjectCode.
Status generateCode(ModuleOp module, int optLevel, Executable::Impl &impl,
                    const std::string &objectPath) {
  initializeLLVM();
  if (Status s = checkExternalSymbols(module); !s)
    return s;
  auto optimize =
      makeOptimizingTransformer(optLevel, /*sizeLevel=*/0, nullptr);
  // The global constructors (on a GPU target, the kernels' loads that the
  // gpu.binary translation adds) become external functions of known names
  // before optimization, so that the object code in the disk cache can run
  // them: a JIT of an object runs no initializers by itself.
  auto constructors = std::make_shared<std::vector<std::string>>();
  auto transformer = [optimize, constructors](llvm::Module *m) {
    std::vector<std::pair<uint64_t, std::string>> found;
    if (auto *list = m->getGlobalVariable("llvm.global_ctors"))
      if (auto *entries =
              llvm::dyn_cast<llvm::ConstantArray>(list->getInitializer()))
        for (unsigned i = 0; i < entries->getNumOperands(); ++i) {
          auto *entry =
              llvm::dyn_cast<llvm::ConstantStruct>(entries->getOperand(i));
          if (!entry || entry->getNumOperands() < 2)
            continue;
          auto *priority =
              llvm::dyn_cast<llvm::ConstantInt>(entry->getOperand(0));
          auto *fn = llvm::dyn_cast<llvm::Function>(
              entry->getOperand(1)->stripPointerCasts());
          if (!fn || !priority)
            continue;
          if (fn->hasLocalLinkage()) {
            fn->setLinkage(llvm::GlobalValue::ExternalLinkage);
            fn->setName("__moe_constructor_" + std::to_string(i));
          }
          found.push_back({priority->getZExtValue(), fn->getName().str()});
        }
    std::stable_sort(found.begin(), found.end(),
                     [](const auto &a, const auto &b) {
                       return a.first < b.first;
                     });
    for (auto &ctor : found)
      constructors->push_back(ctor.second);
    return optimize(m);
  };
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel =
      static_cast<llvm::CodeGenOptLevel>(optLevel);
  engineOptions.enableGDBNotificationListener = false;
  engineOptions.enablePerfNotificationListener = false;
  engineOptions.enableObjectDump = !objectPath.empty();
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine)
    return Status::error("LLVM code generation failed: " +
                         llvm::toString(engine.takeError()));
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    for (const auto &[name, address] : kRuntimeSymbols)
      symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                 llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  if (!impl.cuda)
    (*engine)->initialize();
  auto packed =
      (*engine)->lookupPacked("_mlir_ciface_" + impl.signature.function);
  if (!packed)
    return Status::error("JIT lookup of _mlir_ciface_" +
                         impl.signature.function +
                         " failed: " + llvm::toString(packed.takeError()));
  impl.packed = *packed;
  if (!objectPath.empty()) {
    // The constructor list first: an object entry is complete once it
    // exists. The lookup above compiled the module, so the dump has it.
    std::string ctors;
    for (const std::string &name : *constructors)
      ctors += name + "\n";
    if (Status s = storeText(objectPath + ".ctors", ctors); !s)
      return s;
    std::string temp = objectPath + ".tmp." +
                       std::to_string(llvm::sys::Process::getProcessId());
    (*engine)->dumpToObjectFile(temp);
    if (std::error_code ec = llvm::sys::fs::rename(temp, objectPath)) {
      llvm::sys::fs::remove(temp);
      return Status::error(objectPath + ": cannot store (" + ec.message() +
                           ")");
    }
  }
  impl.engine = std::move(*engine);
  return Status();
}

/// Target Sm90a: runs the global constructors, which load the kernels, at
/// the first run; the caller holds gpuMutex(). They run once, so a failed
/// load (no driver, no device, a kernel the driver rejects) stays the error
/// of every run of the executable.
Status loadKernels(const Executable::Impl &impl) {
  if (!impl.kernelsLoaded) {
    runInitializers(impl);
    impl.kernelsLoaded = true;
    impl.kernelLoadError = impl.cuda->takeError();
  }
  if (!impl.kernelLoadError.empty())
    return Status::error(impl.kernelLoadError);
  return Status();
}

std::string describe(const char *kind, size_t index, const TensorSpec &spec) {
  return std::string(kind) + " '" + spec.name + "' (#" + std::to_string(index) +
         ")";
}

/// Checks one caller buffer against its TensorSpec.
Status checkBuffer(const char *kind, size_t index, const TensorSpec &spec,
                   const void *data, DType dtype,
                   const std::vector<int64_t> &shape) {
  std::string what = describe(kind, index, spec);
  if (!data)
    return Status::error(what + ": null data pointer");
  if (dtype != spec.dtype)
    return Status::error(what + ": dtype " + toString(dtype) +
                         " does not match the signature's " +
                         toString(spec.dtype));
  if (shape != spec.shape)
    return Status::error(what + ": shape " + shapeToString(shape) +
                         " does not match the signature's " +
                         shapeToString(spec.shape));
  size_t align = byteSize(dtype);
  if (reinterpret_cast<uintptr_t>(data) % align != 0) {
    std::ostringstream os;
    os << what << ": data pointer " << data << " is not aligned to " << align
       << " bytes (" << toString(dtype) << ")";
    return Status::error(os.str());
  }
  return Status();
}

} // namespace

//===----------------------------------------------------------------------===//
// Executable
//===----------------------------------------------------------------------===//

Executable::Executable() = default;
Executable::~Executable() = default;
Executable::Executable(const Executable &) = default;
Executable &Executable::operator=(const Executable &) = default;

const Signature &Executable::signature() const {
  static const Signature empty;
  return impl_ ? impl_->signature : empty;
}

Target Executable::target() const {
  return impl_ ? impl_->target : Target::Host;
}

const CompileInfo &Executable::compileInfo() const { return info_; }

Expected<LayerDesc> Executable::layer() const {
  if (!impl_)
    return Status::error("empty Executable");
  if (!impl_->layer)
    return Status::error(impl_->layerProblem);
  return *impl_->layer;
}

namespace {

/// The argument checks of Executable::run and runOnDevice: counts, null
/// and misaligned pointers, dtypes, shapes, outputs overlapping other
/// buffers and, with `routing` (host memory), the routing layout.
Status checkArguments(const Executable::Impl &impl,
                      const std::vector<ConstTensorRef> &inputs,
                      const std::vector<TensorRef> &outputs, bool routing) {
  const Signature &sig = impl.signature;
  if (inputs.size() != sig.inputs.size() ||
      outputs.size() != sig.outputs.size())
    return Status::error("@" + sig.function + " takes " +
                         std::to_string(sig.inputs.size()) + " inputs and " +
                         std::to_string(sig.outputs.size()) + " outputs, got " +
                         std::to_string(inputs.size()) + " and " +
                         std::to_string(outputs.size()));

  // Every buffer, as [begin, end) for the overlap check.
  struct Range {
    const char *kind;
    size_t index;
    uintptr_t begin, end;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ConstTensorRef &in = inputs[i];
    if (Status s =
            checkBuffer("input", i, sig.inputs[i], in.data, in.dtype, in.shape);
        !s)
      return s;
    auto begin = reinterpret_cast<uintptr_t>(in.data);
    ranges.push_back({"input", i, begin, begin + sig.inputs[i].numBytes()});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorRef &out = outputs[i];
    if (Status s = checkBuffer("output", i, sig.outputs[i], out.data, out.dtype,
                               out.shape);
        !s)
      return s;
    auto begin = reinterpret_cast<uintptr_t>(out.data);
    ranges.push_back({"output", i, begin, begin + sig.outputs[i].numBytes()});
  }
  // An output may share memory with nothing else (inputs may alias each
  // other: they are only read).
  for (size_t a = inputs.size(); a < ranges.size(); ++a)
    for (size_t b = 0; b < ranges.size(); ++b)
      if (a != b && ranges[a].begin < ranges[b].end &&
          ranges[b].begin < ranges[a].end) {
        const Range &other = ranges[b];
        const TensorSpec &otherSpec = std::strcmp(other.kind, "input") == 0
                                          ? sig.inputs[other.index]
                                          : sig.outputs[other.index];
        return Status::error(
            describe("output", ranges[a].index, sig.outputs[ranges[a].index]) +
            " overlaps " + describe(other.kind, other.index, otherSpec));
      }

  if (!routing)
    return Status();
  // The routing layout: ids in range, then the ordering contract.
  if (impl.tokenInput >= 0 && impl.expertInput >= 0) {
    const TensorSpec &tokSpec = sig.inputs[impl.tokenInput];
    const TensorSpec &blkSpec = sig.inputs[impl.expertInput];
    const auto *tok =
        static_cast<const int32_t *>(inputs[impl.tokenInput].data);
    const auto *blk =
        static_cast<const int32_t *>(inputs[impl.expertInput].data);
    int64_t slots = tokSpec.numElements(), blocks = blkSpec.numElements();
    for (int64_t i = 0; i < slots; ++i)
      if (tok[i] < -1 || tok[i] >= impl.numTokens)
        return Status::error(
            describe("input", impl.tokenInput, tokSpec) + ": element " +
            std::to_string(i) + " is token id " + std::to_string(tok[i]) +
            ", outside [-1, " + std::to_string(impl.numTokens) + ")");
    for (int64_t i = 0; i < blocks; ++i)
      if (blk[i] < 0 || blk[i] >= impl.numExperts)
        return Status::error(
            describe("input", impl.expertInput, blkSpec) + ": element " +
            std::to_string(i) + " is expert id " + std::to_string(blk[i]) +
            ", outside [0, " + std::to_string(impl.numExperts) + ")");
    ::moe::ref::Routing routing;
    routing.tokenPositionToId.assign(tok, tok + slots);
    routing.blockToExpert.assign(blk, blk + blocks);
    std::string problem = ::moe::ref::verifyRouting(
        routing, impl.numTokens, impl.numExperts, impl.blockSize);
    if (!problem.empty())
      return Status::error("inputs token_position_to_id and block_to_expert "
                           "break the routing layout contract: " +
                           problem);
  }

  return Status();
}

/// The packed arguments of the entry: one StridedMemRefType descriptor per
/// buffer of `data` (inputs, then outputs): allocated and aligned pointer,
/// offset 0, sizes, row-major strides.
struct MemRefArguments {
  MemRefArguments(const Signature &sig, const std::vector<const void *> &data)
      : descriptors(data.size()), pointers(data.size()), args(data.size()) {
    size_t inputs = sig.inputs.size();
    for (size_t i = 0; i < data.size(); ++i) {
      const TensorSpec &spec =
          i < inputs ? sig.inputs[i] : sig.outputs[i - inputs];
      std::vector<int64_t> &desc = descriptors[i];
      auto address = static_cast<int64_t>(reinterpret_cast<intptr_t>(data[i]));
      desc = {address, address, 0};
      desc.insert(desc.end(), spec.shape.begin(), spec.shape.end());
      std::vector<int64_t> strides(spec.shape.size(), 1);
      for (size_t d = spec.shape.size(); d-- > 1;)
        strides[d - 1] = strides[d] * spec.shape[d];
      desc.insert(desc.end(), strides.begin(), strides.end());
      pointers[i] = desc.data();
      args[i] = &pointers[i];
    }
  }
  std::vector<std::vector<int64_t>> descriptors;
  std::vector<void *> pointers;
  /// What the packed entry takes (`args.data()`); a resident entry's stream
  /// is appended by the caller.
  std::vector<void *> args;
};

} // namespace

Status Executable::runOnDevice(const std::vector<ConstTensorRef> &inputs,
                               const std::vector<TensorRef> &outputs,
                               void *stream, RunStats *stats) const {
  RunStats ignored;
  if (!stats)
    stats = &ignored;
  *stats = RunStats();
  if (!impl_)
    return Status::error("runOnDevice: empty Executable (not from a Compiler)");
  const Impl &impl = *impl_;
  if (!impl.cuda || !impl.deviceArguments)
    return Status::error(
        "runOnDevice: @" + impl.signature.function +
        " was not compiled for device buffers (it needs target sm90a with "
        "gpuMode resident; this one is " +
        std::string(toString(impl.target)) +
        (impl.gpuMode.empty() ? "" : ", gpuMode " + impl.gpuMode) +
        "): use run()");
  if (Status s = checkArguments(impl, inputs, outputs, /*routing=*/false); !s)
    return s;

  std::vector<const void *> data;
  for (const ConstTensorRef &in : inputs)
    data.push_back(in.data);
  for (const TensorRef &out : outputs)
    data.push_back(out.data);
  // The legacy default stream by its explicit handle (CU_STREAM_LEGACY):
  // for the runtime a null call stream means no call in progress, and it
  // then synchronizes around every allocation, free and descriptor upload.
  // torch's default stream is the null one.
  if (!stream)
    stream = reinterpret_cast<void *>(uintptr_t(0x1));
  MemRefArguments packed(impl.signature, data);
  packed.args.push_back(&stream);

  // The runtime's call stream and sticky error are per process: queuing
  // takes turns, the work on the device does not.
  std::lock_guard<std::mutex> gpuTurn(gpuMutex());
  if (Status s = loadKernels(impl); !s)
    return s;
  Clock::time_point callStart = Clock::now();
  impl.cuda->setCallStream(stream);
  Status called = callEntry(impl, packed.args.data());
  impl.cuda->setCallStream(nullptr);
  stats->callSeconds = secondsSince(callStart);
  if (!called)
    return called;
  // No runtime reset, even on an error: work queued before (this call's
  // or another stream's) may still read the tensor maps the runtime holds,
  // and the call frees its own workspace on the stream.
  std::string error = impl.cuda->takeError();
  if (!error.empty())
    return Status::error(error);
  return Status();
}

Status Executable::run(const std::vector<ConstTensorRef> &inputs,
                       const std::vector<TensorRef> &outputs,
                       RunStats *stats) const {
  std::vector<double> callSeconds;
  return runRepeated(inputs, outputs, 1, callSeconds, stats);
}

Status Executable::runRepeated(const std::vector<ConstTensorRef> &inputs,
                               const std::vector<TensorRef> &outputs,
                               int64_t calls, std::vector<double> &callSeconds,
                               RunStats *stats) const {
  RunStats ignored;
  if (!stats)
    stats = &ignored;
  *stats = RunStats();
  callSeconds.clear();
  if (!impl_)
    return Status::error("run: empty Executable (not from a Compiler)");
  if (calls < 1)
    return Status::error("runRepeated: " + std::to_string(calls) +
                         " calls (at least 1)");
  const Impl &impl = *impl_;
  const Signature &sig = impl.signature;
  if (Status s = checkArguments(impl, inputs, outputs, /*routing=*/true); !s)
    return s;

  std::unique_lock<std::mutex> gpuTurn(gpuMutex(), std::defer_lock);
  if (impl.cuda) {
    gpuTurn.lock();
    if (Status s = loadKernels(impl); !s)
      return s;
  }

  // gpuMode resident: the entry takes device buffers. Copy the caller's
  // in; outputs are written only after the call succeeded (a failing copy
  // back may leave the earlier outputs written).
  size_t count = inputs.size() + outputs.size();
  std::vector<void *> device;
  void *stream = nullptr;
  auto bufferSpec = [&](size_t i) -> const TensorSpec & {
    return i < inputs.size() ? sig.inputs[i] : sig.outputs[i - inputs.size()];
  };
  auto failRun = [&]() {
    std::string error = impl.cuda->takeError();
    impl.cuda->reset();
    return Status::error(error);
  };
  if (impl.deviceArguments) {
    Clock::time_point copyStart = Clock::now();
    stream = impl.cuda->streamCreate();
    for (size_t i = 0; i < count; ++i)
      device.push_back(impl.cuda->memAlloc(
          static_cast<int64_t>(bufferSpec(i).numBytes()), stream, 0));
    for (size_t i = 0; i < inputs.size(); ++i)
      impl.cuda->memcpy(device[i], const_cast<void *>(inputs[i].data),
                        static_cast<int64_t>(sig.inputs[i].numBytes()),
                        stream);
    impl.cuda->streamSynchronize(stream);
    stats->copySeconds += secondsSince(copyStart);
    if (impl.cuda->hasError())
      return failRun();
  }

  std::vector<const void *> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = impl.deviceArguments ? device[i]
              : i < inputs.size()  ? inputs[i].data
                                   : outputs[i - inputs.size()].data;
  MemRefArguments packed(sig, data);
  std::vector<void *> &args = packed.args;
  // The resident entry queues everything on the run's stream, last, and
  // returns without waiting: the synchronization that makes the results
  // readable is here, and callSeconds includes it, so it is the time of the
  // backward on the GPU, not of queuing it.
  if (impl.deviceArguments)
    args.push_back(&stream);
  Status called;
  for (int64_t call = 0; call < calls && called; ++call) {
    Clock::time_point callStart = Clock::now();
    if (impl.deviceArguments) {
      impl.cuda->setCallStream(stream);
      called = callEntry(impl, args.data());
      impl.cuda->setCallStream(nullptr);
      impl.cuda->streamSynchronize(stream);
    } else {
      called = callEntry(impl, args.data());
    }
    callSeconds.push_back(secondsSince(callStart));
    // A call after a failed one would only repeat the failure.
    if (impl.cuda && impl.cuda->hasError())
      break;
  }
  stats->callSeconds = callSeconds.empty() ? 0 : callSeconds.back();
  if (!impl.cuda)
    return called;
  if (!called) {
    // The host allocation failed between runtime calls: release what the
    // run left on the device, and report the allocation.
    (void)impl.cuda->takeError();
    impl.cuda->reset();
    return called;
  }
  // The first failing mgpu* call made every later one a no-op; report it,
  // then release what the run left on the device.
  if (impl.cuda->hasError())
    return failRun();
  if (impl.deviceArguments) {
    Clock::time_point copyStart = Clock::now();
    for (size_t i = 0; i < outputs.size(); ++i)
      impl.cuda->memcpy(outputs[i].data, device[inputs.size() + i],
                        static_cast<int64_t>(sig.outputs[i].numBytes()),
                        stream);
    impl.cuda->streamSynchronize(stream);
    stats->copySeconds += secondsSince(copyStart);
  }
  std::string error = impl.cuda->takeError();
  impl.cuda->reset();
  if (!error.empty())
    return Status::error(error);
  return Status();
}

//===----------------------------------------------------------------------===//
// Compiler
//===----------------------------------------------------------------------===//

Compiler::Compiler(CompilerOptions options) : impl_(std::make_unique<Impl>()) {
  installOutOfMemoryHandler();
  impl_->options = std::move(options);
}

Compiler::~Compiler() = default;

size_t Compiler::memoryCacheSize() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->memory.size();
}

void Compiler::clearMemoryCache() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->memory.clear();
}

/// Error unless the GPU option `name` is empty or one of `allowed`, and
/// empty on the host target.
static Status checkGPUChoice(const char *name, const std::string &value,
                             std::initializer_list<const char *> allowed,
                             Target target) {
  if (value.empty())
    return Status();
  if (llvm::none_of(allowed, [&](const char *a) { return value == a; })) {
    // "a or b", "a, b or c".
    std::string list;
    size_t i = 0;
    for (const char *a : allowed) {
      if (i++)
        list += i == allowed.size() ? " or " : ", ";
      list += a;
    }
    return Status::error(std::string(name) + " '" + value + "' is not " +
                         list);
  }
  if (target == Target::Host)
    return Status::error(std::string(name) +
                         " applies to GPU targets, not host");
  return Status();
}

Expected<Executable> Compiler::compile(const std::string &mlirText,
                                       const CompileOptions &options) {
  Clock::time_point start = Clock::now();
  if (options.optLevel < 0 || options.optLevel > 3)
    return Status::error("optLevel " + std::to_string(options.optLevel) +
                         " is outside [0, 3]");
  if (Status s = checkGPUChoice("mmaPath", options.mmaPath,
                                 {"fp8", "bf16", "bf16-operands", "block-scale"},
                                 options.target);
      !s)
    return s;
  if (Status s = checkGPUChoice("gpuMode", options.gpuMode,
                                 {"resident", "hybrid"}, options.target);
      !s)
    return s;
  if (Status s = checkGPUChoice("kernelFormat", options.kernelFormat,
                                 {"ptx", "cubin"}, options.target);
      !s)
    return s;
  bool writeKernels = !options.kernelDir.empty();
  if (writeKernels && !isGPUTarget(options.target))
    return Status::error("kernelDir applies to GPU targets, not host");
  // Sm90a: kernels as cubin when ptxas is here, else as PTX that the
  // driver compiles at load time. The runtime library resolves the
  // generated code's mgpu* calls; it needs the driver only when called,
  // at the first run.
  const CudaRuntimeApi *cuda = nullptr;
  std::string gpuFormat, toolkit;
  if (isGPUTarget(options.target)) {
    Expected<const CudaRuntimeApi *> runtime = loadCudaRuntime();
    if (!runtime)
      return runtime.status();
    cuda = *runtime;
    toolkit = findCudaToolkit();
    gpuFormat = toolkit.empty() ? "isa" : "bin";
    if (options.kernelFormat == "ptx")
      gpuFormat = "isa";
    if (options.kernelFormat == "cubin") {
      if (toolkit.empty())
        return Status::error("kernelFormat cubin needs ptxas, and no CUDA "
                             "toolkit was found (MOE_CUDA_ROOT, CUDA_ROOT, "
                             "CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH)");
      gpuFormat = "bin";
    }
  }

  Executable result;
  CompileInfo &info = result.info_;
  info.key = cacheKey(mlirText, options, gpuFormat);
  std::string memoryKey = info.key + ":O" + std::to_string(options.optLevel);
  if (impl_->options.memoryCache && !writeKernels) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->memory.find(memoryKey);
    if (it != impl_->memory.end()) {
      result.impl_ = it->second;
      info.source = CompileInfo::Source::MemoryCache;
      info.gpuMode = it->second->gpuMode;
      info.totalSeconds = secondsSince(start);
      return result;
    }
  }

  DialectRegistry registry;
  fillRegistry(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  // Threads only where they pay: a host compile is short, and runs without
  // threads of its own under a tight `ulimit -v` (ulimit-sweep.test).
  if (isGPUTarget(options.target))
    context.setThreadPool(impl_->threads());
  context.printOpOnDiagnostic(false);
  context.printStackTraceOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(mlirText, options.sourceName,
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  DiagnosticCollector diagnostics(context, sourceMgr);

  // Parse, verify, analyze the tensor-level module.
  ParserConfig config(&context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, config);
  if (!module)
    return Status::error(diagnostics.take());
  Analysis analysis;
  std::string error;
  if (failed(analyze(*module, options, analysis, error)))
    return Status::error(error.empty() ? diagnostics.take() : error);
  std::shared_ptr<Executable::Impl> impl = analysis.impl;
  if (isGPUTarget(options.target)) {
    // Every GEMM the dialect accepts has GPU kernels, so resident unless
    // hybrid is asked for.
    impl->deviceArguments = options.gpuMode != "hybrid";
    info.gpuMode = impl->deviceArguments ? "resident" : "hybrid";
    impl->gpuMode = info.gpuMode;
  }
  // Hand-set kernel configurations, parsed before anything is lowered.
  SmallVector<std::pair<unsigned, Attribute>> gemmConfigs;
  if (!options.gemmConfigs.empty() && !isGPUTarget(options.target))
    return Status::error(options.sourceName +
                         ": GEMM kernel configurations need a GPU target");
  for (const auto &[index, text] : options.gemmConfigs) {
    Attribute attr = parseAttribute(text, &context);
    if (!isa_and_nonnull<mlir::moe::GemmConfigAttr>(attr)) {
      std::string why = diagnostics.take();
      return Status::error(options.sourceName + ": the configuration of GEMM " +
                           std::to_string(index) +
                           " is not a #moe.gemm_config: '" + text + "'" +
                           (why.empty() ? "" : "\n" + why));
    }
    gemmConfigs.push_back({index, attr});
  }
  info.parseSeconds = secondsSince(start);
  auto finish = [&]() -> Expected<Executable> {
    result.impl_ = impl;
    if (impl_->options.memoryCache) {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->memory.emplace(memoryKey, impl);
    }
    info.totalSeconds = secondsSince(start);
    return result;
  };

  // The disk cache's object code of this key, optimization level and host
  // CPU: no lowering and no code generation.
  const std::string cacheDir = writeKernels ? "" : impl_->options.cacheDir;
  impl->cuda = cuda;
  std::string objectPath;
  if (!cacheDir.empty()) {
    objectPath = objectCachePath(
        cacheDir, info.key + "-O" + std::to_string(options.optLevel));
    Clock::time_point loadStart = Clock::now();
    if (loadObjectCode(objectPath, *impl)) {
      info.source = CompileInfo::Source::DiskCache;
      info.codegenSeconds = secondsSince(loadStart);
      return finish();
    }
  }

  // Lower, or reload a lowering from the disk cache.
  std::string cachePath;
  OwningOpRef<ModuleOp> lowered;
  if (!cacheDir.empty()) {
    llvm::SmallString<256> path(cacheDir);
    llvm::sys::path::append(path, info.key + ".mlirbc");
    cachePath = path.str().str();
    lowered = loadCached(context, cachePath);
  }
  if (lowered) {
    info.source = CompileInfo::Source::DiskCache;
    if (Status s = checkLowered(*lowered, impl->signature, cachePath,
                                options.target, impl->deviceArguments);
        !s)
      return s;
  } else {
    Clock::time_point pipelineStart = Clock::now();
    // The pipeline may reuse an input's buffer for a result unless told the
    // caller's inputs are read-only.
    auto readOnly = BoolAttr::get(&context, false);
    for (unsigned i = 0; i < analysis.entry.getNumArguments(); ++i)
      analysis.entry.setArgAttr(i, "bufferization.writable", readOnly);
    PassManager pm(&context, ModuleOp::getOperationName());
    std::string overrideError;
    if (!gemmConfigs.empty())
      pm.addInstrumentation(std::make_unique<GemmConfigOverrides>(
          gemmConfigs, overrideError));
    // The GPU pipelines run moe-fuse themselves: the kernels take their
    // epilogues from its regions.
    auto gpuOptions = [&](auto &pipelineOptions) {
      pipelineOptions.allocHooks = true;
      pipelineOptions.chip = chipOf(options.target);
      pipelineOptions.format = gpuFormat;
      pipelineOptions.toolkit = toolkit;
      pipelineOptions.mmaPath = options.mmaPath;
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  pipelineOptions.FIELD = options.FIELD;
#include "moe/Pipelines/KernelChoices.def"
    };
    if (impl->deviceArguments) {
      mlir::moe::GPUResidentPipelineOptions pipelineOptions;
      gpuOptions(pipelineOptions);
      mlir::moe::buildGPUResidentPipeline(pm, pipelineOptions);
    } else if (isGPUTarget(options.target)) {
      mlir::moe::GPUHybridPipelineOptions pipelineOptions;
      gpuOptions(pipelineOptions);
      mlir::moe::buildGPUHybridPipeline(pm, pipelineOptions);
    } else {
      mlir::moe::HostPipelineOptions pipelineOptions;
      pipelineOptions.fuse = options.fuse;
      pipelineOptions.allocHooks = true;
      mlir::moe::buildHostPipeline(pm, pipelineOptions);
    }
    if (failed(pm.run(*module))) {
      std::string text = diagnostics.take();
      return Status::error(text.empty() ? options.sourceName +
                                              ": the lowering pipeline failed"
                                        : text);
    }
    if (!overrideError.empty())
      return Status::error(options.sourceName + ": " + overrideError);
    if (Status s = checkLowered(*module, impl->signature, options.sourceName,
                                options.target, impl->deviceArguments);
        !s)
      return s;
    if (writeKernels)
      if (Status s = writeKernelFiles(*module, options.kernelDir,
                                      info.kernelFiles);
          !s)
        return s;
    lowered = std::move(module);
    info.pipelineSeconds = secondsSince(pipelineStart);
    if (!cachePath.empty())
      if (Status s = storeCached(*lowered, cacheDir, cachePath); !s)
        return s;
  }

  Clock::time_point codegenStart = Clock::now();
  if (Status s = generateCode(*lowered, options.optLevel, *impl, objectPath);
      !s) {
    std::string text = diagnostics.take();
    return Status::error(s.message() + (text.empty() ? "" : "\n" + text));
  }
  info.codegenSeconds = secondsSince(codegenStart);
  return finish();
}

namespace moe::jit {
std::string defaultCacheDir() {
  if (const char *dir = std::getenv("MOE_MLIR_CACHE_DIR"))
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/moe-mlir";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/moe-mlir";
  return std::string();
}
} // namespace moe::jit

Expected<Executable> Compiler::compileFile(const std::string &path,
                                           CompileOptions options) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::error(path + ": cannot open file (" + std::strerror(errno) +
                         ")");
  std::stringstream buffer;
  buffer << file.rdbuf();
  if (options.sourceName == CompileOptions().sourceName)
    options.sourceName = path;
  return compile(buffer.str(), options);
}

Expected<Executable> Compiler::compileLayer(const LayerDesc &layer,
                                            const CompileOptions &options) {
  Expected<std::string> text = layerToMLIR(layer);
  if (!text)
    return text.status();
  CompileOptions layerOptions = options;
  if (layerOptions.sourceName == CompileOptions().sourceName)
    layerOptions.sourceName = "<layer>";
  return compile(*text, layerOptions);
}

//===----------------------------------------------------------------------===//
// Layer modules
//===----------------------------------------------------------------------===//

namespace moe::jit {

Expected<std::string> layerToMLIR(const LayerDesc &layer,
                                  const std::string &function) {
  for (auto [name, value] : {std::pair<const char *, int64_t>{"T", layer.T},
                             {"H", layer.H},
                             {"I", layer.I},
                             {"E", layer.E},
                             {"K", layer.K},
                             {"B", layer.B}})
    if (value < 1 || value > (1 << 20))
      return Status::error(std::string("invalid layer: ") + name + "=" +
                           std::to_string(value) + " is not in [1, 1048576]");
  DialectRegistry registry;
  registry.insert<mlir::moe::MoeDialect, func::FuncDialect>();
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  std::string problems;
  ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      problems += (problems.empty() ? "" : "; ") + diag.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = buildLayerModule(context, layer, function);
  if (failed(verify(*module)))
    return Status::error("invalid layer: " + problems);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace moe::jit
