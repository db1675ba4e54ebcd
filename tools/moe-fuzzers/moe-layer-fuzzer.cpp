//===- moe-layer-fuzzer.cpp - libFuzzer harness of the layer spec ---------===//
//
// Fuzzes parseLayerDesc, the "T=..,H=..,act=.." spelling that moe-run
// --layer, the C API and the Python package accept. Beyond not crashing
// (ASan and UBSan watch the integer arithmetic of the block count), a spec
// that parses must print back to a spelling that parses to the same layer,
// and a layer must either build its MLIR module or say why not.
//
//===----------------------------------------------------------------------===//
#include "moe/JIT/MoeJIT.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Specs are one short line; longer inputs only slow the search down.
  if (size > 4096)
    return -1;
  std::string spec(reinterpret_cast<const char *>(data), size);
  moe::jit::Expected<moe::jit::LayerDesc> layer =
      moe::jit::parseLayerDesc(spec);
  if (!layer) {
    if (layer.message().empty()) {
      std::fprintf(stderr, "parseLayerDesc failed without a message\n");
      std::abort();
    }
    return 0;
  }
  std::string printed = moe::jit::toString(*layer);
  moe::jit::Expected<moe::jit::LayerDesc> reparsed =
      moe::jit::parseLayerDesc(printed);
  if (!reparsed || moe::jit::toString(*reparsed) != printed) {
    std::fprintf(stderr, "round trip broke: '%s' printed as '%s'\n",
                 spec.c_str(), printed.c_str());
    std::abort();
  }
  // Layers too large to build cheaply are still verified: layerToMLIR
  // builds only the op, whose verifier bounds every size.
  moe::jit::Expected<std::string> module = moe::jit::layerToMLIR(*layer);
  if (!module && module.message().empty()) {
    std::fprintf(stderr, "layerToMLIR failed without a message\n");
    std::abort();
  }
  return 0;
}
