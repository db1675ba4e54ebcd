//===- Pipelines.cpp - the compiler's pass pipelines ----------------------===//
//
// The host pipeline, from moe IR on tensors to the LLVM dialect:
//
//   moe.blockwise_bwd
//     moe-decompose-bwd, [moe-fuse]          phase-level ops (kernel regions)
//     convert-moe-to-linalg                  linalg / tensor / scf on tensors,
//                                            inputs marked read only
//     convert-elementwise-to-linalg, canonicalize
//     one-shot-bufferize (function boundaries, identity layouts)
//     buffer-results-to-out-params           results -> trailing out-params
//     llvm-request-c-wrappers                _mlir_ciface_<name> for callers
//     buffer-deallocation-pipeline           frees every temporary
//     moe-results-in-place                   results computed in their
//                                            out-parameters, no copy
//     moe-free-after-last-use                each free after the last use
//     convert-linalg-to-loops, scf-to-cf
//     arith-expand (bf16), math-to-libm      no soft-float runtime needed
//     expand-strided-metadata, lower-affine, ... -to-llvm
//   llvm dialect
//
// the GPU device pipeline, from moe IR to serialized kernels:
//
//   moe IR
//     moe-gpu-kernel-config{chip}            #moe.gemm_config on every GEMM
//     convert-moe-to-nvgpu{chip}             gpu.module @moe_kernels (gpu,
//                                            nvgpu, nvvm, llvm, memref, scf)
//     in gpu.module: nvgpu-to-nvvm, scf-to-cf, gpu-to-nvvm (bare pointers,
//       64-bit index), nvvm-to-llvm, expand-strided-metadata, arith-to-llvm,
//       index-to-llvm, canonicalize, cse, reconcile-unrealized-casts
//     nvvm-attach-target{chip, features}     from the chip's TargetInfo
//     moe-gpu-module-to-binary{format}       gpu.binary (PTX / cubin), the
//                                            modules in parallel
//
// and the hybrid GPU pipeline, which joins them:
//
//   moe.blockwise_bwd
//     moe-decompose-bwd, moe-fuse            kernel regions
//     moe-gpu-kernel-config{chip}            #moe.gemm_config on every GEMM
//     convert-moe-to-nvgpu{chip}             kernels + calls of launch
//                                            functions (declarations)
//     moe-gpu-split-kernel-modules           a gpu.module per kernel
//     kernel lowering and serialization      as in the device pipeline
//     the host pipeline's tensor lowering,   everything else on the host
//       bufferization and deallocation
//     moe-lower-gpu-launches                 launch bodies: gpu.alloc,
//                                            memcpy, TMA descriptors,
//                                            gpu.launch_func
//     loops ... lower-affine, nvgpu-to-nvvm, gpu-to-llvm (mgpu* calls),
//     then the host pipeline's LLVM conversions
//   llvm dialect + gpu.binary + gpu.launch_func
//
// and the device-resident GPU pipeline, with every phase on the GPU:
//
//   moe.blockwise_bwd
//     moe-decompose-bwd, moe-fuse
//     moe-gpu-kernel-config{chip}, convert-moe-to-nvgpu{chip}, kernel
//       lowering and serialization (GEMMs)
//     convert-moe-to-linalg{parallel-slot-ops}, bufferization, deallocation,
//     moe-results-in-place, moe-free-after-last-use
//     moe-gpu-reductions-innermost, convert-linalg-to-parallel-loops,
//     moe-gpu-loop-shape, gpu-map-parallel-loops,
//     convert-parallel-loops-to-gpu        one gpu.launch per loop nest
//     moe-gpu-device-buffers               gpu.alloc / gpu.memcpy
//     gpu-launch-sink-index-computations, gpu-kernel-outlining,
//     moe-lower-gpu-launches{device-arguments}
//                                          GEMM launches at their calls
//     moe-gpu-async-region{caller-stream}  everything on the caller's
//                                          stream, no synchronization
//                                          (host-arguments: upstream
//                                          gpu-async-region)
//     in the new gpu.modules: arith-expand (bf16), lower-affine, gpu-to-nvvm
//       ..., then nvvm-attach-target, moe-gpu-module-to-binary
//     the host pipeline's LLVM conversions with gpu-to-llvm
//   llvm dialect + gpu.binary ops + gpu.launch_func
//
// and the registration of the pipelines, of the upstream passes the tests
// run one by one, and of the dialects and external models the pipelines
// need.
//
//===----------------------------------------------------------------------===//
#include "moe/Pipelines/Pipelines.h"

