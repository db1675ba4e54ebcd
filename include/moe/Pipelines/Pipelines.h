//===- Pipelines.h - the compiler's pass pipelines ----------------*- C++ -*-===//
//
// Every pipeline of the compiler is assembled here and nowhere else (the
// IREE Passes.cpp pattern), so moe-opt, moe-run and the JIT API run the
// same passes in the same order.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_PIPELINES_PIPELINES_H
#define MOE_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace mlir {
class DialectRegistry;
class ModuleOp;
} // namespace mlir

namespace mlir::moe {

/// The `alloc-hooks` option of the pipelines that reach the LLVM dialect.
inline constexpr const char *kAllocHooksDescription =
    "Allocate host buffers through _mlir_memref_to_llvm_alloc / "
    "_mlir_memref_to_llvm_free instead of malloc / free (the JIT provides "
    "them and turns a failed allocation into an error of the run; a "
    "program that runs the module must define them)";

/// Options of the host pipeline.
struct HostPipelineOptions : public PassPipelineOptions<HostPipelineOptions> {
  PassOptions::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Form kernel regions (moe-fuse) before lowering; the "
                     "host result is the same either way"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> allocHooks{
      *this, "alloc-hooks",
      llvm::cl::desc(kAllocHooksDescription), llvm::cl::init(false)};
  PassOptions::Option<bool> parallelSlotOps{
      *this, "parallel-slot-ops",
      llvm::cl::desc("Lower affinity_grad, scatter_add_rows and expert_sum "
                     "in the parallel form of the GPU pipeline (run here "
                     "as loops), to check that form on a CPU"),
      llvm::cl::init(false)};
};

/// moe IR (moe.blockwise_bwd or the decomposed / fused form) on tensors ->
/// LLVM dialect ready for the ExecutionEngine: moe-decompose-bwd,
/// optionally moe-fuse, convert-moe-to-linalg, one-shot bufferization with
/// function boundaries (results become out-parameters), loops, LLVM.
///
/// Calling convention of the result (the contract with the JIT). For every
/// public `func.func @name(%in0: tensor<..>, ...) -> (tensor<..>, ...)` the
/// module holds `@name` with expanded descriptors and the C wrapper
///
///   void _mlir_ciface_name(StridedMemRefType<T0, R0> *in0, ...,
///                          StridedMemRefType<U0, Q0> *out0, ...);
///
/// - inputs first, in the original order, then one out-parameter per result
///   in the original order; nothing is returned;
/// - every descriptor describes a dense row-major buffer with an identity
///   layout: `data` points at element 0, offset 0, the static sizes of the
///   tensor type, strides {prod(sizes[1:]), ..., 1} (the code uses the
///   static shape; `basePtr` is not read);
/// - element storage: f32 `float`, i32 `int32_t`, bf16 `uint16_t` (bits),
///   f8E4M3FN / f8E5M2 codes and f8E8M0FNU scales `uint8_t`;
/// - inputs are read only (convert-moe-to-linalg marks them
///   `bufferization.writable = false`); out-parameters are caller-owned and
///   completely overwritten, so they need no initialization;
/// - temporaries are malloc'ed and freed inside the call (ownership-based
///   deallocation), so repeated calls do not leak; nothing is retained;
/// - the code calls only `malloc`, `free`, `memcpy` (via llvm.memcpy) and
///   the libm functions `exp` and `tanh` (f64): no MLIR runtime library.
void buildHostPipeline(OpPassManager &pm, const HostPipelineOptions &options);

/// The options both GPU pipelines share: the chip, the MMA path, the kernel
/// choices (KernelChoices.def) and the CUDA toolkit. `Derived` adds
/// `format`, whose default differs.
template <typename Derived>
struct GPUKernelPipelineOptions : public PassPipelineOptions<Derived> {
  typename PassPipelineOptions<Derived>::template Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("The NVIDIA chip (TargetInfo; supported: sm_90a)"),
      llvm::cl::init("sm_90a")};
  typename PassPipelineOptions<Derived>::template Option<std::string> mmaPath{
      *this, "mma-path",
      llvm::cl::desc("The MMA path of the GEMMs: fp8, bf16 or bf16-operands "
                     "(default: the chip's, TargetInfo)"),
      llvm::cl::init("")};
  // One option per kernel choice of KernelChoices.def, named as there; its
  // description says which passes the pipelines give it to.
#define MOE_KERNEL_CHOICE_PASSES_Config "moe-gpu-kernel-config"
#define MOE_KERNEL_CHOICE_PASSES_Convert "convert-moe-to-nvgpu"
#define MOE_KERNEL_CHOICE_PASSES_ConfigAndConvert                              \
  "moe-gpu-kernel-config and convert-moe-to-nvgpu"
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  typename PassPipelineOptions<Derived>::template Option<TYPE> FIELD{          \
      *this, OPTION,                                                           \
      llvm::cl::desc(DESC " (default: " #DEFAULT                               \
                          "; passed to " MOE_KERNEL_CHOICE_PASSES_##PASSES     \
                     ")"),                                                     \
      llvm::cl::init(DEFAULT)};
#include "moe/Pipelines/KernelChoices.def"
#undef MOE_KERNEL_CHOICE_PASSES_Config
#undef MOE_KERNEL_CHOICE_PASSES_Convert
#undef MOE_KERNEL_CHOICE_PASSES_ConfigAndConvert
  typename PassPipelineOptions<Derived>::template Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit root for ptxas (format bin / fatbin); "
                     "empty: PATH, then CUDA_ROOT / CUDA_HOME / CUDA_PATH"),
      llvm::cl::init("")};
};

