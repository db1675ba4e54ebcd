//===- MoePhaseOps.td - phase-level ops of the moe dialect --*- tablegen -*-===//
//
// The ops `moe-decompose-bwd` produces from moe.blockwise_bwd, and the kernel
// regions `moe-fuse` groups them into. They work in "slot space": the
// S = N*B slots of the blocked routing layout, block n owned by expert
// block_to_expert[n], slot s holding token token_position_to_id[s] (-1 for
// padding). Every op defines what padding slots read (zeros) and write
// (nothing), so a lowering needs no further contract.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEPHASEOPS_TD
#define MOE_DIALECT_MOE_IR_MOEPHASEOPS_TD

include "moe/Dialect/Moe/IR/MoeDialect.td"
include "moe/Dialect/Moe/IR/MoeAttrs.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Moe_GatherRowsOp : Moe_Op<"gather_rows", [Pure]> {
  let summary = "gathers token rows into slot order";
  let description = [{
    `result[s, :] = source[token_position_to_id[s], :]`, zeros where the slot
    is padding (-1). The result has the source's element type.

    ```mlir
    %rows = moe.gather_rows %dy[%tok]
        : tensor<256x256xbf16>, tensor<896xi32> -> tensor<896x256xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source,
                       AnyRankedTensor:$token_position_to_id);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $source `[` $token_position_to_id `]` attr-dict `:` type($source) `,`
        type($token_position_to_id) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_SlotAffinitiesOp : Moe_Op<"slot_affinities", [Pure]> {
  let summary = "the affinity of each slot's (token, expert) pair";
  let description = [{
    `result[s] = affinities[t * E + e]` with `t = token_position_to_id[s]`
    and `e = block_to_expert[s / B]`; zero for padding slots.

    ```mlir
    %a = moe.slot_affinities %aff, %tok, %blk
        {block_size = 128 : i64, num_experts = 4 : i64}
        : tensor<1024xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<896xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$affinities,
                       AnyRankedTensor:$token_position_to_id,
                       AnyRankedTensor:$block_to_expert,
                       I64Attr:$block_size, I64Attr:$num_experts);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $affinities `,` $token_position_to_id `,` $block_to_expert attr-dict `:`
        type($affinities) `,` type($token_position_to_id) `,`
        type($block_to_expert) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_UnpackCheckpointOp : Moe_Op<"unpack_checkpoint", [Pure]> {
  let summary = "the gate/up checkpoint [N, 2, I, B] as slot rows [S, 2I]";
  let description = [{
    `result[n*B + b, k*I + i] = checkpoint[n, k, i, b]` widened to f32: the
    gate half then the up half of each slot's row, the layout the
    recomputation (`moe.block_matmul` with Wgu) produces.

    ```mlir
    %gu = moe.unpack_checkpoint %ckpt
        : tensor<7x2x128x128xbf16> -> tensor<896x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$checkpoint);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $checkpoint attr-dict `:` type($checkpoint) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// MX quantization
//===----------------------------------------------------------------------===//

def Moe_MXQuantizeOp : Moe_Op<"mx_quantize", [Pure]> {
  let summary = "MX-quantizes a tensor in 32-element blocks along one axis";
  let description = [{
    Splits `axis` into blocks of 32 consecutive elements; each block gets an
    E8M0 scale by the rule of `quant` and its elements become
    `round_to_nearest_even(x * 2^(127 - scale))`, saturated to the element
    type's largest finite value (SPEC section 5; docs/numerics.md). The codes
    have the input's shape and the quant element type; the scales have the
    input's shape with `axis` divided by 32. Along the slot axis a block is
    32 consecutive slots, so B % 32 == 0 keeps it inside one expert.

    ```mlir
    %q, %s = moe.mx_quantize %dy_rows
        {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
        : tensor<896x256xbf16> -> tensor<896x256xf8E4M3FN>, tensor<896x8xf8E8M0FNU>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis,
                       Moe_MXQuantAttr:$quant);
  let results = (outs AnyRankedTensor:$codes, AnyRankedTensor:$scales);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($codes) `,` type($scales)
  }];
  let hasVerifier = 1;
}

def Moe_MXDequantizeOp : Moe_Op<"mx_dequantize", [Pure]> {
  let summary = "the exact f32 values of MX codes and their scales";
  let description = [{
    `result = code * 2^(scale - 127)` with the scale of the element's
    32-block along `axis`; exact in f32. A NaN scale (0xFF) gives NaN.

    ```mlir
    %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
        : tensor<896x256xf8E4M3FN>, tensor<896x8xf8E8M0FNU> -> tensor<896x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$codes, AnyRankedTensor:$scales,
                       I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $codes `,` $scales attr-dict `:` type($codes) `,` type($scales) `->`
        type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

def Moe_BlockMatmulOp : Moe_Op<"block_matmul",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "per-block GEMM with the weight of each block's expert";
  let description = [{
    `result[s, n] = sum_k lhs[s, k] * rhs[e, n, k] (+ bias[e, n])` with
    `e = block_to_expert[s / B]`; with `transpose_rhs` the weight is
    `rhs[e, k, n]`. Products and sums in f32. Operands are either bf16, or
    MX codes with their scales (blocks along k: lhs scales [S, K/32], rhs
    scales [E, Nout, K/32] or [E, K/32, Nout]), dequantized exactly.
    Used for the recomputation of g and u (x . Wgu, `transpose_rhs`), P1
    (dA = dy . Wd^T) and P2 (dx contributions = [dg|du] . Wgu^T).

    With `tokens` (`token_position_to_id`, i32 [S]) the result rows of
    padding slots (-1) are unspecified: a lowering may skip the tiles of a
    block whose first slot is padding (tokens fill each block from its first
    slot, so such a block holds only padding; the spare blocks of the
    worst-case layout are). The GPU kernels store the epilogue of a zero
    accumulator there (the bias, or zero); the host lowering computes every
    row. Without it every row is computed.

    ```mlir
    %dA = moe.block_matmul
        lhs(%dyq : tensor<896x256xf8E4M3FN>
            scales %dys : tensor<896x8xf8E8M0FNU>)
        rhs(%wdq : tensor<4x128x256xf8E4M3FN>
            scales %wds : tensor<4x128x8xf8E8M0FNU>)
        experts(%blk : tensor<7xi32>) {block_size = 128 : i64}
        -> tensor<896x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs,
                       Optional<AnyRankedTensor>:$lhs_scales,
                       AnyRankedTensor:$rhs,
                       Optional<AnyRankedTensor>:$rhs_scales,
                       AnyRankedTensor:$block_to_expert,
                       Optional<AnyRankedTensor>:$token_position_to_id,
                       Optional<AnyRankedTensor>:$bias,
                       I64Attr:$block_size,
                       UnitAttr:$transpose_rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `lhs` `(` $lhs `:` type($lhs)
        (`scales` $lhs_scales^ `:` type($lhs_scales))? `)`
    `rhs` `(` $rhs `:` type($rhs)
        (`scales` $rhs_scales^ `:` type($rhs_scales))? `)`
    `experts` `(` $block_to_expert `:` type($block_to_expert) `)`
    (`tokens` `(` $token_position_to_id^ `:` type($token_position_to_id)
        `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_ExpertMatmulOp : Moe_Op<"expert_matmul",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "per-expert GEMM contracting over the expert's slots";
  let description = [{
    `result[e, m, n] = sum over slots s of e's blocks of lhs[s, m] * rhs[s, n]`;
    experts without blocks get zeros. Products and sums in f32. Operands are
    bf16, or MX codes with scales along the slot axis ([S/32, M] and
    [S/32, Nout]). Used for P3 (dWgu = x^T [dg|du]) and P4
    (dWd = (a h)^T dy, or h^T (a dy)).

    With `tokens` (`token_position_to_id`, i32 [S]) a lowering may leave
    padding slots (-1) out of the sum. That requires each padding slot's lhs
    or rhs row to be zero (moe-decompose-bwd's operands are: the padding rows
    of gathered activations and of gradients are zeros), so the result is the
    same up to the sign of zeros. The GPU kernels end each expert's
    contraction after its last K tile that starts at a token; the host
    lowering sums every slot.

    ```mlir
    %dwd = moe.expert_matmul
        lhs(%hq : tensor<896x128xf8E4M3FN> scales %hs : tensor<28x128xf8E8M0FNU>)
        rhs(%dyq : tensor<896x256xf8E4M3FN> scales %dys : tensor<28x256xf8E8M0FNU>)
        experts(%blk : tensor<7xi32>) {block_size = 128 : i64}
        -> tensor<4x128x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs,
                       Optional<AnyRankedTensor>:$lhs_scales,
                       AnyRankedTensor:$rhs,
                       Optional<AnyRankedTensor>:$rhs_scales,
                       AnyRankedTensor:$block_to_expert,
                       Optional<AnyRankedTensor>:$token_position_to_id,
                       I64Attr:$block_size);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `lhs` `(` $lhs `:` type($lhs)
        (`scales` $lhs_scales^ `:` type($lhs_scales))? `)`
    `rhs` `(` $rhs `:` type($rhs)
        (`scales` $rhs_scales^ `:` type($rhs_scales))? `)`
    `experts` `(` $block_to_expert `:` type($block_to_expert) `)`
    (`tokens` `(` $token_position_to_id^ `:` type($token_position_to_id)
        `)`)?
    attr-dict `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise and reductions
//===----------------------------------------------------------------------===//

def Moe_GatedActBwdOp : Moe_Op<"gated_act_bwd", [Pure]> {
  let summary = "backward of the clamped gated activation";
  let description = [{
    Per slot and i, in f32 (docs/numerics.md): g, u = clamp(gate_up[s, i]),
    clamp(gate_up[s, I + i]); s = act(g); h = s * u; dh = a[s] * dA[s, i];
    dg = dh * u * act'(g) * [gate_lo < g < gate_hi];
    du = dh * s * [up_lo < u < up_hi]. Results: [dg | du] as [S, 2I] and h.

    ```mlir
    %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
        {activation = #moe.activation<swiglu>}
        : tensor<896x256xf32>, tensor<896x128xf32>, tensor<896xf32>
        -> tensor<896x256xf32>, tensor<896x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$gate_up, AnyRankedTensor:$d_act,
                       AnyRankedTensor:$slot_affinities,
                       DefaultValuedAttr<Moe_ActivationAttr,
                           "::mlir::moe::Activation::swiglu">:$activation,
                       OptionalAttr<Moe_ClampAttr>:$clamp);
  let results = (outs AnyRankedTensor:$d_gate_up, AnyRankedTensor:$h);
  let assemblyFormat = [{
    $gate_up `,` $d_act `,` $slot_affinities attr-dict `:` type($gate_up) `,`
        type($d_act) `,` type($slot_affinities) `->` type($d_gate_up) `,`
        type($h)
  }];
  let hasVerifier = 1;
}

def Moe_AffinityGradOp : Moe_Op<"affinity_grad",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "the affinity gradient of every routed pair";
  let description = [{
    `result[t * E + e] = <d_act[s], h[s]> (+ <dy_rows[s], down_bias[e]>)`
    for the slot s holding token t in a block of expert e; zero for pairs
    that are not routed. Sums in f32, in 32 interleaved lanes added up in
    order (docs/numerics.md). The bias term is present exactly when
    both optional operands are. `num_experts` is E, the stride of the
    result's token index (no operand carries it without the bias).

    Without `dot h`, `d_act` [S, P] holds partial sums of `<dA, h>` that a
    GEMM epilogue computed over P column tiles (the fused P1 kernel of the
    GPU lowering), and each slot's sum is theirs in the same lane order.

    ```mlir
    %da = moe.affinity_grad %dA dot %h, %tok, %blk
        {block_size = 128 : i64, num_experts = 4 : i64}
        : tensor<896x128xf32> dot tensor<896x128xf32>, tensor<896xi32>,
          tensor<7xi32> -> tensor<1024xf32>
    %da2 = moe.affinity_grad %partials, %tok, %blk
        {block_size = 128 : i64, num_experts = 4 : i64}
        : tensor<896x1xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$d_act, Optional<AnyRankedTensor>:$h,
                       AnyRankedTensor:$token_position_to_id,
                       AnyRankedTensor:$block_to_expert,
                       Optional<AnyRankedTensor>:$dy_rows,
                       Optional<AnyRankedTensor>:$down_bias,
                       I64Attr:$block_size, I64Attr:$num_experts);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $d_act (`dot` $h^)? `,` $token_position_to_id `,` $block_to_expert
        (`bias` `(` $dy_rows^ `,` $down_bias `)`)? attr-dict `:`
        type($d_act) (`dot` type($h)^)? `,` type($token_position_to_id) `,`
        type($block_to_expert)
        (`,` type($dy_rows)^ `,` type($down_bias))? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_ScaleRowsOp : Moe_Op<"scale_rows", [Pure]> {
  let summary = "multiplies each slot row by the slot's affinity";
  let description = [{
    `result[s, :] = f32(input[s, :]) * scale[s]` in f32: `a * h` (P4 with the
    affinity on I) and `a * dy` (P4 with the affinity on H, the bias
    gradient).

    ```mlir
    %ah = moe.scale_rows %h, %a : tensor<896x128xf32>, tensor<896xf32> -> tensor<896x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$scale);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` type($input) `,` type($scale) `->`
        type($result)
  }];
  let hasVerifier = 1;
}

def Moe_ScatterAddRowsOp : Moe_Op<"scatter_add_rows", [Pure]> {
  let summary = "sums slot rows into their tokens' rows (dx)";
  let description = [{
    `result[t, :] = sum over slots s holding t of contributions[s, :]`, in
    ascending slot order (ascending expert order), so the result is
    deterministic; padding slots are skipped and tokens without slots get
    zeros. `dx_accumulate = f32` keeps one f32 running sum and rounds it to
    the result type once; `bf16` rounds the running sum to bf16 after every
    contribution.

    `block_to_expert`, `block_size` and `num_experts` describe the layout of
    the slots, and `top_k` bounds the slots of one token (the layer's top-k).
    A token holds at most one slot per expert, so a parallel lowering can
    index a token's slots by expert ([E, T]), list them in expert order,
    which is the slot order, and sum at most `top_k` of them per token. The
    layout is a precondition (SPEC section 4: ids in range, experts
    ascending, at most one slot per (token, expert), at most `top_k` slots
    per token); on a layout that breaks it the result is undefined. The JIT
    checks all but the last for `moe.blockwise_bwd` entries.

    ```mlir
    %dx = moe.scatter_add_rows %c[%tok], %blk
        {block_size = 128 : i64, num_experts = 4 : i64, top_k = 2 : i64}
        : tensor<896x256xf32>, tensor<896xi32>, tensor<7xi32>
          -> tensor<256x256xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$contributions,
                       AnyRankedTensor:$token_position_to_id,
                       AnyRankedTensor:$block_to_expert,
                       I64Attr:$block_size, I64Attr:$num_experts,
                       I64Attr:$top_k,
                       DefaultValuedAttr<Moe_DxAccumulateAttr,
                           "::mlir::moe::DxAccumulate::f32">:$dx_accumulate);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $contributions `[` $token_position_to_id `]` `,` $block_to_expert
        attr-dict `:` type($contributions) `,` type($token_position_to_id)
        `,` type($block_to_expert) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_ExpertSumOp : Moe_Op<"expert_sum", [Pure]> {
  let summary = "sums slot rows per expert (bias gradients)";
  let description = [{
    `result[e, :] = sum over slots s of e's blocks of input[s, :]` in f32
    (padding rows are zeros by construction); experts without blocks get
    zeros.

    ```mlir
    %dbgu = moe.expert_sum %dgu, %blk {block_size = 128 : i64}
        : tensor<896x256xf32>, tensor<7xi32> -> tensor<4x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       AnyRankedTensor:$block_to_expert, I64Attr:$block_size);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $block_to_expert attr-dict `:` type($input) `,`
        type($block_to_expert) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel regions
//===----------------------------------------------------------------------===//

def Moe_FusedOp : Moe_Op<"fused", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"::mlir::moe::YieldOp">]> {
  let summary = "a kernel: one GEMM with its fused prologue and epilogue";
  let description = [{
    Groups a phase's GEMM (`moe.block_matmul` or `moe.expert_matmul`) with
    the producers of its operands (gathers, quantizations) and the consumers
    of its result (activation backward, affinity gradient, quantizations of
    the outputs, dx scatter-add) that one GPU kernel computes. The region is
    isolated from above: its block arguments are the kernel's inputs, its
    `moe.yield` operands the kernel's outputs. Executing the region's ops in
    order defines the result, which is what the host lowering does; the GPU
    lowering maps each `phase` to a kernel.

    ```mlir
    %dx = moe.fused phase(#moe.phase<p2>) ins(%dgu, %w, %blk, %tok
        : tensor<896x256xf32>, tensor<4x256x256xbf16>, tensor<7xi32>, tensor<896xi32>) {
    ^bb0(%a: tensor<896x256xf32>, %b: tensor<4x256x256xbf16>, %c: tensor<7xi32>, %d: tensor<896xi32>):
      ...
      moe.yield %r : tensor<256x256xbf16>
    } -> tensor<256x256xbf16>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, Moe_PhaseAttr:$phase);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `phase` `(` $phase `)` `ins` `(` $inputs `:` type($inputs) `)` $body
        attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                   "::mlir::ValueRange":$inputs, "Phase":$phase)>
  ];
  let extraClassDeclaration = [{
    /// Replaces this op by its body, in place: the block arguments become
    /// the inputs and the moe.yield operands the results. Returns the
    /// inlined ops in order (the kernel a GPU lowering builds from them).
    ::llvm::SmallVector<::mlir::Operation *>
    inlineBody(::mlir::RewriterBase &rewriter);
  }];
}

def Moe_YieldOp : Moe_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"FusedOp">]> {
  let summary = "the outputs of a kernel region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, ::mlir::ValueRange());
  }]>];
}

#endif // MOE_DIALECT_MOE_IR_MOEPHASEOPS_TD