#include "moe/Conversion/MoeToNVGPU/MXGemm.h"
#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Conversion/Passes.h"
#include "moe/GPU/Transforms/Passes.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"
#include "moe/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/RequestCWrappers.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {

using namespace mlir::moe;

/// Lowers the kernels of the gpu.modules for `target` and serializes each
/// module into a gpu.binary. The kernels take TMA descriptors and
/// global buffers as bare pointers, so that convert-gpu-to-nvvm needs no
/// memref descriptors in gpu.func signatures; nvgpu ops are lowered first,
/// while their types are still visible.
void addKernelSerialization(OpPassManager &pm, const TargetInfo &target,
                            StringRef format, StringRef toolkit,
                            bool elementwise = false) {
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  if (elementwise) {
    // The outlined loop nests of the device-resident pipeline: bf16
    // conversions as integer code, as on the host (same bits), and the
    // affine index arithmetic of the loop shaping.
    arith::ArithExpandOpsPassOptions expand;
    expand.includeBf16 = true;
    kernels.addPass(arith::createArithExpandOpsPass(expand));
    kernels.addPass(createLowerAffinePass());
  } else {
    // Before libdevice calls hide them: the activation backward of an
    // epilogue evaluates sigmoid(g) for act(g) and for act'(g).
    kernels.addPass(createCSEPass());
    kernels.addPass(createConvertNVGPUToNVVMPass());
  }
  kernels.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.useBarePtrCallConv = !elementwise;
  toNVVM.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(memref::createExpandStridedMetadataPass());
  kernels.addPass(createArithToLLVMConversionPass());
  kernels.addPass(createConvertIndexToLLVMPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());

  GpuNVVMAttachTargetOptions attach;
  attach.chip = target.getChip().str();
  attach.features = target.getFeatures().str();
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  MoeGPUModuleToBinaryOptions binary;
  binary.format = format.str();
  binary.toolkit = toolkit.str();
  // ptxas compiles the kernels of a module on every core, beside the other
  // modules' serializations (a cold compile of the shape-1 layer spent
  // half its time in ptxas: 2.1 s on one core for the GEMM module). The
  // option reaches only ptxas (format=bin or fatbin; isa runs no tool).
  binary.cmdOptions = "--split-compile 0";
  pm.addPass(createMoeGPUModuleToBinary(binary));
}

/// How much of the host lowering runs on the GPU.
enum class HostLowering {
  /// Everything on the host.
  Host,
  /// The GEMM kernels of convert-moe-to-nvgpu, the rest on the host.
  Hybrid,
  /// Every phase on the GPU, every buffer in device memory.
  Resident,
};

/// The device-resident part: loops to GPU launches, buffers to device
/// memory, kernels outlined, lowered and serialized, host ops async.
void addResidentLowering(OpPassManager &pm,
                         const GPUResidentPipelineOptions &options,
                         const TargetInfo &target) {
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createMoeGPUReductionsInnermost());
  func.addPass(createConvertLinalgToParallelLoopsPass());
  MoeGPULoopShapeOptions shape;
  shape.block = options.block;
  func.addPass(createMoeGPULoopShape(shape));
  func.addPass(createGpuMapParallelLoopsPass());
  func.addPass(createConvertParallelLoopToGpuPass());
  MoeGPUDeviceBuffersOptions buffers;
  buffers.hostArguments = options.hostArguments;
  func.addPass(createMoeGPUDeviceBuffers(buffers));
  func.addPass(createCanonicalizerPass());
  func.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // The GEMM launches join the entry only now: moe-gpu-device-buffers
  // tells an argument written in place by the calls.
  LowerMoeGPULaunchesOptions launches;
  launches.deviceArguments = true;
  pm.addPass(createLowerMoeGPULaunches(launches));
  MoeGPUAsyncRegionOptions async;
  async.callerStream = !options.hostArguments;
  pm.addNestedPass<func::FuncOp>(createMoeGPUAsyncRegion(async));
  addKernelSerialization(pm, target, options.format, options.toolkit,
                         /*elementwise=*/true);
}

