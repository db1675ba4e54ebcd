//===- moe-ir-fuzzer.cpp - libFuzzer harness of the IR front end ----------===//
//
// Fuzzes what a user's IR goes through before any code runs: the parser
// and verifiers of every dialect the JIT accepts, then a lowering pipeline.
// Built twice (MOE_FUZZ_PIPELINE):
//   moe-ir-fuzzer      moe-host-pipeline: moe-decompose-bwd, moe-fuse and
//                      the host lowering to the LLVM dialect (the JIT's
//                      --target=host path);
//   moe-ir-gpu-fuzzer  moe-decompose-bwd, moe-fuse, moe-gpu-kernel-config
//                      and convert-moe-to-nvgpu for sm_90a: the kernel
//                      generator, without the NVPTX back end.
// A pass may fail with a diagnostic. A crash, a sanitizer report, a
// timeout, or a pass that succeeds but leaves IR that does not verify (the
// harness verifies after each successful pass itself, so that this is told
// apart from a failure) is a finding.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/Transforms/Passes.h"
#include "moe/GPU/Transforms/Passes.h"
#include "moe/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <memory>
#include <string>

#ifndef MOE_FUZZ_PIPELINE
#error "MOE_FUZZ_PIPELINE names the pass pipeline to fuzz"
#endif

using namespace mlir;

namespace {

/// Inputs that reach a known crash of the upstream MLIR 22 parser, which
/// no change here can fix; docs/fuzzing.md lists each with its reproducer
/// (test/Fuzz/Inputs/upstream/). An input holding one of these op names is
/// skipped, not run: the filter only narrows what is fuzzed.
constexpr llvm::StringLiteral kUpstreamParserCrashes[] = {
    // linalg.transpose / linalg.broadcast: a malformed `permutation` /
    // `dimensions` array leaves a null attribute that the parser stores.
    "linalg.transpose",
    "linalg.broadcast",
};

/// Whether `text` gives a linalg structured op a properties attribute `<A>`
/// that is not a dictionary: after the attribute dictionary of
/// linalg.generic or the name of a named op. The upstream MLIR 22 parser
/// (parseCommonStructuredOpParts) takes any attribute there and uses it as
/// a dictionary unchecked, which is undefined behaviour (a SmallVector of
/// ~2^63 elements under the sanitizers; Debian's mlir-opt prints garbage).
/// Reproducer: test/Fuzz/Inputs/upstream/structured-properties.mlir.
bool hasNonDictionaryStructuredProperties(llvm::StringRef text) {
  if (!text.contains("linalg."))
    return false;
  auto isIdentifier = [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  };
  for (size_t at = text.find('<'); at != llvm::StringRef::npos;
       at = text.find('<', at + 1)) {
    llvm::StringRef after = text.drop_front(at + 1).ltrim();
    if (after.starts_with("{"))
      continue;
    llvm::StringRef before = text.take_front(at).rtrim();
    if (before.ends_with("}"))
      return true;
    size_t start = before.size();
    while (start > 0 && isIdentifier(before[start - 1]))
      --start;
    if (before.drop_front(start).starts_with("linalg."))
      return true;
  }
  return false;
}

/// Verifies the IR after every pass that succeeded, and stops the process
/// (a finding) when it does not verify: the pass manager's own verifier
/// would report it as an ordinary pass failure.
struct VerifyAfterEachPass : PassInstrumentation {
  void runAfterPass(Pass *pass, Operation *op) override {
    if (succeeded(verify(op)))
      return;
    llvm::errs() << "moe-ir-fuzzer: '" << pass->getArgument()
                 << "' succeeded but left IR that does not verify\n";
    std::abort();
  }
};

struct Harness {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<PassManager> pm;

  Harness() {
    moe::registerPipelineDependencies(registry);
    moe::registerMoeTransformsPasses();
    moe::registerMoeConversionPasses();
    moe::registerMoeGPUTransformsPasses();
    moe::registerMoePipelines();
    context = std::make_unique<MLIRContext>(registry,
                                            MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->printOpOnDiagnostic(false);
    context->printStackTraceOnDiagnostic(false);
    pm = std::make_unique<PassManager>(context.get());
    pm->enableVerifier(false);
    pm->addInstrumentation(std::make_unique<VerifyAfterEachPass>());
    std::string error;
    llvm::raw_string_ostream os(error);
    if (failed(parsePassPipeline(MOE_FUZZ_PIPELINE, *pm, os))) {
      llvm::errs() << "moe-ir-fuzzer: bad pipeline: " << error << "\n";
      std::abort();
    }
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Harness harness;
  // The test files that seed the corpus are below 16 KiB per split; larger
  // inputs only slow the search down.
  if (size > 16384)
    return -1;
  // The MLIR lexer stops at a NUL terminator, as every MemoryBuffer and
  // std::string has (the JIT compiles std::string text): copy into one.
  const std::string owned(reinterpret_cast<const char *>(data), size);
  llvm::StringRef text(owned);
  for (llvm::StringLiteral crash : kUpstreamParserCrashes)
    if (text.contains(crash))
      return -1;
  if (hasNonDictionaryStructuredProperties(text))
    return -1;
  MLIRContext &context = *harness.context;
  // Diagnostics are the expected outcome of most inputs: drop them.
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) {
    return success();
  });
  ParserConfig config(&context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, config);
  if (!module)
    return 0;
  (void)harness.pm->run(*module);
  return 0;
}
