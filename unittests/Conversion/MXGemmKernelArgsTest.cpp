//===- MXGemmKernelArgsTest.cpp - the MX GEMM kernels' launch ABI ---------===//
//
// mxGemmKernelArgs is the one statement of an MX GEMM kernel's arguments:
// the kernel builder types its parameters from it, the emitter binds them
// by role, and the launch record passes each role's host buffer. These
// tests pin the order for the kernel forms the pipelines build, so that a
// change to it is a deliberate one (the lit tests check the same order in
// the launch records and kernel signatures they print).
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <utility>
#include <vector>

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::moe;

namespace {

using Args = std::vector<std::pair<MXGemmArg, bool>>;

Args argsOf(const MXGemmProblem &problem, const MXGemmConfig &config) {
  Args args;
  for (const MXGemmKernelArg &arg : mxGemmKernelArgs(problem, config))
    args.push_back({arg.role, arg.tensorMap});
  return args;
}

MXGemmProblem problemOf(MXMmaPath path, MXGemmKind kind = MXGemmKind::Block) {
  MXGemmProblem problem{};
  problem.kind = kind;
  problem.path = path;
  return problem;
}

constexpr bool kMap = true, kPointer = false;

} // namespace

TEST(MXGemmKernelArgs, CodesPathTakesScaleTablesBeforeTheResult) {
  Args want = {{MXGemmArg::Lhs, kMap},
               {MXGemmArg::Rhs, kMap},
               {MXGemmArg::LhsScales, kPointer},
               {MXGemmArg::RhsScales, kPointer},
               {MXGemmArg::Result, kPointer},
               {MXGemmArg::BlockToExpert, kPointer}};
  EXPECT_EQ(argsOf(problemOf(MXMmaPath::Fp8WgmmaPromote), MXGemmConfig{}),
            want);
}

TEST(MXGemmKernelArgs, RegisterStoresWithBias) {
  MLIRContext ctx;
  MXGemmProblem problem = problemOf(MXMmaPath::Bf16Operands);
  problem.biasType = Float32Type::get(&ctx);
  Args want = {{MXGemmArg::Lhs, kMap},
               {MXGemmArg::Rhs, kMap},
               {MXGemmArg::Result, kPointer},
               {MXGemmArg::BlockToExpert, kPointer},
               {MXGemmArg::Bias, kPointer}};
  EXPECT_EQ(argsOf(problem, MXGemmConfig{}), want);
}

TEST(MXGemmKernelArgs, TmaStoreGatheredLhsPersistent) {
  // The result's map after the other maps; the gathered lhs's token rows
  // first among the pointers; the token ids, then the tile counter, last.
  MXGemmProblem problem = problemOf(MXMmaPath::Bf16Operands);
  problem.skipPadding = true;
  MXGemmConfig config;
  config.lhsGather = true;
  config.tmaStore = 2;
  config.persistent = true;
  Args want = {{MXGemmArg::Rhs, kMap},
               {MXGemmArg::Result, kMap},
               {MXGemmArg::Lhs, kPointer},
               {MXGemmArg::BlockToExpert, kPointer},
               {MXGemmArg::Tokens, kPointer},
               {MXGemmArg::TileCounter, kPointer}};
  EXPECT_EQ(argsOf(problem, config), want);
}

TEST(MXGemmKernelArgs, RoundedExpertOperandsAndScaleMaps) {
  MXGemmProblem problem =
      problemOf(MXMmaPath::Bf16Operands, MXGemmKind::Expert);
  MXGemmConfig config;
  config.roundLhs = config.roundRhs = true;
  Args want = {{MXGemmArg::Lhs, kPointer},
               {MXGemmArg::Rhs, kPointer},
               {MXGemmArg::Result, kPointer},
               {MXGemmArg::BlockToExpert, kPointer}};
  EXPECT_EQ(argsOf(problem, config), want);

  MXGemmConfig codes;
  codes.rhsCodes = codes.lhsCodes = true;
  codes.tmaStore = 2;
  Args wantCodes = {{MXGemmArg::Lhs, kMap},
                    {MXGemmArg::Rhs, kMap},
                    {MXGemmArg::RhsScales, kMap},
                    {MXGemmArg::LhsScales, kMap},
                    {MXGemmArg::Result, kMap},
                    {MXGemmArg::BlockToExpert, kPointer}};
  EXPECT_EQ(argsOf(problemOf(MXMmaPath::Bf16Operands), codes), wantCodes);
}

TEST(MXGemmKernelArgs, ActivationEpilogueOutputsAroundItsInputs) {
  // The first output where a plain result is; the others after the slot
  // affinities, in the order the host lowering passes the results; the
  // checkpoint's token ids after them.
  MLIRContext ctx;
  ctx.getOrLoadDialect<MoeDialect>();
  MXGemmProblem problem = problemOf(MXMmaPath::Bf16Operands);
  MXGemmEpilogue &e = problem.epilogue;
  e.kind = MXGemmEpilogue::Kind::GatedActBwd;
  e.writeDGateUp = false;
  e.dGateUpAlongN = e.dGateUpAlongM =
      MXQuantAttr::get(&ctx, MXElement::f8E4M3FN, 32, ScaleRule::rceil);
  e.writePartials = true;
  e.gateUpCheckpoint = true;
  MXGemmConfig config;
  config.persistent = true;
  Args want = {{MXGemmArg::Lhs, kMap},
               {MXGemmArg::Rhs, kMap},
               {MXGemmArg::DGateUpAlongN, kPointer},
               {MXGemmArg::BlockToExpert, kPointer},
               {MXGemmArg::GateUp, kPointer},
               {MXGemmArg::Affinities, kPointer},
               {MXGemmArg::DGateUpAlongM, kPointer},
               {MXGemmArg::Partials, kPointer},
               {MXGemmArg::CheckpointTokenIds, kPointer},
               {MXGemmArg::TileCounter, kPointer}};
  EXPECT_EQ(argsOf(problem, config), want);

  e.writeDGateUp = true;
  e.dGateUpAlongN = e.dGateUpAlongM = MXQuantAttr();
  e.writePartials = e.gateUpCheckpoint = false;
  e.writeH = e.writeScaledH = true;
  config.persistent = false;
  Args wantF32 = {{MXGemmArg::Lhs, kMap},
                  {MXGemmArg::Rhs, kMap},
                  {MXGemmArg::DGateUp, kPointer},
                  {MXGemmArg::BlockToExpert, kPointer},
                  {MXGemmArg::GateUp, kPointer},
                  {MXGemmArg::Affinities, kPointer},
                  {MXGemmArg::H, kPointer},
                  {MXGemmArg::ScaledH, kPointer}};
  EXPECT_EQ(argsOf(problem, config), wantF32);
}