/// The host lowering from the decomposed (or fused) moe IR on; `mode`
/// says what runs on the GPU (`resident` holds its options then).
/// `allocHooks`: host buffers come from the _mlir_memref_to_llvm_* hooks.
void addHostLowering(OpPassManager &pm, HostLowering mode, bool allocHooks,
                     const GPUResidentPipelineOptions *resident = nullptr,
                     const TargetInfo *target = nullptr,
                     bool parallelSlotOps = false) {
  bool gpu = mode != HostLowering::Host;
  // moe IR -> linalg on tensors.
  ConvertMoeToLinalgOptions toLinalg;
  toLinalg.parallelSlotOps =
      parallelSlotOps || mode == HostLowering::Resident;
  pm.addPass(createConvertMoeToLinalg(toLinalg));
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());

  // Tensors -> buffers, with the calling convention of Pipelines.h: every
  // tensor argument becomes an identity-layout memref and every result an
  // out-parameter after the inputs (a result computed in a buffer of its
  // own is computed in the out-parameter itself, others are copied there).
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  // Requested before the deallocation pipeline adds helper functions, so
  // only the functions of the input get a C interface.
  pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  // Results computed in their out-parameters (no copy at the end), and
  // every temporary freed after its last use rather than at the end.
  pm.addNestedPass<func::FuncOp>(createMoeResultsInPlace());
  pm.addNestedPass<func::FuncOp>(createMoeFreeAfterLastUse());
  // The launch functions get their bodies only now: buffer deallocation
  // cannot handle gpu host ops.
  if (mode == HostLowering::Hybrid)
    pm.addPass(createLowerMoeGPULaunches());
  if (mode == HostLowering::Resident)
    addResidentLowering(pm, *resident, *target);

  // Buffers -> loops -> LLVM. bf16 conversions become integer code and the
  // f64 exp / tanh of the activations libm calls (the functions the
  // reference calls), so the JIT needs no compiler runtime.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createSCFToControlFlowPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // TMA descriptors become mgpuTensorMapEncodeTiledMemref calls, the other
  // gpu host ops mgpu* calls; gpu.launch_func stays for the translation.
  if (gpu) {
    pm.addPass(createConvertNVGPUToNVVMPass());
    pm.addPass(createGpuToLLVMConversionPass());
  }
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  if (allocHooks)
    pm.addPass(createMoeAllocHooks());
}

} // namespace

void moe::buildHostPipeline(OpPassManager &pm,
                            const HostPipelineOptions &options) {
  pm.addPass(createMoeDecomposeBwd());
  if (options.fuse)
    pm.addPass(createMoeFuse());
  addHostLowering(pm, HostLowering::Host, options.allocHooks,
                  /*resident=*/nullptr,
                  /*target=*/nullptr, options.parallelSlotOps);
}

/// convert-moe-to-nvgpu for `chip`, then the serialization of its kernels.
/// Returns false when the chip is unknown: convert-moe-to-nvgpu reports it
/// and fails, so nothing more is added.
template <typename Options>
static bool addGPUKernels(OpPassManager &pm, const Options &options,
                          bool splitModules = true) {
  StringRef chip = options.chip, mmaPath = options.mmaPath;
  MoeGPUKernelConfigOptions config;
  config.chip = chip.str();
  config.mmaPath = mmaPath.str();
  ConvertMoeToNVGPUOptions convert;
  convert.chip = chip.str();
  convert.mmaPath = mmaPath.str();
  // Each kernel choice goes to the passes its PASSES column names.
#define MOE_COPY_KERNEL_CHOICE_Config(FIELD) config.FIELD = options.FIELD;
#define MOE_COPY_KERNEL_CHOICE_Convert(FIELD) convert.FIELD = options.FIELD;
#define MOE_COPY_KERNEL_CHOICE_ConfigAndConvert(FIELD)                         \
  MOE_COPY_KERNEL_CHOICE_Config(FIELD) MOE_COPY_KERNEL_CHOICE_Convert(FIELD)
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  MOE_COPY_KERNEL_CHOICE_##PASSES(FIELD)
#include "moe/Pipelines/KernelChoices.def"
#undef MOE_COPY_KERNEL_CHOICE_Config
#undef MOE_COPY_KERNEL_CHOICE_Convert
#undef MOE_COPY_KERNEL_CHOICE_ConfigAndConvert
  pm.addPass(createMoeGPUKernelConfig(config));
  pm.addPass(createConvertMoeToNVGPU(convert));
  std::optional<TargetInfo> target = TargetInfo::lookup(chip);
  if (!target)
    return false;
  // Kernels in modules of their own compile in parallel. The device
  // pipeline keeps @moe_kernels whole: its output is read as one PTX file.
  if (splitModules)
    pm.addPass(createMoeGPUSplitKernelModules());
  addKernelSerialization(pm, *target, options.format, options.toolkit);
  return true;
}

void moe::buildGPUDevicePipeline(OpPassManager &pm,
                                 const GPUDevicePipelineOptions &options) {
  addGPUKernels(pm, options, /*splitModules=*/false);
}

