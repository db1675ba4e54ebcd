//===- Passes.td - GPU-side transforms of the lowered moe IR -*- tablegen -*-===//
//
// Transforms of upstream GPU IR that the moe pipelines need: the host code
// of the GEMM launches, the shape of the mapped elementwise loops, device
// buffers, and one stream per call. They are not conversions out of the moe
// dialect (those are in moe/Conversion), so they live apart.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_GPU_TRANSFORMS_PASSES_TD
#define MOE_GPU_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerMoeGPULaunches : Pass<"moe-lower-gpu-launches", "::mlir::ModuleOp"> {
  let summary = "Emit the host code of the kernel launches of convert-moe-to-nvgpu";
  let description = [{
    Gives every function declaration carrying a `moe.gpu_launch` record (a
    `#moe.gpu_launch` attribute, made by convert-moe-to-nvgpu) its body: on
    one stream, device buffers (`gpu.alloc`) for its memref arguments, the
    inputs copied in (`gpu.memcpy`), the TMA descriptors of `tensor_maps`
    (`nvgpu.tma.create.descriptor` over the device bytes viewed as ui8
    [rows, last dimension], of the listed types), the kernel launch
    (`gpu.launch_func` with the record's grid, block and dynamic shared
    memory; the descriptors, then the device addresses of `pointers`, as
    pointers), the result (the last argument) copied
    back, every buffer freed and the stream synchronized. Runs after buffer
    deallocation, which cannot handle gpu host ops. With
    `device-arguments` the arguments are device buffers: the kernel reads
    and writes them in place, without allocations or copies, and the
    launch (descriptors and `gpu.launch_func` in synchronous form) replaces
    each call of the function, which is erased, so that the caller's
    `moe-gpu-async-region` queues it on the caller's stream: no stream of
    its own, no host synchronization.
  }];
  let options = [
    Option<"deviceArguments", "device-arguments", "bool", /*default=*/"false",
           "The launch functions' arguments are device buffers (the "
           "device-resident pipeline)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect"
  ];
}

