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

// The kernel choices of moe/Pipelines/KernelChoices.def that both
// moe-gpu-kernel-config and convert-moe-to-nvgpu take (ConfigAndConvert
// there): each pass reads them into a KernelChoices by name
// (moe/Conversion/MoeToNVGPU/KernelChoices.h), so they are written once.
defvar MoeGPUKernelChoiceOptions = [
    Option<"persistentGemms", "persistent-gemms", "bool", /*default=*/"true",
           "bf16-operands: the GEMM kernels but the recompute's are "
           "persistent, one CTA per SM taking tiles from a per-launch atomic "
           "counter, P1's a ping-pong kernel (false: one CTA per tile)">,
    Option<"clusterGemms", "cluster-gemms", "bool", /*default=*/"false",
           "bf16-operands: the GEMM kernels of one CTA per tile run in "
           "clusters of two CTAs along N, the shared lhs tile loaded once by "
           "TMA multicast (cluster_n = 2), where the N tiles pair up">,
    Option<"rhsCodes", "rhs-codes", "bool", /*default=*/"false",
           "bf16-operands: block GEMMs whose rhs is an MX-quantized weight "
           "with K contiguous read it as FP8 codes and E8M0 scales, "
           "dequantized by the producer warpgroup (rhs_codes), where the "
           "kernel fits">,
    Option<"lhsCodes", "lhs-codes", "bool", /*default=*/"false",
           "bf16-operands: block GEMMs whose lhs rows are MX-quantized along "
           "K read them as FP8 codes in wgmma A-fragment order and E8M0 "
           "scales, decoded by the consumer warpgroups into the registers of "
           "a register-A wgmma (lhs_codes), where the kernel fits">,
    Option<"lhsGather", "lhs-gather", "bool", /*default=*/"true",
           "bf16-operands: block GEMMs whose lhs rows are gathered from "
           "token rows and MX-quantized along K (x, dy) read the token rows "
           "rounded once, the producer warpgroup copying each row of a tile "
           "through the token ids (lhs_gather), where the kernel fits">,
    Option<"roundLhs", "round-lhs", "bool", /*default=*/"false",
           "bf16-operands: expert GEMMs whose lhs is rows gathered from "
           "token rows and MX-quantized along the slots (x of P3) gather and "
           "round it themselves, the producer warpgroup copying each slot "
           "row through the token ids, the consumers rounding it in their "
           "registers (round_lhs), where the kernel fits">,
    Option<"roundRhs", "round-rhs", "bool", /*default=*/"false",
           "bf16-operands: expert GEMMs whose rhs is rows gathered from "
           "token rows and MX-quantized along the slots (dy of P4) gather and "
           "round it themselves, the producer warpgroup copying each slot "
           "row through the token ids and rounding it in shared memory "
           "(round_rhs), where the kernel fits">,
    Option<"roundReuse", "round-reuse", "int64_t", /*default=*/"3",
           "bf16-operands: an expert GEMM whose slot-gathered operand (x of "
           "P3, dy of P4) it would round at most this many times, once per "
           "tile along its other dimension, rounds it in its consumers' "
           "registers (P3: round_lhs; P4: swap_operands with round_lhs, "
           "with tma-store), where the kernel fits; 0: only where round-lhs "
           "or swap-rounded-rhs ask">,
    Option<"swapRoundedRhs", "swap-rounded-rhs", "bool", /*default=*/"false",
           "bf16-operands, with tma-store: an expert GEMM whose rhs is rows "
           "gathered from token rows and MX-quantized along the slots (dy "
           "of P4) computes the transposed product, that rhs its lhs "
           "gathered and rounded in the consumers' registers (swap_operands, "
           "round_lhs), each result tile stored transposed, where the "
           "kernel fits (before round-rhs)">,
    Option<"swapWeights", "swap-weights", "bool", /*default=*/"false",
           "bf16-operands, with tma-store and persistent-gemms: a block "
           "GEMM whose rhs is a bf16 weight MX-quantized along K (the "
           "recompute, P1 and P2) computes the transposed product, the raw "
           "weight of the tile's expert its lhs rounded in the consumers' "
           "registers (swap_operands, round_lhs), its rhs the slot rows of "
           "two blocks of that expert (read as an operand kernel rounded "
           "them, or with swap-gather copied through the token ids: "
           "rhs_gather), each result tile stored transposed, where the "
           "kernel fits">,
    Option<"weightReuse", "weight-reuse", "int64_t", /*default=*/"5",
           "bf16-operands, with tma-store and persistent-gemms: the block "
           "GEMMs whose rhs is a bf16 weight MX-quantized along K compute "
           "their transposed products as with swap-weights where each "
           "element of the weight would be rounded at most this many times, "
           "once per two blocks of slots of its expert (the slots per "
           "expert estimated as the data blocks over the experts, plus one "
           "block); 0: only where swap-weights asks">,
    Option<"swapGather", "swap-gather", "bool", /*default=*/"true",
           "bf16-operands, with lhs-gather: the transposed block GEMMs "
           "(swap-weights, weight-reuse) copy their slot rows of x or dy "
           "from the token rows through the token ids (rhs_gather); false: "
           "they read the gathered rows an operand kernel rounds">,
    Option<"kTurns", "k-turns", "bool", /*default=*/"false",
           "bf16-operands: the two consumer warpgroups of a GEMM that "
           "rounds its lhs in their registers (round_lhs) take turns at the "
           "tensor cores each K tile (k_turns)">,
    Option<"tmaStore", "tma-store", "bool", /*default=*/"true",
           "bf16-operands: GEMMs with a plain epilogue stage their f32 "
           "result tile through shared memory in 32-column chunks, each "
           "stored by TMA (tma_store), where the kernel fits">,
    Option<"activationEpilogue", "act-epilogue", "bool", /*default=*/"false",
           "P1's GEMM computes the activation backward of its moe.fused "
           "region (dg, du, h, a * h, the affinity gradient's partial sums) "
           "in its epilogue; false: it stores dA, and one memory-bound "
           "kernel computes the activation backward and writes the MX "
           "roundings the GEMMs after it read">
];