void moe::buildGPUHybridPipeline(OpPassManager &pm,
                                 const GPUHybridPipelineOptions &options) {
  // The kernel regions of moe-fuse are what convert-moe-to-nvgpu builds
  // its kernels from (a GEMM with its epilogue).
  pm.addPass(createMoeDecomposeBwd());
  pm.addPass(createMoeFuse());
  if (addGPUKernels(pm, options))
    addHostLowering(pm, HostLowering::Hybrid, options.allocHooks);
}

void moe::buildGPUResidentPipeline(OpPassManager &pm,
                                   const GPUResidentPipelineOptions &options) {
  pm.addPass(createMoeDecomposeBwd());
  pm.addPass(createMoeFuse());
  if (!addGPUKernels(pm, options))
    return;
  TargetInfo target = *TargetInfo::lookup(options.chip);
  addHostLowering(pm, HostLowering::Resident, options.allocHooks, &options,
                  &target);
}

void moe::registerMoePipelines() {
  PassPipelineRegistration<HostPipelineOptions>(
      "moe-host-pipeline",
      "Lower moe IR to the LLVM dialect for the host JIT (results become "
      "out-parameters, every function gets a _mlir_ciface_ wrapper)",
      buildHostPipeline);
  PassPipelineRegistration<GPUDevicePipelineOptions>(
      "moe-gpu-device-pipeline",
      "Emit the GPU kernels of moe IR for a chip and serialize them into a "
      "gpu.binary (PTX or cubin); the host side is left as it is",
      buildGPUDevicePipeline);
  PassPipelineRegistration<GPUHybridPipelineOptions>(
      "moe-gpu-hybrid-pipeline",
      "Lower moe IR to the LLVM dialect with the MX GEMMs as GPU "
      "kernels (serialized into a gpu.binary, launched through the mgpu* "
      "runtime) and everything else on the host",
      buildGPUHybridPipeline);
  PassPipelineRegistration<GPUResidentPipelineOptions>(
      "moe-gpu-pipeline",
      "Lower moe IR to the LLVM dialect with every phase on the GPU and "
      "every buffer in device memory (the caller passes device buffers "
      "unless host-arguments)",
      buildGPUResidentPipeline);

  // The upstream passes of the pipeline, for tests that run them alone.
  registerCanonicalizerPass();
  registerCSEPass();
  bufferization::registerOneShotBufferizePass();
  bufferization::registerBufferResultsToOutParamsPass();
  bufferization::registerBufferizationPipelines();
  registerConvertBufferizationToMemRefPass();
  registerConvertElementwiseToLinalgPass();
  registerConvertLinalgToLoopsPass();
  LLVM::registerLLVMRequestCWrappersPass();
  registerSCFToControlFlowPass();
  arith::registerArithExpandOpsPass();
  registerConvertMathToLibmPass();
  memref::registerExpandStridedMetadataPass();
  registerLowerAffinePass();
  registerFinalizeMemRefToLLVMConversionPass();
  registerConvertMathToLLVMPass();
  registerArithToLLVMConversionPass();
  registerConvertControlFlowToLLVMPass();
  registerConvertFuncToLLVMPass();
  registerReconcileUnrealizedCastsPass();
  registerConvertNVGPUToNVVMPass();
  registerConvertGpuOpsToNVVMOps();
  registerConvertNVVMToLLVMPass();
  registerConvertIndexToLLVMPass();
  registerGpuNVVMAttachTarget();
  registerGpuToLLVMConversionPass();
  registerConvertLinalgToParallelLoopsPass();
  registerGpuMapParallelLoopsPass();
  registerConvertParallelLoopToGpuPass();
  registerGpuLaunchSinkIndexComputationsPass();
  registerGpuKernelOutliningPass();
  registerGpuAsyncRegionPass();
}

void moe::registerPipelineDependencies(DialectRegistry &registry) {
  registry.insert<MoeDialect, affine::AffineDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect,
                  func::FuncDialect, gpu::GPUDialect, index::IndexDialect,
                  linalg::LinalgDialect, LLVM::LLVMDialect, math::MathDialect,
                  memref::MemRefDialect, nvgpu::NVGPUDialect,
                  NVVM::NVVMDialect, scf::SCFDialect, tensor::TensorDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // The GPU pipeline: convert-gpu-to-nvvm also applies the ConvertToLLVM
  // interfaces of the dialects in the kernels; moe-gpu-module-to-binary
  // serializes through the NVVM target attribute and its translation.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}