def MoeGPUReductionsInnermost
    : Pass<"moe-gpu-reductions-innermost", "::mlir::func::FuncOp"> {
  let summary = "Interchange linalg.generic loops so that reductions come last";
  let description = [{
    Puts the parallel loops of every `linalg.generic` first and its
    reduction loops last (each group in its original order), so that
    `convert-linalg-to-parallel-loops` makes one `scf.parallel` over the
    parallel dimensions with sequential reductions inside: on the GPU,
    each thread reduces in the host lowering's order.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def MoeGPULoopShape : Pass<"moe-gpu-loop-shape", "::mlir::func::FuncOp"> {
  let summary = "Collapse and tile outermost scf.parallel loops for GPU blocks";
  let description = [{
    Collapses every outermost `scf.parallel` without reductions into one
    dimension (consecutive threads then touch consecutive innermost
    elements) and tiles it by `block` threads, shorter loops by the
    smallest multiple of 32 that covers them: the outer loop becomes the
    grid and the inner one the block under `gpu-map-parallel-loops`.
  }];
  let options = [
    Option<"block", "block", "int64_t", /*default=*/"256",
           "Threads per block (a multiple of 32 in [32, 1024])">
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def MoeGPUDeviceBuffers : Pass<"moe-gpu-device-buffers", "::mlir::func::FuncOp"> {
  let summary = "Keep the buffers of a GPU-mapped host function in device memory";
  let description = [{
    For a public function whose computations run in `gpu.launch` ops and
    kernel launch calls: `memref.alloc` / `dealloc` become `gpu.alloc` /
    `dealloc`, every memref argument it reads is copied to the device at
    entry (freed before the return), and the `memref.copy` into an
    out-parameter becomes a device-to-host `gpu.memcpy`. A host operation
    still reading or writing a buffer is an error. Runs after buffer
    deallocation. With `host-arguments=false` the arguments are device
    buffers already: nothing is copied at entry and the out-parameter
    copies stay on the device.
  }];
  let options = [
    Option<"hostArguments", "host-arguments", "bool", /*default=*/"true",
           "The public function's memref arguments are host memory (copied "
           "in at entry, out-parameters copied back); false: device memory">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"
  ];
}

def MoeGPUAsyncRegion : Pass<"moe-gpu-async-region", "::mlir::func::FuncOp"> {
  let summary = "Queue a public function's gpu host ops on one stream";
  let description = [{
    Runs upstream `gpu-async-region` on public functions with a body, so
    that their gpu host ops (allocations, copies, launches) run in order
    on one stream with a host synchronization before any other op with
    side effects (the calls of kernel launch functions among them) and at
    the return. Private functions are left alone: the launch functions of
    `moe-lower-gpu-launches` thread their own stream already, and a second
    token dependency on their launches would not lower.

    With `caller-stream` the function queues its work on the caller's
    stream instead, and returns with it queued: it gets a trailing
    `!llvm.ptr` argument, the stream, and every gpu host op of its body
    becomes asynchronous on one token chain rooted at that stream (which
    gpu-to-llvm lowers to the stream itself). No stream is created and
    nothing synchronizes, not even at the return: the caller synchronizes
    before it reads a result. The other host ops stay where they are, as
    they touch no device memory (`moe-gpu-device-buffers` checked); a
    call, whose callee might, is an error, as is a gpu op in a nested
    region or one that is asynchronous already.
  }];
  let options = [
    Option<"callerStream", "caller-stream", "bool", /*default=*/"false",
           "Queue the work on the stream passed as a trailing !llvm.ptr "
           "argument and return without synchronizing">
  ];
  let dependentDialects = [
    "::mlir::async::AsyncDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect"
  ];
}

def MoeResultsInPlace : Pass<"moe-results-in-place", "::mlir::func::FuncOp"> {
  let summary = "Compute each result in its out-parameter instead of copying it there";
  let description = [{
    After `buffer-results-to-out-params`, a result that a kernel computed in
    a buffer of its own (`memref.alloc`, possibly viewed through a
    `memref.expand_shape` or `memref.collapse_shape`) is copied into its
    out-parameter at the end of the function (the upstream pass's
    `hoist-static-allocs` does not fire on these functions in LLVM 22).
    For every such `memref.copy` whose target is an argument used by that
    copy only, and whose source buffer is used after it by its
    `memref.dealloc` only, the buffer becomes a view of the argument (the
    inverse reshape, made at the function's entry): the kernel writes the
    out-parameter directly, and the copy, the allocation and its
    deallocation go away. At the backward's shape 1 this saves the copy of
    the f32 weight gradients (9.7 GB) and their second buffer.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def MoeFreeAfterLastUse : Pass<"moe-free-after-last-use", "::mlir::func::FuncOp"> {
  let summary = "Free each buffer right after its last use";
  let description = [{
    The ownership-based buffer deallocation frees a block's buffers at the
    block's end, so that every temporary of the backward is live at once
    (the three rounded copies of the weights together). This pass moves
    each unconditional `memref.dealloc` of a `memref.alloc` of the same
    block to just after the last op of that block that uses the buffer or
    any value derived from it (any result of a user, transitively: views,
    casts, extracted pointers), so that the device-resident pipeline's
    stream-ordered frees return the memory to the pool for the next
    kernels. Program order is stream order there, so no kernel that reads
    the buffer can run after its free.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def MoeAllocHooks : Pass<"moe-alloc-hooks", "::mlir::ModuleOp"> {
  let summary = "Route the lowered module's host allocations through hooks";
  let description = [{
    On a module in the LLVM dialect, renames the C allocation functions the
    lowering calls (`malloc`, `aligned_alloc`, `free`) to
    `_mlir_memref_to_llvm_alloc`, `_mlir_memref_to_llvm_aligned_alloc` and
    `_mlir_memref_to_llvm_free`, which have the same signatures. The JIT
    defines these to turn a failed host allocation into an error of the run
    instead of a null pointer that the generated code writes through. One
    pass for every pipeline: `finalize-memref-to-llvm` has an option for
    this, but `gpu-to-llvm` lowers the host allocations of the GPU
    pipelines itself, with `malloc`. The pipelines run it when their
    `alloc-hooks` option is set.
  }];
}

def MoeGPUSplitKernelModules
    : Pass<"moe-gpu-split-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Give every GPU kernel a gpu.module of its own";
  let description = [{
    Moves each kernel of a `gpu.module` that holds several into a module of
    its own, named `<module>_<kernel>` (made unique in the parent), with a
    copy of the module's other symbols (device functions, globals; LLVM
    drops the unused ones), and rewrites the references to it: the
    `#moe.gpu_launch` records of convert-moe-to-nvgpu and
    `gpu.launch_func`. Modules of one kernel are left as they are, and so
    is their order. Kernels of separate modules are lowered and serialized
    independently, so `moe-gpu-module-to-binary` compiles them at the same
    time: a cold compile spends most of its time in LLVM's NVPTX back end
    and ptxas, and one module of eleven kernels keeps that on one core.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoeGPUModuleToBinary
    : Pass<"moe-gpu-module-to-binary", "::mlir::ModuleOp"> {
  let summary = "Serialize the gpu.modules into gpu.binary ops, in parallel";
  let description = [{
    What upstream `gpu-module-to-binary` does (each target attribute of a
    `gpu.module` serializes it; the objects become a `gpu.binary` of the
    same name that replaces it), with the modules serialized at the same
    time on the context's thread pool: translation to LLVM IR, the NVPTX
    back end and ptxas run per module, and upstream runs the modules one
    after another. The `gpu.binary` ops are created afterwards in the
    modules' order, so the output does not depend on the threads. Errors
    name the module that failed and nothing is replaced then.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"fatbin\"",
           "What each object holds: isa (assembly), bin (binary), "
           "fatbin (fat binary) or llvm (offloading)">,
    Option<"toolkit", "toolkit", "std::string", /*default=*/"\"\"",
           "The toolkit path the targets use (empty: their default)">,
    Option<"cmdOptions", "opts", "std::string", /*default=*/"\"\"",
           "Command-line options passed to the targets' tools (ptxas)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

#endif // MOE_GPU_TRANSFORMS_PASSES_TD
