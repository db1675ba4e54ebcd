//===- MoeAttrs.td - enums and attributes of the moe dialect -*- tablegen -*-===//
//
// The layer options of `moe.blockwise_bwd` (activation, affinity placement,
// MX quantization, clamp limits and dx accumulation), the kernel choices
// of the GPU lowering (MMA path, GEMM kernel configuration) and the launch
// ABI between that lowering and moe-lower-gpu-launches.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEATTRS_TD
#define MOE_DIALECT_MOE_IR_MOEATTRS_TD

include "moe/Dialect/Moe/IR/MoeDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Moe_Activation : I32EnumAttr<"Activation",
    "gated activation of the expert MLP", [
      I32EnumAttrCase<"swiglu", 0>,
      I32EnumAttrCase<"geglu", 1>
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def Moe_ActivationAttr : EnumAttr<Moe_Dialect, Moe_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "gated activation: swiglu (silu(g) * u) or geglu (gelu_tanh(g) * u)";
}

def Moe_Affinity : I32EnumAttr<"Affinity",
    "where the routing affinity multiplies the expert output", [
      I32EnumAttrCase<"on_i", 0>,
      I32EnumAttrCase<"on_h", 1>
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def Moe_AffinityAttr : EnumAttr<Moe_Dialect, Moe_Affinity, "affinity"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "affinity placement: on the intermediate h (on_i) or on the "
                "down projection's output (on_h)";
  let description = [{
    Both placements compute the same function in exact arithmetic; they
    differ in which operand of the down-projection weight gradient (phase P4)
    carries the affinity, and therefore in which tensor is MX-quantized.
  }];
}

