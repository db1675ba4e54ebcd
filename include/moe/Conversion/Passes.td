//===- Passes.td - conversions out of the moe dialect ------*- tablegen -*-===//
//
// Lowerings of moe ops to upstream dialects.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_PASSES_TD
#define MOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoeToLinalg : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe phase-level ops to linalg, tensor, scf, arith and math";
  let description = [{
    The host (reference) lowering: inlines `moe.fused` regions and rewrites
    every slot-space op into destination-passing linalg / tensor / scf code
    on tensors, with the MX numerics built by the shared IR builders
    (moe/Dialect/Moe/Utils/MXBuilders.h), so that one-shot bufferization
    and the standard loop lowering take it to LLVM.
  }];
  let options = [
    Option<"readOnlyInputs", "read-only-inputs", "bool", /*default=*/"true",
           "Mark the tensor arguments of every func.func "
           "`bufferization.writable = false`, so that one-shot "
           "bufferization never writes into a caller's input buffer (it "
           "would, e.g., for an elementwise op whose result reuses an "
           "argument as its destination)">,
    Option<"parallelSlotOps", "parallel-slot-ops", "bool",
           /*default=*/"false",
           "Lower moe.affinity_grad, moe.scatter_add_rows and "
           "moe.expert_sum without slot loops: scatters keyed by (token, "
           "expert) in one scf.parallel, then linalg sums in the host's "
           "order (the form the GPU mapping covers; same bits)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::memref::MemRefDialect",
    "::mlir::bufferization::BufferizationDialect"
  ];
}

def ConvertMoeToNVGPU : Pass<"convert-moe-to-nvgpu", "::mlir::ModuleOp"> {
  let summary = "Emit the GPU kernels of moe phase-level ops for an NVIDIA chip";
  let description = [{
    The GPU lowering, for the chip named by `chip` (its description:
    moe/Conversion/MoeToNVGPU/TargetInfo.h). Handled so far: the MX GEMMs,
    `moe.block_matmul` (recompute, P1, P2; no bias) and `moe.expert_matmul`
    (P3, P4) whose operands are f8E4M3FN or f8E5M2 codes with E8M0 scales
    along the contraction. For each one the pass adds a kernel to the
    `gpu.module @moe_kernels` of the module (the exact-MXFP8 GEMM of the
    MMA path, with the expert of each row block, or the slot range of each
    expert, read from `block_to_expert`) and replaces the op by a call, on
    buffers of its operands and a new result buffer, of a private host
    function declared with the kernel's launch record:

    ```mlir
    %b0 = bufferization.to_buffer %lhs read_only : ... to memref<512x256xf8E4M3FN>
    ...
    %out = memref.alloc() : memref<512x256xf32>
    call @mx_block_matmul_0_launch(%b0, %b1, %b2, %b3, %b4, %out) : ...
    %r = bufferization.to_tensor %out restrict writable : ...

    func.func private @mx_block_matmul_0_launch(...) attributes {
        moe.gpu_launch = {kernel = @moe_kernels::@mx_block_matmul_0,
          grid = array<i64: 2, 4, 1>, block = array<i64: 512, 1, 1>,
          dynamic_shared_memory = 230496 : i64,
          tensor_map_args = array<i64: 0, 2>, tensor_map_types = [...],
          pointer_args = array<i64: 1, 3, 5, 4>}}
    ```

    The kernels read both operands K-major: a `transpose_rhs` weight and
    the slot-major operands of `moe.expert_matmul` are transposed first
    (`linalg.transpose` of codes and scales, on the host).
    moe-lower-gpu-launches gives the function its body after bufferization
    and buffer deallocation.
    Other GEMMs (bf16 operands, a bias) are left as they are. An MX GEMM
    the kernels cannot compute (a block size that is not a multiple of the
    tile) is an error.

    `mma-path` overrides the target's MMA path: `fp8` runs the e4m3 block
    GEMMs whose shape the fp8 tiles divide with FP8 wgmma and per-32-block
    promotion and the others with bf16 dequantization; `bf16` runs all
    with bf16 dequantization.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The NVIDIA chip to generate code for (supported: sm_90a)">,
    Option<"mmaPath", "mma-path", "std::string", /*default=*/"\"\"",
           "The MMA path of MX GEMMs: fp8 or bf16 (default: the chip's)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def LowerMoeGPULaunches : Pass<"moe-lower-gpu-launches", "::mlir::ModuleOp"> {
  let summary = "Emit the host code of the kernel launches of convert-moe-to-nvgpu";
  let description = [{
    Gives every function declaration carrying a `moe.gpu_launch` record
    (made by convert-moe-to-nvgpu) its body: on one stream, device buffers
    (`gpu.alloc`) for its memref arguments, the inputs copied in
    (`gpu.memcpy`), the TMA descriptors of `tensor_map_args`
    (`nvgpu.tma.create.descriptor` over the device bytes viewed as ui8
    [rows, last dimension], types from `tensor_map_types`), the kernel
    launch (`gpu.launch_func` with the record's grid, block and dynamic
    shared memory; the descriptors, then the device addresses of
    `pointer_args`, as pointers), the result (the last argument) copied
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

#endif // MOE_CONVERSION_PASSES_TD
