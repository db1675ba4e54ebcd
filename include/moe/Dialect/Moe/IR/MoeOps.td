//===- MoeOps.td - ops of the moe dialect ------------------*- tablegen -*-===//
//
// `moe.blockwise_bwd`, the whole backward contract of a blockwise MoE layer
// (SPEC sections 2-5), and `moe.route`, the builder of its routing layout.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEOPS_TD
#define MOE_DIALECT_MOE_IR_MOEOPS_TD

include "moe/Dialect/Moe/IR/MoeDialect.td"
include "moe/Dialect/Moe/IR/MoeAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Moe_BlockwiseBwdOp : Moe_Op<"blockwise_bwd",
    [Pure, AttrSizedOperandSegments, AttrSizedResultSegments]> {
  let summary = "backward pass of a blockwise Mixture-of-Experts layer";
  let description = [{
    Computes every gradient of the layer

    ```
    g = x[t] . Wgu[e][:, 0, :] (+ bgu[e][0]);  u = x[t] . Wgu[e][:, 1, :] (+ bgu[e][1])
    g, u clamped (optional);   h = act(g) * u
    out[t] = sum over routed e of a[t,e] * (h . Wd[e] + bd[e])
    ```

    given `dy = dL/dout`, for the token -> expert routing held in the blocked
    layout (`token_position_to_id`, `block_to_expert`):

    | result | shape | meaning |
    |---|---|---|
    | `hidden_states_grad` | [T, H] bf16 or f32 | dx, summed over a token's K experts |
    | `affinities_grad` | [T*E] f32 | da, zero on pairs that are not routed |
    | `gate_up_weight_grad` | [E, H, 2, I] f32 or bf16 | dWgu |
    | `down_weight_grad` | [E, I, H] f32 or bf16 | dWd |
    | `gate_up_bias_grad` | [E, 2, I] f32 | dbgu, only with `bias` |
    | `down_bias_grad` | [E, H] f32 | dbd, only with `bias` |

    Operands: `hidden_states` x and `output_grad` dy are [T, H] bf16;
    `expert_affinities_masked` is [T*E] f32 (element t*E+e, zero where t is
    not routed to e); `gate_up_weight` is [E, H, 2, I] (index 0 gate, 1 up)
    and `down_weight` [E, I, H], either bf16 or pre-quantized f8E4M3FN /
    f8E5M2 with f8E8M0FNU scales along the axis their GEMM contracts
    (gate/up: [E, H, 2, I/32] along 2I; down: [E, I, H/32] along H).
    `token_position_to_id` [N*B] i32 holds the token of each slot (-1 for
    padding) and `block_to_expert` [N] i32 the expert of each block.
    `gate_up_checkpoint` [N, 2, I, B] holds the clamped g and u of each
    slot; without it g and u are recomputed from x and Wgu.

    Attributes: `block_size` B (128, 256, 512 or 1024), `top_k` K,
    `activation`, `affinity` placement, `quant` (MX element type and scale
    rule of every GEMM operand), optional `clamp` limits, `bias` (bias
    operands and gradients are present), `dx_accumulate` and
    `single_expert_dense` (E = 1, K = 1, identity routing).

    Sizes: every operand and result, the f32 weight gradients and the f32
    slot rows of the phases ([N*B, max(H, 2I)]) must fit 2^40 bytes, so that
    every index and byte offset the lowerings compute fits int64; larger
    layers are rejected by name.

    Example (T = 256, H = 256, I = 128, E = 4, K = 2, B = 128, so N = 7):

    ```mlir
    %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
        x(%x : tensor<256x256xbf16>) dy(%dy : tensor<256x256xbf16>)
        affinities(%a : tensor<1024xf32>)
        gate_up(%wgu : tensor<4x256x2x128xbf16>)
        down(%wd : tensor<4x128x256xbf16>)
        routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
        {block_size = 128 : i64, top_k = 2 : i64,
         quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
        -> tensor<256x256xbf16>, tensor<1024xf32>,
           tensor<4x256x2x128xf32>, tensor<4x128x256xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$hidden_states,
    AnyRankedTensor:$output_grad,
    AnyRankedTensor:$expert_affinities_masked,
    AnyRankedTensor:$gate_up_weight,
    Optional<AnyRankedTensor>:$gate_up_scales,
    AnyRankedTensor:$down_weight,
    Optional<AnyRankedTensor>:$down_scales,
    AnyRankedTensor:$token_position_to_id,
    AnyRankedTensor:$block_to_expert,
    Optional<AnyRankedTensor>:$gate_up_checkpoint,
    Optional<AnyRankedTensor>:$gate_up_bias,
    Optional<AnyRankedTensor>:$down_bias,
    I64Attr:$block_size,
    I64Attr:$top_k,
    DefaultValuedAttr<Moe_ActivationAttr, "::mlir::moe::Activation::swiglu">:$activation,
    DefaultValuedAttr<Moe_AffinityAttr, "::mlir::moe::Affinity::on_i">:$affinity,
    Moe_MXQuantAttr:$quant,
    OptionalAttr<Moe_ClampAttr>:$clamp,
    UnitAttr:$bias,
    DefaultValuedAttr<Moe_DxAccumulateAttr, "::mlir::moe::DxAccumulate::f32">:$dx_accumulate,
    UnitAttr:$single_expert_dense
  );

  let results = (outs
    AnyRankedTensor:$hidden_states_grad,
    AnyRankedTensor:$affinities_grad,
    AnyRankedTensor:$gate_up_weight_grad,
    AnyRankedTensor:$down_weight_grad,
    Optional<AnyRankedTensor>:$gate_up_bias_grad,
    Optional<AnyRankedTensor>:$down_bias_grad
  );

  let assemblyFormat = [{
    `x` `(` $hidden_states `:` type($hidden_states) `)`
    `dy` `(` $output_grad `:` type($output_grad) `)`
    `affinities` `(` $expert_affinities_masked `:`
        type($expert_affinities_masked) `)`
    `gate_up` `(` $gate_up_weight `:` type($gate_up_weight)
        (`scales` $gate_up_scales^ `:` type($gate_up_scales))? `)`
    `down` `(` $down_weight `:` type($down_weight)
        (`scales` $down_scales^ `:` type($down_scales))? `)`
    `routing` `(` $token_position_to_id `:` type($token_position_to_id) `,`
        $block_to_expert `:` type($block_to_expert) `)`
    (`checkpoint` `(` $gate_up_checkpoint^ `:` type($gate_up_checkpoint) `)`)?
    (`gate_up_bias` `(` $gate_up_bias^ `:` type($gate_up_bias) `)`)?
    (`down_bias` `(` $down_bias^ `:` type($down_bias) `)`)?
    attr-dict `->` type($hidden_states_grad) `,` type($affinities_grad) `,`
        type($gate_up_weight_grad) `,` type($down_weight_grad)
        (`,` type($gate_up_bias_grad)^ `,` type($down_bias_grad))?
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    /// Shapes of the contract, read from the operands (valid after
    /// verification).
    int64_t getNumTokens();
    int64_t getHiddenSize();
    int64_t getIntermediateSize();
    int64_t getNumExperts();
    int64_t getNumBlocks();
  }];
}

def Moe_RouteOp : Moe_Op<"route", [Pure]> {
  let summary = "builds the blocked routing layout from a top-k selection";
  let description = [{
    Turns a router's top-k expert indices and scores ([T, K]) into the
    layout `moe.blockwise_bwd` consumes: `token_position_to_id` [N*B],
    `block_to_expert` [N] and `expert_affinities_masked` [T*E]. Experts are
    laid out in ascending order; each expert's tokens, in ascending token id
    (a stable order, so the result is deterministic), fill consecutive blocks
    from its first block; padding slots hold -1; an expert without tokens
    gets no block; spare blocks at the end belong to expert E-1 and hold only
    padding. N = ceil((T*K - (E-1)) / B) + E - 1 is the worst case over all
    routings. Indices must be distinct within a row and in [0, E).

    ```mlir
    %tok, %blk, %aff = moe.route %idx, %scores
        {num_experts = 4 : i64, block_size = 128 : i64}
        : tensor<256x2xi32>, tensor<256x2xf32>
        -> tensor<896xi32>, tensor<7xi32>, tensor<1024xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$topk_indices,
    AnyRankedTensor:$topk_scores,
    I64Attr:$num_experts,
    I64Attr:$block_size
  );
  let results = (outs
    AnyRankedTensor:$token_position_to_id,
    AnyRankedTensor:$block_to_expert,
    AnyRankedTensor:$expert_affinities_masked
  );
  let assemblyFormat = [{
    $topk_indices `,` $topk_scores attr-dict `:` type($topk_indices) `,`
        type($topk_scores) `->` type(results)
  }];
  let hasVerifier = 1;
}

include "moe/Dialect/Moe/IR/MoePhaseOps.td"

#endif // MOE_DIALECT_MOE_IR_MOEOPS_TD