def MoeGPUKernelConfig : Pass<"moe-gpu-kernel-config", "::mlir::ModuleOp"> {
  let summary = "Choose the kernel configuration of every GPU GEMM";
  let description = [{
    Records on every GEMM that convert-moe-to-nvgpu turns into a kernel
    (`moe.block_matmul`, `moe.expert_matmul` on FP8 codes with scales or
    bf16 values) the kernel it gets on the chip `chip`, as the discardable
    attribute `moe.gemm_config` (a `#moe.gemm_config`): MMA path, CTA tile,
    MMA shape, pipeline stages, warpgroup roles and their registers, from
    the chip's description (moe/Conversion/MoeToNVGPU/TargetInfo.h). The
    path is `mma-path` (default: the chip's) for GEMMs of codes of one type
    on both sides without a bias, `bf16_operands` for every other GEMM; the
    `fp8` path falls back to `bf16` for a GEMM its kernel cannot compute. A
    GEMM that has the attribute already keeps it, so a test or a tuner can
    set any configuration; convert-moe-to-nvgpu builds the kernel it
    describes and makes the same choice for a GEMM without one.

    ```mlir
    %r = moe.block_matmul ... {block_size = 128 : i64,
        moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
          tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
          warpgroups = [1, 2], registers = [40, 232]>} ...
    ```
  }];
  let options = !listconcat([
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The NVIDIA chip to choose kernels for (supported: sm_90a, sm_100a, "
           "sm_120a)">,
    Option<"mmaPath", "mma-path", "std::string", /*default=*/"\"\"",
           "The MMA path of the GEMMs: fp8, bf16, bf16-operands or "
           "block-scale (default: the chip's)">],
    MoeGPUKernelChoiceOptions);
}

def ConvertMoeToNVGPU : Pass<"convert-moe-to-nvgpu", "::mlir::ModuleOp"> {
  let summary = "Emit the GPU kernels of moe phase-level ops for an NVIDIA chip";
  let description = [{
    The GPU lowering, for the chip named by `chip` (its description:
    moe/Conversion/MoeToNVGPU/TargetInfo.h). Each GEMM's kernel is the one
    its `moe.gemm_config` attribute describes (moe-gpu-kernel-config), or,
    without one, the one that pass would choose with the same `mma-path`; a
    configuration the chip cannot run is an error. Handled so far: the GEMMs,
    `moe.block_matmul` (recompute, P1, P2) and `moe.expert_matmul` (P3, P4)
    whose operands are f8E4M3FN / f8E5M2 codes with E8M0 scales or bf16
    values. For each one the pass adds kernels to the `gpu.module
    @moe_kernels` of the module and replaces the op by calls, on buffers of
    its operands and a new result buffer, of private host functions
    declared with each kernel's launch record.

    On the default path of sm_90a (`bf16-operands`) each operand first
    becomes bf16 values with its contraction axis innermost, by an operand
    kernel (moe/Conversion/MoeToNVGPU/MXOperandKernel.h): codes that a
    `moe.mx_quantize` made are computed from its input (quantized along the
    contraction and dequantized, exactly: the codes are never written),
    other codes are dequantized, and bf16 values are transposed when their
    contraction axis is not innermost (or used as they are). Then the GEMM
    kernel streams both bf16 operands with TMA into bf16 wgmma, adds the
    bias of `moe.block_matmul` if it has one, and stores f32:

    ```mlir
    call @mx_operand_0_launch(%x, %xq) : (memref<512x256xbf16>, memref<512x256xbf16>) -> ()
    ...
    call @block_matmul_2_launch(%xq, %wq, %blk, %out) : ...

    func.func private @block_matmul_2_launch(...) attributes {
        moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2,
          grid = [2, 4, 1], block = [384, 1, 1],
          dynamic_shared_memory = 197744,
          tensor_maps = [0 : !nvgpu.tensormap.descriptor<...>,
                         1 : !nvgpu.tensormap.descriptor<...>],
          pointers = [3, 2]>}
    ```

    The MX paths `fp8` and `bf16` (option `mma-path`) instead pass the codes
    and scales of GEMMs with codes of one type on both sides and no bias to
    kernels that decode them (`fp8`: FP8 wgmma with per-32-block
    promotion, for the e4m3 block GEMMs whose shape its tiles divide;
    `bf16`: producer warpgroups dequantize to bf16 in shared memory); those
    kernels read codes K-major, so a `transpose_rhs` weight and the
    slot-major operands of `moe.expert_matmul` are transposed first
    (`linalg.transpose` of codes and scales). Every other GEMM runs on the
    `bf16-operands` path.
    moe-lower-gpu-launches gives the host functions their bodies after
    bufferization and buffer deallocation. A GEMM the kernels cannot
    compute (a block size that is not a multiple of the tile, an operand
    whose contraction axis is not a multiple of 32) is an error.
  }];
  let options = !listconcat([
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The NVIDIA chip to generate code for (supported: sm_90a, sm_100a, "
           "sm_120a)">,
    Option<"mmaPath", "mma-path", "std::string", /*default=*/"\"\"",
           "The MMA path of the GEMMs: fp8, bf16, bf16-operands or "
           "block-scale (default: the chip's)">,
    Option<"operandsBothAxes", "operands-both-axes", "bool",
           /*default=*/"true",
           "bf16-operands: a value that two GEMMs take quantized along "
           "different axes (along its columns for one, along its rows in "
           "place for the other: x, dy, the gate/up weight and its "
           "gradient) is read once by one operand kernel that writes both "
           "roundings (on by default: 2.3 ms less at shape 1 on the H200)">,
    Option<"checkpointEpilogue", "checkpoint-epilogue", "bool",
           /*default=*/"true",
           "bf16-operands: P1's activation-backward epilogue reads the bf16 "
           "gate/up checkpoint [N, 2, I, B] itself (the moe.unpack_checkpoint "
           "and the padded-slot moe.scale_rows of its region are not "
           "materialized; on by default: 4.2 ms less at shape 1 and 1.1 ms at "
           "shape 2 on the H200, the same bits)">,
    Option<"dGateUpEpilogue", "dgate-up-epilogue", "bool",
           /*default=*/"false",
           "bf16-operands: P1's activation-backward epilogue writes the MX "
           "values (bf16) of [dg | du] along 2I and along the slots that P2 "
           "and P3 read, instead of f32 [dg | du] for an operand kernel to "
           "round (the same bits; off by default: P1 measured ~6 ms slower "
           "at shape 1 on the H200, 2026-12-02); a kernel of one CTA per "
           "tile only (persistent-gemms=false): beside the ping-pong "
           "kernel's second accumulator the roundings spill">,
    Option<"inPlaceTiles", "in-place-tiles", "bool", /*default=*/"false",
           "bf16-operands: operand kernels that round values along the rows "
           "in place (a GEMM reads them M- or N-major) go through a "
           "shared-memory tile, a column a thread, instead of a column pair "
           "a thread">,
    Option<"actBwdNarrow", "act-bwd-narrow", "bool", /*default=*/"false",
           "bf16-operands: the activation-backward kernel takes 128 columns "
           "of dA a CTA (128 threads, half the shared memory) instead of "
           "256; da's partial sums come in groups of 128 columns">],
    MoeGPUKernelChoiceOptions);
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

#endif // MOE_CONVERSION_PASSES_TD