def Moe_MXElement : I32EnumAttr<"MXElement",
    "element type of MX-quantized GEMM operands", [
      I32EnumAttrCase<"f8E4M3FN", 0>,
      I32EnumAttrCase<"f8E5M2", 1>,
      I32EnumAttrCase<"none", 2>
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def Moe_ScaleRule : I32EnumAttr<"ScaleRule",
    "how the E8M0 scale of an MX block is chosen from its amax", [
      I32EnumAttrCase<"rceil", 0>,
      I32EnumAttrCase<"floor", 1>,
      I32EnumAttrCase<"floor_alt", 2>
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def Moe_DxAccumulate : I32EnumAttr<"DxAccumulate",
    "precision of the sum of a token's expert contributions to dx", [
      I32EnumAttrCase<"f32", 0>,
      I32EnumAttrCase<"bf16", 1>
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def Moe_DxAccumulateAttr
    : EnumAttr<Moe_Dialect, Moe_DxAccumulate, "dx_accumulate"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "dx accumulation: one fp32 running sum (f32) or a bf16 "
                "read-modify-write per expert (bf16)";
}

def Moe_Phase : I32EnumAttr<"Phase",
    "the GEMM a fused kernel region is built around", [
      I32EnumAttrCase<"recompute", 0>,
      I32EnumAttrCase<"p1", 1>,
      I32EnumAttrCase<"p2", 2>,
      I32EnumAttrCase<"p3", 3>,
      I32EnumAttrCase<"p4", 4>
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def Moe_PhaseAttr : EnumAttr<Moe_Dialect, Moe_Phase, "phase"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "recompute (g, u = x . Wgu), p1 (dA = dy . Wd^T), p2 (dx), "
                "p3 (dWgu) or p4 (dWd)";
}

def Moe_MXMmaPath : I32EnumAttr<"MXMmaPath",
    "how a GEMM kernel uses the tensor cores", [
      // FP8 wgmma into a fresh fp32 partial per 32-element K block (scale-d
      // = 0), promoted into the fp32 accumulator with the product of the two
      // block scales (sm_90a: no block-scaled MMA instruction exists).
      I32EnumAttrCase<"Fp8WgmmaPromote", 0, "fp8">,
      // Producer warpgroups dequantize the codes exactly to bf16 (q * 2^(s -
      // 127)) in shared memory; bf16 wgmma accumulates straight into fp32.
      I32EnumAttrCase<"Bf16Dequant", 1, "bf16">,
      // Each operand is rounded to its MX values once, by a memory-bound
      // kernel that writes them as bf16 (exact) in the K-major layout; the
      // GEMM kernel streams those bf16 tiles with TMA straight into bf16
      // wgmma. The same kernels run bf16 (quant = none) GEMMs and biases.
      I32EnumAttrCase<"Bf16Operands", 2, "bf16_operands">,
      // The tensor core applies the E8M0 scales itself: the codes and the
      // scale bytes go to the block-scaled MMA unchanged (sm_100a
      // tcgen05.mma ... kind::mxf8f6f4.block_scale, scales in tensor
      // memory; sm_120a mma.sync ... block_scale, scales in registers).
      I32EnumAttrCase<"BlockScale", 3, "block_scale">
    ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Moe_MXQuantAttr : Moe_Attr<"MXQuant", "mx"> {
  let summary = "MX (OCP microscaling) quantization of GEMM operands";
  let description = [{
    Every GEMM operand is quantized in blocks of `block` consecutive elements
    along the axis its GEMM contracts, each block sharing one E8M0 scale
    chosen by `rule`; elements are `element` values. `none` keeps bf16
    operands with fp32 accumulation (the exact-arithmetic baseline).

    ```mlir
    #moe.mx<f8E4M3FN, block = 32, rule = rceil>
    #moe.mx<none, block = 32, rule = rceil>
    ```
  }];
  let parameters = (ins
    EnumParameter<Moe_MXElement>:$element,
    "int64_t":$blockSize,
    EnumParameter<Moe_ScaleRule>:$rule
  );
  let assemblyFormat =
      "`<` $element `,` `block` `=` $blockSize `,` `rule` `=` $rule `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True when operands are MX-quantized (element is not `none`).
    bool isQuantized() const { return getElement() != MXElement::none; }
  }];
}

def Moe_ClampAttr : Moe_Attr<"Clamp", "clamp"> {
  let summary = "optional clamp limits of the gate and up pre-activations";
  let description = [{
    `g = clamp(g, gate_lo, gate_hi)` and `u = clamp(u, up_lo, up_hi)` before
    the activation; each limit is optional, at least one is given. The
    backward masks use strict inequalities, so a clamped element gets zero
    gradient. Limits print in the order below.

    ```mlir
    #moe.clamp<gate_hi = 7.0, up_lo = -7.0, up_hi = 7.0>
    ```
  }];
  let parameters = (ins
    OptionalParameter<"::mlir::FloatAttr">:$gateLo,
    OptionalParameter<"::mlir::FloatAttr">:$gateHi,
    OptionalParameter<"::mlir::FloatAttr">:$upLo,
    OptionalParameter<"::mlir::FloatAttr">:$upHi
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Moe_GemmConfigAttr : Moe_Attr<"GemmConfig", "gemm_config"> {
  let summary = "the kernel configuration of one GPU GEMM";
  let description = [{
    How the GPU lowering builds the kernel of a `moe.block_matmul` or
    `moe.expert_matmul`: the MMA path (`fp8`, `bf16`, `bf16_operands` or
    `block_scale`),
    the CTA tile `[M, N, K]`, the shape `[M, N, K]` of one MMA instruction,
    the depth of the shared-memory ring of operand tiles (`stages`) and, on
    the `bf16` path and with `rhs_codes`, of the ring of dequantized tiles
    (`dequant_stages`),
    the producer and consumer warpgroups, and their `setmaxnreg` register
    counts, and (`bf16_operands` only) whether the kernel reads an operand
    as it is stored with its M or N contiguous, through the transposed form
    of the MMA, instead of a copy with K contiguous: `rhs_n_major` for the
    rhs of a block GEMM ([K, N] per expert) or of an expert GEMM ([slots,
    N]), `lhs_m_major` for the lhs of an expert GEMM ([slots, M]), and
    (`bf16_operands` only) whether the kernel is `persistent`: one CTA per
    SM of the chip, each computing tile c (its own index) and then the
    tiles it takes from a zeroed counter of the launch with atomics, in the
    order a one-tile-per-CTA grid would run them, with its TMA ring's stages
    and phases carried from one tile to the next, so that the producer
    loads the next tile while the consumers store this one, and (one CTA
    per tile only) `ctas_per_sm`, the CTAs the kernel is built to share an
    SM with (1 when left out): its registers and shared memory are split
    that many ways, so that one CTA's epilogue runs beside another's MMAs,
    and (persistent, two consumer warpgroups) `pingpong`: each consumer
    warpgroup computes whole tiles, every other one of the CTA's (tile M
    is a whole number of `mma_shape` M, one MMA per M step), and the two
    warpgroups take turns at the tensor cores, so that one warpgroup's
    epilogue runs beside the other's MMAs on the same TMA ring, and (one CTA
    per tile only) `cluster_n`, the CTAs of a cluster along N (1 when left
    out, or 2): the pair computes the tiles n and n + 1 of the same rows, and
    the first CTA loads their shared lhs tile for both (TMA multicast), and
    `raster_m`, the order of the output tiles (1 when left out: N fastest,
    row of tiles after row): in bands of `raster_m` M tiles, M fastest
    within a band, so that the tiles in flight share their operand panels
    in L2 (not with `cluster_n`, whose pairs are adjacent N tiles), and
    (`bf16_operands` only) `evict_first_outputs`: the epilogue's loads and
    stores of data no other tile of the kernel touches again (the result
    tile, the activation backward's gate/up reads and its outputs) carry
    an L2 evict-first cache policy, so that these streams do not push the
    operand panels that the tiles in flight share out of L2, and
    (`bf16_operands` only, the rhs read with K contiguous) `rhs_codes`: the
    kernel reads the rhs as FP8 codes with their E8M0 scales, half the
    bytes of bf16 values, and the producer warpgroup's warps 1-3
    dequantize each K tile into a ring of `dequant_stages` bf16 tiles that
    the MMAs read (warp 0 keeps the TMA loads), and (`bf16_operands` block
    GEMMs only, the lhs read with K contiguous, not with `rhs_codes`)
    `lhs_codes`: the kernel reads the lhs as FP8 codes with their E8M0
    scales, each 64-column K tile of a row in the order of the wgmma A
    fragment, and the consumer warpgroups decode every K tile into the
    registers of a register-A wgmma (no bf16 copy of the lhs in shared
    memory or HBM), and (`bf16_operands` block GEMMs only, the lhs read with
    K contiguous, no cluster, not with `lhs_codes` or `rhs_codes`)
    `lhs_gather`: the lhs is rows gathered from token rows (a
    `moe.gather_rows` rounded along K), and the producer warpgroup copies
    each row of a tile from its token's row of the rounded token rows,
    through the GEMM's token ids (a padding slot reads zeros), so that the
    gathered copy is never written, and (`bf16_operands` expert GEMMs only,
    persistent, the operand read M-major or N-major as stored, with neither
    codes form nor `lhs_gather`) `round_lhs` and `round_rhs`: the operand is
    rows gathered from token rows (a `moe.gather_rows`) MX-rounded along
    the slots, its contraction axis, and the kernel rounds it itself: the
    producer warpgroup copies each slot's row of the tile from its token's
    row of the source (cp.async, zeros for a padding slot); the consumers
    round the lhs in their A-fragment registers (ldmatrix.trans, register-A
    wgmma), the producer warpgroup rounds every 32-slot block of each rhs
    column in shared memory before the MMAs read it, so that no rounded
    copy of the operand is ever written, and (expert GEMMs with
    `tma_store`) `swap_operands`: the kernel computes the transposed
    product, the op's rhs as its lhs and the op's lhs as its rhs (the
    other flags name the kernel's operands: `round_lhs` rounds the op's
    rhs), and stores each result tile transposed; of a block GEMM, the
    kernel's lhs is the raw bf16 weight of the tile's expert, which its
    consumers round along K (`round_lhs`, M- or K-major as stored), its
    rhs the slot rows of two blocks of that expert (a tile N of 256), and
    (`rhs_gather`) the producer warpgroup copies them from their token
    rows through the GEMM's token ids as `lhs_gather` copies a lhs, and
    (`bf16_operands` only, no `pingpong` or cluster) `tma_store = n`: each
    consumer warpgroup stages its rows of the f32 result tile through n
    shared-memory buffers of `store_columns` columns (8, 16 or 32, by
    default 32: rows of 32, 64 or 128 bytes in the TMA swizzle of that
    width; n >= 2, the tile's columns a whole number of rounds of them),
    and one of its threads stores each chunk by TMA, instead of st.global
    from the accumulator registers, and (`bf16_operands` only, two consumer
    warpgroups, no `pingpong`) `k_turns`: the two warpgroups take turns at
    the tensor cores each K tile (named barriers: the second issues its
    K tile's MMAs after the first's), so that one warpgroup's work on its
    next K tile (`round_lhs`'s rounding, `lhs_codes`' decode) runs beside
    the other's MMAs instead of both at the same moment.
    `moe-gpu-kernel-config` chooses it from the chip's description
    and records it as the discardable attribute `moe.gemm_config` of the
    GEMM; `convert-moe-to-nvgpu` builds the kernel from it and rejects what
    the chip cannot run (a tile K other than one 128-byte swizzle panel, an
    MMA shape the chip lacks, too much shared memory).

    The verifier rejects configurations no kernel can have: the consumer
    warpgroups each own `mma_shape` M rows of the tile (`pingpong`: the
    tile's M is a multiple of them) and one MMA spans the tile's N (`block_scale`: the tile is a whole grid of MMAs), the tile's K
    is a whole number of MMA steps, a ring has at
    least two stages (one filled while the other is read), and register
    counts are what `setmaxnreg` takes (multiples of 8 in [24, 256]).

    ```mlir
    #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                     mma_shape = [64, 128, 16], stages = 6,
                     warpgroups = [1, 2], registers = [40, 232]>
    #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                     mma_shape = [64, 256, 16], stages = 4,
                     warpgroups = [1, 2], registers = [40, 232],
                     persistent = true, tma_store = 2>
    #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64],
                     mma_shape = [64, 128, 16], stages = 4,
                     warpgroups = [1, 1], registers = [40, 216],
                     ctas_per_sm = 2>
    #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                     mma_shape = [64, 128, 16], stages = 6,
                     warpgroups = [1, 2], registers = [40, 232],
                     persistent = true, pingpong = true>
    #moe.gemm_config<mma = bf16, tile = [128, 128, 128],
                     mma_shape = [64, 128, 16], stages = 3,
                     dequant_stages = 2, warpgroups = [2, 2],
                     registers = [144, 112]>
    #moe.gemm_config<mma = block_scale, tile = [128, 128, 128],
                     mma_shape = [128, 128, 32], stages = 4,
                     warpgroups = [1, 1], registers = [40, 232]>
    ```
  }];
  let parameters = (ins
    EnumParameter<Moe_MXMmaPath>:$mma,
    ArrayRefParameter<"int64_t">:$tile,
    ArrayRefParameter<"int64_t">:$mmaShape,
    "int64_t":$stages,
    DefaultValuedParameter<"int64_t", "0">:$dequantStages,
    ArrayRefParameter<"int64_t">:$warpgroups,
    ArrayRefParameter<"int64_t">:$registers,
    DefaultValuedParameter<"bool", "false">:$rhsNMajor,
    DefaultValuedParameter<"bool", "false">:$lhsMMajor,
    DefaultValuedParameter<"bool", "false">:$persistent,
    DefaultValuedParameter<"int64_t", "1">:$ctasPerSm,
    DefaultValuedParameter<"bool", "false">:$pingpong,
    DefaultValuedParameter<"int64_t", "1">:$clusterN,
    DefaultValuedParameter<"int64_t", "1">:$rasterM,
    DefaultValuedParameter<"bool", "false">:$evictFirstOutputs,
    DefaultValuedParameter<"bool", "false">:$rhsCodes,
    DefaultValuedParameter<"bool", "false">:$lhsCodes,
    DefaultValuedParameter<"bool", "false">:$lhsGather,
    DefaultValuedParameter<"bool", "false">:$roundLhs,
    DefaultValuedParameter<"bool", "false">:$roundRhs,
    DefaultValuedParameter<"bool", "false">:$swapOperands,
    DefaultValuedParameter<"bool", "false">:$rhsGather,
    DefaultValuedParameter<"int64_t", "0">:$tmaStore,
    DefaultValuedParameter<"int64_t", "32">:$storeColumns,
    DefaultValuedParameter<"bool", "false">:$kTurns
  );
  let assemblyFormat = [{
    `<` `mma` `=` $mma `,` `tile` `=` `[` $tile `]` `,`
    `mma_shape` `=` `[` $mmaShape `]` `,` `stages` `=` $stages `,`
    (`dequant_stages` `=` $dequantStages^ `,`)?
    `warpgroups` `=` `[` $warpgroups `]` `,`
    `registers` `=` `[` $registers `]`
    `` custom<KernelFlags>($rhsNMajor, $lhsMMajor, $persistent, $ctasPerSm,
                          $pingpong, $clusterN, $rasterM,
                          $evictFirstOutputs, $rhsCodes, $lhsCodes,
                          $lhsGather, $roundLhs, $roundRhs, $swapOperands,
                          $rhsGather, $tmaStore,
                          $storeColumns, $kTurns)
    `` `>`
  }];
  let genVerifyDecl = 1;
}

def Moe_GPULaunchAttr : Moe_Attr<"GPULaunch", "gpu_launch"> {
  let summary = "how the host launches one GPU kernel";
  let description = [{
    The launch record of a host function that `convert-moe-to-nvgpu`
    declares for each kernel, as the function's discardable attribute
    `moe.gpu_launch`; `moe-lower-gpu-launches` gives the function its body
    from it. The function takes memrefs, the inputs then the `results` it
    writes (1 when left out; a fused epilogue writes several); the
    kernel `@module::@kernel` runs on `grid` x `block` threads with
    `dynamic_shared_memory` bytes (0 when left out) and takes, in this
    order, a TMA descriptor of the given type over each argument of
    `tensor_maps` (left out when there is none), then the global address
    of each argument of `pointers`. Both lists name arguments by their index in the function's
    signature. With `counters` = n > 0 the launch also allocates n i32
    words on its stream, zeroes them, passes their address last and frees
    them after the kernel: the tile counter of a persistent GEMM, which
    its CTAs take tiles from with atomics.

    The verifier rejects records no launch can have: a kernel not nested in
    a module, grid or block not three positive sizes, more than 1024
    threads in a block, shared memory outside the launch's i32 operand, and
    an argument index that is negative or listed twice, and fewer than one
    result. What needs the
    function (indices in range, argument types) is checked by
    `moe-lower-gpu-launches`. `pointers` is never empty in the records the
    lowering makes: every kernel writes its result through a pointer.

    ```mlir
    #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2,
                    grid = [2, 4, 1], block = [384, 1, 1],
                    dynamic_shared_memory = 197744,
                    tensor_maps = [0 : !nvgpu.tensormap.descriptor<...>,
                                   1 : !nvgpu.tensormap.descriptor<...>],
                    pointers = [3, 2]>
    #moe.gpu_launch<kernel = @moe_kernels::@mx_operand_0, grid = [64, 1, 1],
                    block = [256, 1, 1], pointers = [0, 1, 2]>
    ```
  }];
  let parameters = (ins
    "::mlir::SymbolRefAttr":$kernel,
    ArrayRefParameter<"int64_t">:$grid,
    ArrayRefParameter<"int64_t">:$block,
    DefaultValuedParameter<"int64_t", "0">:$dynamicSharedMemory,
    OptionalArrayRefParameter<"::mlir::moe::TensorMapArg">:$tensorMaps,
    ArrayRefParameter<"int64_t">:$pointers,
    DefaultValuedParameter<"int64_t", "1">:$results,
    DefaultValuedParameter<"int64_t", "0">:$counters
  );
  let assemblyFormat = [{
    `<` `kernel` `=` $kernel `,` `grid` `=` `[` $grid `]` `,`
    `block` `=` `[` $block `]` `,`
    (`dynamic_shared_memory` `=` $dynamicSharedMemory^ `,`)?
    (`tensor_maps` `=` `[` $tensorMaps^ `]` `,`)?
    (`counters` `=` $counters^ `,`)?
    `pointers` `=` `[` $pointers `]` (`,` `results` `=` $results^)? `>`
  }];
  let genVerifyDecl = 1;
}

#endif // MOE_DIALECT_MOE_IR_MOEATTRS_TD
