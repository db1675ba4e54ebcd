//===- MoeDialect.td - the moe dialect ---------------------*- tablegen -*-===//
//
// The dialect definition and the base classes of its ops and attributes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEDIALECT_TD
#define MOE_DIALECT_MOE_IR_MOEDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let summary = "Mixture-of-Experts backward pass with MXFP8 matrix multiplies";
  let description = [{
    The `moe` dialect describes the backward pass of a blockwise
    Mixture-of-Experts layer (gated MLP experts, top-k routing) at the level
    of the NKI `blockwise_mm_bwd_mxfp8` tensor contract. `moe.blockwise_bwd`
    carries the whole contract; `moe.route` builds its blocked routing layout
    from a router's top-k selection. The compiler decomposes the composite op
    into phase-level GEMMs with explicit MX (OCP microscaling) quantization,
    fuses them and lowers them to host loops or to GPU kernels.

    Names used throughout: T tokens, H hidden size, I intermediate size per
    expert, E experts, K experts per token (top-k), B tokens per block, N
    blocks, with N = ceil((T*K - (E-1)) / B) + E - 1.
  }];
  let cppNamespace = "::mlir::moe";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (defined in MoeAttrs.cpp, where their
    /// storage classes are complete).
    void registerAttributes();
  }];
}

class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic, traits>;

class Moe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Moe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // MOE_DIALECT_MOE_IR_MOEDIALECT_TD
