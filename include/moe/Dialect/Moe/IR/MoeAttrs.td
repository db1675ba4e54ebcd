//===- MoeAttrs.td - enums and attributes of the moe dialect -*- tablegen -*-===//
//
// The layer options of `moe.blockwise_bwd`: activation, affinity placement,
// MX quantization, clamp limits and dx accumulation.
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

#endif // MOE_DIALECT_MOE_IR_MOEATTRS_TD
