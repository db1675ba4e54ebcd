//===- Gemm.h - moe-run's standalone GEMM mode ------------------*- C++ -*-===//
//
// `moe-run --gemm SPEC` compiles one GEMM of the backward on its own: the
// MX quantization of both operands along the contraction followed by
// moe.block_matmul (the recompute, P1 and P2: rows in blocks of B, a weight
// per group) or moe.expert_matmul (P3 and P4: each group's slots
// contracted), runs it on seeded bf16 operands and checks sampled outputs
// against the exact MX product in fp64. It measures the GEMM kernels alone,
// next to torch's GEMMs in the benchmark (issue 10).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOE_RUN_GEMM_H
#define MOE_TOOLS_MOE_RUN_GEMM_H

#include "moe/Reference/MX.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe::run {

/// One GEMM, as `--gemm` spells it:
///   kind=block  (default): C[M, N] = A[M, K] . W[g(row), N, K]^T, rows in
///               blocks of B, block i of the M / B in group i * G / (M / B);
///   kind=expert: C[g, M, N] = A[slots of g, M]^T . Bm[slots of g, N] over
///               K slots in blocks of B, grouped the same way.
/// quant=e4m3|e5m2 quantizes both operands along the contraction in blocks
/// of 32 with `rule`; quant=none multiplies the bf16 values.
struct GemmDesc {
  enum class Kind { Block, Expert };
  Kind kind = Kind::Block;
  int64_t M = 0, N = 0, K = 0;
  int64_t G = 1;
  int64_t B = 128;
  bool quantized = true;
  ref::MXElem elem = ref::MXElem::E4M3;
  ref::ScaleRule rule = ref::ScaleRule::RCeil;

  /// 2 M N K.
  double flops() const;
  /// Every key written, as parseGemmDesc reads it.
  std::string toString() const;
};

/// Parses SPEC ("M=8192,N=8192,K=8192,G=1,B=128,kind=block,quant=e4m3,
/// rule=rceil"; M, N, K required). Returns an empty string on success, else
/// the error.
std::string parseGemmDesc(const std::string &spec, GemmDesc &desc);

/// The module of the GEMM: func.func @moe_gemm(%a, %b, %blocks) -> C.
/// `config`, when not empty, is the GEMM's `moe.gemm_config` attribute
/// (`#moe.gemm_config<...>`), which moe-gpu-kernel-config then leaves as it
/// is: a kernel configuration to measure.
std::string gemmToMLIR(const GemmDesc &desc, const std::string &config = "");

/// The seeded inputs: the two operands as bf16 bit patterns (N(0, 1)
/// values, generated in parallel chunks of 2^20 elements, each with its own
/// stream: the same bits whatever the thread count) and the block-to-group
/// table.
struct GemmInputs {
  std::vector<uint16_t> a, b;
  std::vector<int32_t> blocks;
};
GemmInputs makeGemmInputs(const GemmDesc &desc, uint64_t seed);

/// Sampled outputs of the exact product (the operands quantized and
/// dequantized as the kernel does, multiplied in fp64): up to 16 rows of C
/// (kind block) or 4 rows of 4 groups (kind expert), whole rows of N.
struct GemmSample {
  int64_t offset; ///< element offset of the row in C
  std::vector<double> values;
};
std::vector<GemmSample> gemmReference(const GemmDesc &desc,
                                      const GemmInputs &in);

} // namespace moe::run

#endif // MOE_TOOLS_MOE_RUN_GEMM_H
