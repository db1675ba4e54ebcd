//===- LayerBuffers.h - host buffers of one run of a layer (tests) ---*- C++ -*-===//
//
// The inputs and outputs of one run of a plain moe.blockwise_bwd layer (no
// bias, no checkpoint, bf16 weights) as the API's tests hold them: the
// reference model's seeded inputs in their storage types, the outputs
// poisoned, and references to both in signature order.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_UNITTESTS_JIT_LAYERBUFFERS_H
#define MOE_UNITTESTS_JIT_LAYERBUFFERS_H

#include "moe/JIT/MoeJIT.h"
#include "moe/Reference/BF16.h"
#include "moe/Reference/Model.h"

#include <cstdint>
#include <vector>

namespace moe::jit::testing {

struct LayerBuffers {
  static constexpr float kPoison = -1e30f;
  static constexpr uint16_t kPoisonBF16 = 0xFFFF;

  /// Seeded reference inputs of `desc`'s sizes, in storage types; poisoned
  /// outputs.
  void fill(const LayerDesc &desc, uint64_t seed) {
    cfg = moe::ref::LayerConfig();
    cfg.T = desc.T;
    cfg.H = desc.H;
    cfg.I = desc.I;
    cfg.E = desc.E;
    cfg.K = desc.K;
    cfg.B = desc.B;
    ref = moe::ref::makeInputs(cfg, seed);
    auto bf16 = [](const std::vector<double> &v) {
      std::vector<uint16_t> out(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        out[i] = moe::ref::bf16FromFloat(static_cast<float>(v[i]));
      return out;
    };
    x = bf16(ref.x);
    dy = bf16(ref.dy);
    wgu = bf16(ref.wgu);
    wd = bf16(ref.wd);
    aff.assign(ref.affinities.begin(), ref.affinities.end());
    tok = ref.routing.tokenPositionToId;
    blk = ref.routing.blockToExpert;
    dx.assign(desc.T * desc.H, kPoisonBF16);
    da.assign(desc.T * desc.E, kPoison);
    dwgu.assign(desc.E * desc.H * 2 * desc.I, kPoison);
    dwd.assign(desc.E * desc.I * desc.H, kPoison);
  }

  /// The buffers' addresses in signature order: x, dy, affinities, wgu,
  /// wd, token_position_to_id, block_to_expert, then dx, da, dwgu, dwd.
  std::vector<void *> pointers() {
    return {x.data(),  dy.data(),  aff.data(), wgu.data(),
            wd.data(), tok.data(), blk.data(), dx.data(),
            da.data(), dwgu.data(), dwd.data()};
  }
  std::vector<ConstTensorRef> inputRefs(const Signature &sig) {
    std::vector<void *> data = pointers();
    std::vector<ConstTensorRef> refs;
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      refs.push_back({data[i], sig.inputs[i].dtype, sig.inputs[i].shape});
    return refs;
  }
  std::vector<TensorRef> outputRefs(const Signature &sig) {
    std::vector<void *> data = pointers();
    std::vector<TensorRef> refs;
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      refs.push_back({data[sig.inputs.size() + i], sig.outputs[i].dtype,
                      sig.outputs[i].shape});
    return refs;
  }
  /// Whether every output still holds its poison.
  bool untouched() const {
    for (uint16_t v : dx)
      if (v != kPoisonBF16)
        return false;
    for (const std::vector<float> *v : {&da, &dwgu, &dwd})
      for (float e : *v)
        if (e != kPoison)
          return false;
    return true;
  }

  moe::ref::LayerConfig cfg;
  moe::ref::LayerInputs ref;
  std::vector<uint16_t> x, dy, wgu, wd, dx;
  std::vector<float> aff, da, dwgu, dwd;
  std::vector<int32_t> tok, blk;
};

} // namespace moe::jit::testing

#endif // MOE_UNITTESTS_JIT_LAYERBUFFERS_H
