//===- Model.h - reference forward and backward of the MoE layer -*- C++ -*-===//
//
// The two references of SPEC section 6:
//   R_64  backward64(): unquantized fp64, the exact-arithmetic gradient.
//   R_mx  backwardMX(): the same quantization as the compiler (rule, axes,
//         fp32 elementwise math), GEMMs in fp64 on dequantized values.
// and the fp64 forward that the finite-difference checks differentiate.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_REFERENCE_MODEL_H
#define MOE_REFERENCE_MODEL_H

#include "moe/Reference/MX.h"
#include "moe/Reference/Routing.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moe::ref {

enum class Activation { SwiGLU, GeGLU };
enum class AffinityPlacement { OnI, OnH };
/// How a token's K expert contributions to dx are summed: in fp32 (one
/// rounding to the output type at the end) or in bf16 (each partial sum
/// rounded to bf16, experts in ascending order).
enum class DxAccumulate { F32, BF16 };

/// Operand quantization of the GEMMs: MX blocks, or bf16 operands (none).
struct QuantConfig {
  bool enabled = true;
  MXElem elem = MXElem::E4M3;
  ScaleRule rule = ScaleRule::RCeil;
};

/// Optional clamp limits of the gate and up pre-activations.
struct ClampConfig {
  std::optional<double> gateLo, gateHi, upLo, upHi;
};

/// Everything that is not a tensor: shapes and the op's attributes.
struct LayerConfig {
  int64_t T = 0, H = 0, I = 0, E = 0, K = 0, B = 128;
  Activation act = Activation::SwiGLU;
  AffinityPlacement affinity = AffinityPlacement::OnI;
  QuantConfig quant;
  ClampConfig clamp;
  bool bias = false;
  /// Use the gate/up checkpoint input instead of recomputing g and u.
  bool checkpoint = false;
  /// Single-expert dense mode (E = 1, K = 1, identity routing).
  bool dense = false;
  DxAccumulate dxAccumulate = DxAccumulate::F32;
  /// Output dtypes: dx bf16 unless dxF32; weight grads fp32 unless
  /// weightGradBF16. The references return fp64 arrays holding values of
  /// these types (R_mx rounds, R_64 does not).
  bool dxF32 = false;
  bool weightGradBF16 = false;

  int64_t numBlocks() const { return moe::ref::numBlocks(T, K, E, B); }
};

/// Layer inputs, fp64 arrays. Generated inputs hold bf16-representable
/// values (the op's storage type) except affinities (fp32).
struct LayerInputs {
  std::vector<double> x;          ///< [T,H]
  std::vector<double> dy;         ///< [T,H]
  std::vector<double> affinities; ///< [T*E], masked
  std::vector<double> wgu;        ///< [E,H,2,I]
  std::vector<double> wd;         ///< [E,I,H]
  std::vector<double> bgu;        ///< [E,2,I] when bias
  std::vector<double> bd;         ///< [E,H] when bias
  std::vector<double> checkpoint; ///< [N,2,I,B] when checkpoint
  Routing routing;
  /// The router's top-k selection the routing was built from ([T,K]), when
  /// the inputs were generated (empty for inputs read from files).
  std::vector<int32_t> topkIdx;
};

/// The op's results, fp64 arrays (shapes of SPEC section 4).
struct LayerGrads {
  std::vector<double> dx;   ///< [T,H]
  std::vector<double> da;   ///< [T*E]
  std::vector<double> dwgu; ///< [E,H,2,I]
  std::vector<double> dwd;  ///< [E,I,H]
  std::vector<double> dbgu; ///< [E,2,I] when bias
  std::vector<double> dbd;  ///< [E,H] when bias
};

/// Checks a configuration and inputs against the contract (the same
/// relations the op verifier enforces, plus routing validity and clamp
/// order). Returns an empty string when valid, else the first problem.
std::string validate(const LayerConfig &cfg, const LayerInputs &in);

/// The checks of validate() that need only the configuration, the routing
/// and the affinities [T*E]: for callers that hold the other inputs in their
/// storage types, with shapes they have checked themselves.
std::string validateRouting(const LayerConfig &cfg, const Routing &routing,
                            const std::vector<double> &affinities);

/// Seeded inputs per SPEC section 6: x, dy ~ N(0,1) and weights ~ N(0,1/H),
/// rounded to bf16; router logits ~ N(0,1) -> top-k -> softmax
/// (TopKThenSoftmax) -> masked affinities; biases ~ N(0, 1/H) when on;
/// routing built with buildRouting (identity in dense mode); the checkpoint,
/// when on, is the fp64 forward's clamped g and u rounded to bf16.
/// `emptyExperts` experts (the highest ids) receive no tokens.
LayerInputs makeInputs(const LayerConfig &cfg, uint64_t seed,
                       int64_t emptyExperts = 0);

/// fp64 forward: out [T,H] = sum_e a[t,e] * (h . Wd[e] + bd[e]), g and u
/// recomputed from x (clamped), never from the checkpoint.
std::vector<double> forward64(const LayerConfig &cfg, const LayerInputs &in);

/// R_64: unquantized fp64 backward (uses the checkpoint when cfg.checkpoint).
LayerGrads backward64(const LayerConfig &cfg, const LayerInputs &in);

/// R_mx: the MX-emulating backward (docs/numerics.md gives every rounding).
LayerGrads backwardMX(const LayerConfig &cfg, const LayerInputs &in);

/// ||a - b||_F / ||b||_F (0 when both are zero; +Inf if b is zero and a not;
/// NaN if either holds a NaN).
double relativeFrobenius(const std::vector<double> &a,
                         const std::vector<double> &b);

/// Spellings shared by the CLI and the dialect.
const char *toString(Activation act);
const char *toString(AffinityPlacement aff);
bool parseActivation(const std::string &name, Activation &act);
bool parseAffinity(const std::string &name, AffinityPlacement &aff);

} // namespace moe::ref

#endif // MOE_REFERENCE_MODEL_H
