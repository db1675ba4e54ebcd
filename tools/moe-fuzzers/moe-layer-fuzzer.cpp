//===- moe-layer-fuzzer.cpp - libFuzzer harness of the layer spec ---------===//
//
// Fuzzes parseLayerDesc, the "T=..,H=..,act=.." spelling that moe-run
// --layer, the C API and the Python package accept, parseGemmDesc, the
// "M=..,N=..,K=.." spelling of moe-run --gemm, and setKernelChoices, the
// "round-reuse=3,tma-store=true" text of the C API's kernelChoices and
// Python's kernel_choices, on every input. Beyond not crashing (ASan and
// UBSan watch the integer arithmetic of the block count and of the operand
// sizes), a spec that parses must print back to a spelling that parses to
// the same layer or GEMM, and a layer must either build its MLIR module or
// say why not; kernel choices that parse print back to text that sets the
// same choices, and text that does not sets nothing and says why.
//
//===----------------------------------------------------------------------===//
#include "Gemm.h"

#include "moe/JIT/MoeJIT.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void fuzzGemm(const std::string &spec) {
  moe::run::GemmDesc desc;
  std::string error = moe::run::parseGemmDesc(spec, desc);
  if (!error.empty())
    return;
  std::string printed = desc.toString();
  moe::run::GemmDesc reparsed;
  if (!moe::run::parseGemmDesc(printed, reparsed).empty() ||
      reparsed.toString() != printed) {
    std::fprintf(stderr, "GEMM round trip broke: '%s' printed as '%s'\n",
                 spec.c_str(), printed.c_str());
    std::abort();
  }
  if (moe::run::gemmToMLIR(desc).find("func.func @moe_gemm") ==
      std::string::npos) {
    std::fprintf(stderr, "gemmToMLIR of '%s' has no function\n",
                 printed.c_str());
    std::abort();
  }
}

void fuzzKernelChoices(const std::string &text) {
  moe::jit::CompileOptions defaults, options;
  std::string before = moe::jit::kernelChoicesToString(options);
  moe::jit::Status status = moe::jit::setKernelChoices(options, text);
  if (!status) {
    if (status.message().empty() ||
        moe::jit::kernelChoicesToString(options) != before) {
      std::fprintf(stderr, "setKernelChoices('%s') failed without a message "
                   "or set a choice\n", text.c_str());
      std::abort();
    }
    return;
  }
  std::string printed = moe::jit::kernelChoicesToString(options);
  moe::jit::CompileOptions reparsed = defaults;
  if (!moe::jit::setKernelChoices(reparsed, printed) ||
      moe::jit::kernelChoicesToString(reparsed) != printed) {
    std::fprintf(stderr, "kernel choices round trip broke: '%s' printed as "
                 "'%s'\n", text.c_str(), printed.c_str());
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Specs are one short line; longer inputs only slow the search down.
  if (size > 4096)
    return -1;
  std::string spec(reinterpret_cast<const char *>(data), size);
  fuzzGemm(spec);
  fuzzKernelChoices(spec);
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