/// Options of the GPU device pipeline.
struct GPUDevicePipelineOptions
    : public GPUKernelPipelineOptions<GPUDevicePipelineOptions> {
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu-module-to-binary embeds: isa (PTX), bin "
                     "(cubin, runs ptxas) or fatbin"),
      llvm::cl::init("isa")};
};

/// moe IR -> the module with its kernels serialized: convert-moe-to-nvgpu
/// emits the kernels into `gpu.module @moe_kernels`, which is lowered to
/// NVVM / LLVM (TMA descriptors and global buffers as bare pointers),
/// given the chip's target (nvvm-attach-target with the chip and PTX
/// features of its TargetInfo, O3) and serialized in place into a
/// `gpu.binary` (gpu-module-to-binary). The host side is left as it is.
void buildGPUDevicePipeline(OpPassManager &pm,
                            const GPUDevicePipelineOptions &options);

/// The options of the GPU pipelines that reach the LLVM dialect: the
/// shared ones, and `format` with cubin as its default.
template <typename Derived>
struct GPULoweringPipelineOptions : public GPUKernelPipelineOptions<Derived> {
  typename PassPipelineOptions<Derived>::template Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu-module-to-binary embeds: bin (cubin, runs "
                     "ptxas), isa (PTX, JIT-compiled by the driver) or "
                     "fatbin"),
      llvm::cl::init("bin")};
  typename PassPipelineOptions<Derived>::template Option<bool> allocHooks{
      *this, "alloc-hooks", llvm::cl::desc(kAllocHooksDescription),
      llvm::cl::init(false)};
};

/// Options of the hybrid GPU pipeline.
struct GPUHybridPipelineOptions
    : public GPULoweringPipelineOptions<GPUHybridPipelineOptions> {};

/// moe IR -> LLVM dialect with the MX GEMMs on the GPU: moe-decompose-
/// bwd (no fusion), convert-moe-to-nvgpu (kernels + launch functions), the
/// kernels serialized as in buildGPUDevicePipeline, then the host lowering
/// of buildHostPipeline for everything else, with moe-lower-gpu-launches
/// after buffer deallocation and nvgpu-to-nvvm / gpu-to-llvm before the
/// final LLVM conversions. The calling convention is the host pipeline's;
/// the module also holds the gpu.binary and gpu.launch_func ops, which the
/// LLVM IR translation turns into the embedded image, its load in a global
/// constructor and mgpu* calls, so the JIT must provide the mgpu* runtime
/// (libmoe_cuda_runtime).
void buildGPUHybridPipeline(OpPassManager &pm,
                            const GPUHybridPipelineOptions &options);

/// Options of the device-resident GPU pipeline.
struct GPUResidentPipelineOptions
    : public GPULoweringPipelineOptions<GPUResidentPipelineOptions> {
  PassOptions::Option<bool> hostArguments{
      *this, "host-arguments",
      llvm::cl::desc("The entry's buffers are host memory, copied to the "
                     "device at entry and back at exit; false (default): "
                     "the caller passes device buffers"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> block{
      *this, "block",
      llvm::cl::desc("Threads per block of the elementwise kernels"),
      llvm::cl::init(256)};
};

/// moe IR -> LLVM dialect with every phase on the GPU and every buffer in
/// device memory: the MX GEMMs as in buildGPUHybridPipeline, the rest
/// (gathers, quantizations, activation backward, affinity gradient, dx
/// sums) lowered as on the host with the slot ops in their parallel form
/// (convert-moe-to-linalg{parallel-slot-ops}), then linalg -> scf.parallel
/// -> gpu.launch (reductions innermost, one thread per output element,
/// moe-gpu-loop-shape), buffers in device memory (moe-gpu-device-buffers),
/// kernels outlined and serialized, the GEMM launches emitted at their calls
/// (moe-lower-gpu-launches{device-arguments}) and every gpu host op queued
/// in program order on one stream (moe-gpu-async-region). The calling
/// convention is the host pipeline's with device buffers and one more
/// argument, last: the stream (a CUstream, as !llvm.ptr) on which the
/// function queues all its work, allocations and frees (stream-ordered)
/// included. It creates no stream and never synchronizes: the results are
/// ready once the caller has synchronized with that stream. With
/// host-arguments the buffers are host memory and the function
/// synchronizes before it returns, on a stream of its own, as the host
/// pipeline's convention needs. Every GEMM the dialect accepts becomes GPU
/// kernels (isGPUGemm); one that did not would stay on the host and fail to
/// lower, moe-gpu-device-buffers reporting the host access.
void buildGPUResidentPipeline(OpPassManager &pm,
                              const GPUResidentPipelineOptions &options);

/// Registers the named pipelines ("moe-host-pipeline",
/// "moe-gpu-device-pipeline", "moe-gpu-hybrid-pipeline",
/// "moe-gpu-pipeline") and the upstream
/// passes the project's tests invoke individually.
void registerMoePipelines();

/// Adds the dialects and external interface models (bufferization, LLVM
/// translation) that the pipelines need to `registry`.
void registerPipelineDependencies(DialectRegistry &registry);

} // namespace mlir::moe

#endif // MOE_PIPELINES_PIPELINES_H
