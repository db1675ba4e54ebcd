//===- GemmConfig.cpp - the kernel configuration of GPU GEMMs -------------===//
//
// The choice of #moe.gemm_config from a chip's TargetInfo, and the kernel
// shape it stands for.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/GemmConfig.h"

#include "moe/Conversion/MoeToNVGPU/MXGemm.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

/// Gives the producer warpgroup at least `count` setmaxnreg registers,
/// taking them from the consumers 8 at a time until the kernel fits (or
/// they are down to 24).
static void raiseProducerRegisters(MXGemmConfig &c, int64_t count,
                                   const MXGemmProblem &problem,
                                   const TargetInfo &target) {
  if (c.producerRegisters >= count)
    return;
  c.producerRegisters = count;
  while (c.consumerRegisters > 24 && !fitsMXGemm(problem, c, target))
    c.consumerRegisters -= 8;
}

/// A power-of-two ring for the kernels that round an operand: the stages
/// of two K tiles each iteration by shifts, not 64-bit divisions (with 6
/// stages the 128x128 producer spilled 280 bytes at 64 registers, none
/// with 4; ptxas -v).
static void powerOfTwoStages(MXGemmConfig &c) {
  while (c.stages & (c.stages - 1))
    --c.stages;
}

/// Whether a GEMM that rounds an operand once per tile of `tile` along an
/// extent of `extent` rounds each element at most `limit` times (the
/// round-reuse and weight-reuse bounds; a limit of 0 never holds).
static bool atMostRoundings(int64_t extent, int64_t tile, int64_t limit) {
  return limit > 0 && (extent + tile - 1) / tile <= limit;
}

FailureOr<MXMmaPath>
moe::getPreferredMmaPath(const TargetInfo &target, StringRef option,
                         function_ref<InFlightDiagnostic()> emitError) {
  if (option.empty())
    return target.getMXMmaPath();
  std::optional<MXMmaPath> path = parseMmaPathOption(option);
  if (!path) {
    emitError() << "unknown MMA path '" << option
                << "' (expected fp8, bf16, bf16-operands or block-scale)";
    return failure();
  }
  if (!target.hasMmaPath(*path)) {
    emitError() << "the " << option << " MMA path does not exist on "
                << target.getChip() << " (its default is "
                << stringifyMmaPathOption(target.getMXMmaPath()) << ")";
    return failure();
  }
  return *path;
}

FailureOr<GemmTargetChoice>
moe::resolveGemmTarget(ModuleOp module, StringRef chip,
                       StringRef mmaPathOption) {
  auto emitError = [&] { return module.emitError(); };
  FailureOr<TargetInfo> target = TargetInfo::get(chip, emitError);
  if (failed(target))
    return failure();
  FailureOr<MXMmaPath> preferred =
      getPreferredMmaPath(*target, mmaPathOption, emitError);
  if (failed(preferred))
    return failure();
  return GemmTargetChoice{*target, *preferred};
}

std::optional<GatedActEpilogue>
moe::matchGatedActEpilogue(BlockMatmulOp gemm, const KernelGroup &group) {
  if (gemm.getBias())
    return std::nullopt;
  Value dA = gemm.getResult();
  GatedActEpilogue epi;
  for (OpOperand &use : dA.getUses()) {
    Operation *user = use.getOwner();
    if (!group.contains(user))
      return std::nullopt;
    if (auto act = dyn_cast<GatedActBwdOp>(user);
        act && !epi.act && act.getDAct() == dA && act.getGateUp() != dA &&
        act.getSlotAffinities() != dA) {
      epi.act = act;
      continue;
    }
    if (auto grad = dyn_cast<AffinityGradOp>(user);
        grad && !epi.grad && grad.getDAct() == dA && grad.getH() &&
        grad.getH() != dA && !llvm::is_contained(grad.getOperands().drop_front(2), dA)) {
      epi.grad = grad;
      continue;
    }
    return std::nullopt;
  }
  if (!epi.act || (epi.grad && epi.grad.getH() != epi.act.getH()))
    return std::nullopt;
  for (Operation *user : epi.act.getH().getUsers()) {
    auto scaled = dyn_cast<ScaleRowsOp>(user);
    if (scaled && !epi.scaled && group.contains(scaled) &&
        scaled.getInput() == epi.act.getH() &&
        scaled.getScale() == epi.act.getSlotAffinities())
      epi.scaled = scaled;
  }
  return epi;
}

GemmConfigAttr moe::selectGemmConfig(Operation *op, const TargetInfo &target,
                                     MXMmaPath preferred,
                                     const KernelChoices &choices,
                                     const KernelGroup *group) {
  // The MX paths take codes of one type on both sides; every other GEMM
  // runs on bf16 operands.
  MXMmaPath path = MXMmaPath::Bf16Operands;
  if (preferred != MXMmaPath::Bf16Operands && isMXCodesGemm(op))
    path = preferred;
  // A chip without bf16-operand kernels (sm_100a) runs only GEMMs of codes.
  if (!target.hasMmaPath(path))
    return GemmConfigAttr();
  // The fp8 kernel covers e4m3 block GEMMs of whole tiles; the others
  // dequantize to bf16.
  if (path == MXMmaPath::Fp8WgmmaPromote &&
      !fitsMXGemm(getMXGemmProblem(op, path), target.getMXGemmConfig(path),
                      target))
    path = MXMmaPath::Bf16Dequant;
  MXGemmConfig c = target.getMXGemmConfig(path);
  bool activation = false;
  // bf16 operands: the first row of the chip's table that applies.
  if (path == MXMmaPath::Bf16Operands) {
    MXGemmProblem problem = getMXGemmProblem(op, path);
    // Whether convert-moe-to-nvgpu will build this GEMM with P1's
    // activation-backward epilogue (the same match it makes).
    KernelGroup region;
    if (!group) {
      if (auto fused = op->getParentOfType<FusedOp>()) {
        for (Operation &inner : fused.getBody().front().without_terminator())
          region.insert(&inner);
        group = &region;
      }
    }
    auto block = dyn_cast<BlockMatmulOp>(op);
    activation = choices.activationEpilogue && block && group &&
                 matchGatedActEpilogue(block, *group);
    for (const GemmTableEntry &entry : target.getBf16OperandsTable()) {
      if (problem.n >= entry.minN &&
          (entry.activationEpilogue || !activation) &&
          (!entry.config.pingpong || (activation && choices.persistentGemms)) &&
          fitsMXGemm(problem, entry.config, target)) {
        c = entry.config;
        break;
      }
    }
  }
  // A block GEMM's rhs stored [E, K, N] (transpose_rhs: the recompute's
  // gate/up weight) is read as it is stored, so that its operand kernel
  // writes it in place instead of transposed, where the kernel can.
  if (auto block = dyn_cast<BlockMatmulOp>(op);
      block && path == MXMmaPath::Bf16Operands && block.getTransposeRhs()) {
    c.rhsNMajor = true;
    if (!fitsMXGemm(getMXGemmProblem(op, path), c, target))
      c.rhsNMajor = false;
  }
  // An expert GEMM contracts over slots, and both its operands are stored
  // slot-major ([slots, M], [slots, N]): read as stored, their operand
  // kernels round along the slots in place instead of through a
  // transposing shared-memory tile (row-mode speed, ~1.6x at shape 1).
  if (isa<ExpertMatmulOp>(op) && path == MXMmaPath::Bf16Operands) {
    MXGemmProblem problem = getMXGemmProblem(op, path);
    c.lhsMMajor = true;
    if (!fitsMXGemm(problem, c, target))
      c.lhsMMajor = false;
    c.rhsNMajor = true;
    if (!fitsMXGemm(problem, c, target))
      c.rhsNMajor = false;
  }
  // Persistent bf16-operands kernels, but three stay one CTA per tile:
  // - a block GEMM reading its rhs N-major (the recompute's): its
  //   persistent producer spills 24 bytes in the 40 registers setmaxnreg
  //   leaves it beside the consumers' 232 (ptxas -v), and it measured no
  //   faster persistent (-1% at shape 1);
  // - P1's activation epilogue unless the table gave it the ping-pong
  //   kernel: persistent with both consumer warpgroups on each tile (the
  //   epilogue's L2 prefetches issued by the consumers as each tile
  //   starts) it took 4.15 ms at shape 1 against 4.10 for one CTA per tile
  //   (ncu, H200, docs/results/2026-12-02-p1-tile-variants.md);
  // - a shape of several CTAs per SM.
  c.persistent = choices.persistentGemms && path == MXMmaPath::Bf16Operands &&
                 c.ctasPerSM == 1 && !(isa<BlockMatmulOp>(op) && c.rhsNMajor) &&
                 (!activation || c.pingpong);
  // Clusters of one CTA per tile, where the GEMM's N tiles pair up.
  if (choices.clusterGemms && path == MXMmaPath::Bf16Operands &&
      !c.persistent && c.ctasPerSM == 1) {
    c.clusterN = 2;
    if (!fitsMXGemm(getMXGemmProblem(op, path), c, target))
      c.clusterN = 1;
  }
  // rhs_codes: a block GEMM's weight [E, N, K] that an mx_quantize along K
  // makes read as FP8 codes, half the bytes of bf16 values through L2 and
  // out of the operand kernel. The converters take registers from the
  // consumers and the code ring shared memory from the stages.
  // (Operands seen through moe.fused boundaries: throughFusedRegions.)
  // (A value that an mx_quantize along its last axis makes, with its
  // scales: codes the kernel can read with their TMA scale layout.)
  auto quantizedAlongK = [&](Value codes, Value scales) {
    auto quantize = throughFusedRegions(codes).getDefiningOp<MXQuantizeOp>();
    return quantize && quantize.getScales() == throughFusedRegions(scales) &&
           static_cast<int64_t>(quantize.getAxis()) ==
               cast<ShapedType>(codes.getType()).getRank() - 1;
  };
  if (auto block = dyn_cast<BlockMatmulOp>(op);
      block && choices.rhsCodes && path == MXMmaPath::Bf16Operands &&
      !c.rhsNMajor && c.clusterN == 1 &&
      quantizedAlongK(block.getRhs(), block.getRhsScales())) {
    MXGemmProblem problem = getMXGemmProblem(op, path);
    MXGemmConfig coded = c;
    coded.rhsCodes = true;
    // Two bf16 tiles: one converted while the MMAs read the other.
    coded.dequantStages = 2;
    if (coded.producerRegisters < kRhsCodesProducerRegisters) {
      int64_t freed = (kRhsCodesProducerRegisters - coded.producerRegisters) *
                      coded.producerWarpgroups;
      coded.producerRegisters = kRhsCodesProducerRegisters;
      int64_t perConsumer = (freed + coded.consumerWarpgroups - 1) /
                            coded.consumerWarpgroups;
      coded.consumerRegisters -= (perConsumer + 7) / 8 * 8;
    }
    while (coded.stages > 2 && !fitsMXGemm(problem, coded, target))
      --coded.stages;
    if (fitsMXGemm(problem, coded, target))
      c = coded;
  }
  // lhs_codes: a block GEMM's lhs rows (x, dy, [dg | du]) that an
  // mx_quantize along K makes read as FP8 codes, a quarter of the bytes
  // the kernel streams through L2 at 128x256 and half of what the operand
  // kernel writes; the consumers decode them beside their MMAs.
  if (auto block = dyn_cast<BlockMatmulOp>(op);
      block && choices.lhsCodes && path == MXMmaPath::Bf16Operands &&
      c.clusterN == 1 && !c.rhsCodes &&
      quantizedAlongK(block.getLhs(), block.getLhsScales())) {
    MXGemmProblem problem = getMXGemmProblem(op, path);
    MXGemmConfig coded = c;
    coded.lhsCodes = true;
    // The producer thread also loads the scale bytes: the ping-pong
    // kernel's 24 registers spill 8 bytes (ptxas -v); the consumers give up
    // what it takes.
    raiseProducerRegisters(coded, kLhsCodesProducerRegisters, problem, target);
    if (fitsMXGemm(problem, coded, target))
      c = coded;
  }
  // lhs_gather: a block GEMM's lhs rows gathered from token rows (x of the
  // recompute, dy of P1) and rounded along K read from the token rows
  // rounded once, T rows instead of T * K, through the GEMM's token ids:
  // at both reference shapes 0.3 ms less in all (H200, ncu;
  // docs/results/2026-12-04-lhs-gather.md). The copies' row addresses
  // need kLhsGatherProducerRegisters, which the consumers give up; not in
  // the ping-pong kernel, whose 24 producer registers leave its consumers
  // the 240 its epilogue takes, nor beside rhs_codes, whose converters are
  // the producer warps that would copy.
  if (auto block = dyn_cast<BlockMatmulOp>(op);
      block && choices.lhsGather && path == MXMmaPath::Bf16Operands &&
      c.clusterN == 1 && !c.lhsCodes && !c.rhsCodes && !c.lhsMMajor &&
      !c.pingpong && gatheredLhsQuantize(block)) {
    MXGemmProblem problem = getMXGemmProblem(op, path);
    MXGemmConfig gathered = c;
    gathered.lhsGather = true;
    raiseProducerRegisters(gathered, kLhsGatherProducerRegisters, problem,
                           target);
    if (fitsMXGemm(problem, gathered, target))
      c = gathered;
  }
  // round_lhs / round_rhs: an expert GEMM's slot-major operand gathered
  // from token rows and rounded along the slots (x of P3, dy of P4) is
  // gathered by the kernel's producer warpgroup and rounded by its
  // consumers in their registers (the lhs) or by the producer warpgroup
  // (the rhs), so that no operand kernel writes the rounded copy (T * K
  // rows) and no GEMM reads it back. The producer's registers for the
  // rhs rounding come from the consumers. The consumers' rounding is taken
  // where round-lhs / swap-rounded-rhs ask, and where each element would be
  // rounded at most roundReuse times (once per tile along the GEMM's
  // other dimension: the rounding's cost beside the MMAs grows with that
  // count, the operand kernel's does not; KernelChoices.def).
  if (auto expert = dyn_cast<ExpertMatmulOp>(op);
      expert && path == MXMmaPath::Bf16Operands && c.persistent &&
      !c.pingpong) {
    MXGemmProblem problem = getMXGemmProblem(op, path);
    MXGemmConfig swap = c;
    swap.swapOperands = swap.roundLhs = true;
    swap.tmaStore = kDefaultStoreBuffers;
    powerOfTwoStages(swap);
    // (The lhs is rounded once per N tile; the transposed product's lhs,
    // the rhs, once per N tile of that product, which are the M rows.)
    bool roundLhs = choices.roundLhs ||
                    atMostRoundings(problem.n, c.tileN, choices.roundReuse);
    bool swapRoundedRhs =
        choices.swapRoundedRhs ||
        atMostRoundings(problem.m, swap.tileN, choices.roundReuse);
    MXGemmConfig rounded = c;
    rounded.roundLhs =
        roundLhs && c.lhsMMajor && !c.lhsCodes && problem.roundLhs;
    bool rhsRoundable = c.rhsNMajor && !c.rhsCodes && problem.roundRhs;
    rounded.roundRhs = choices.roundRhs && rhsRoundable;
    // swap_operands (swap-rounded-rhs): a rhs to round beside a lhs that
    // is not is rounded as the lhs of the transposed product instead, in
    // the consumers' registers, the result tiles stored transposed by TMA;
    // where that does not fit, by the producer only with round-rhs.
    if (swapRoundedRhs && choices.tmaStore && rhsRoundable &&
        !rounded.roundLhs &&
        fitsMXGemm(getMXGemmProblem(op, path, /*swapOperands=*/true), swap,
                   target)) {
      c = swap;
    } else if (rounded.roundLhs || rounded.roundRhs) {
      powerOfTwoStages(rounded);
      // (round_lhs alone: the table's producer registers. With 48 or 56
      // the copies spilled, and with 64 beside 216 consumer registers
      // ptxas serialized the register-A wgmmas (C7512); 40 and 232 do
      // neither, ptxas -v.)
      if (rounded.roundRhs)
        raiseProducerRegisters(rounded, kRoundProducerRegisters, problem,
                               target);
      if (fitsMXGemm(problem, rounded, target))
        c = rounded;
    }
  }
  // swap_operands of a block GEMM (swap-weights): the raw bf16 weight of
  // each tile's expert rounded along K by the consumers, in their A
  // registers, as P3's round_lhs rounds x, so that no operand kernel
  // writes the weight's rounding (the gate/up weight's two and the down
  // weight's took 3.2 ms at shape 1, docs/sm90a-kernels.md); the slot
  // rows of two blocks of the expert its 256-column rhs (a tile's rounded
  // weight serves 256 slots), read as an operand kernel rounded them, or
  // copied from the token rows by the producer warpgroup with swap-gather
  // and lhs-gather (rhs_gather, measured slower: KernelChoices.def).
  // Persistent: the tiles are the experts' pairs of blocks, counted by
  // every CTA. The weight read as stored: M-major for the
  // recompute's [E, H, 2I], K-major for P1's and P2's. Taken where
  // swap-weights asks, and where each weight element would be rounded at
  // most weightReuse times: once per tile of two blocks of its expert, an
  // expert's slots estimated as the routing layout's data blocks (all but
  // the E - 1 spare ones) over the experts, plus one block for its last,
  // partial one (KernelChoices.def).
  auto fewWeightRoundings = [&](BlockMatmulOp block) {
    MXGemmProblem problem = getMXGemmProblem(block, path);
    int64_t experts = problem.numExperts;
    int64_t dataBlocks =
        std::max<int64_t>(problem.numBlocks - (experts - 1), 1);
    int64_t slots = problem.blockSize * (dataBlocks + experts);
    int64_t perExpert = (slots + experts - 1) / experts;
    return atMostRoundings(perExpert, 2 * problem.blockSize,
                           choices.weightReuse);
  };
  if (auto block = dyn_cast<BlockMatmulOp>(op);
      block && choices.tmaStore && choices.persistentGemms &&
      path == MXMmaPath::Bf16Operands && !activation &&
      weightRoundedQuantize(block) &&
      (choices.swapWeights || fewWeightRoundings(block))) {
    MXGemmConfig swap = target.getBf16OperandsTable().front().config;
    swap.persistent = true;
    swap.swapOperands = swap.roundLhs = true;
    swap.lhsMMajor = block.getTransposeRhs();
    swap.rhsGather =
        choices.swapGather && choices.lhsGather && gatheredLhsQuantize(block);
    swap.tmaStore = kDefaultStoreBuffers;
    powerOfTwoStages(swap);
    MXGemmProblem problem = getMXGemmProblem(op, path, /*swapOperands=*/true);
    if (swap.rhsGather)
      raiseProducerRegisters(swap, kRhsGatherProducerRegisters, problem,
                             target);
    if (fitsMXGemm(problem, swap, target))
      c = swap;
  }
  // tma_store: the f32 result tile staged through shared memory and stored
  // by TMA, not st.global from the accumulators (a warp's st.global.v2
  // touches 8 rows of 32 bytes). Without their stores the GEMMs took 15.8
  // ms at shape 1 against 19.0; the TMA stores take back 0.7 of those 3.2
  // ms, and 0.14 ms at shape 2 (ncu, H200,
  // docs/results/2026-12-04-tma-store.md). Not P1's activation epilogue,
  // the ping-pong kernel or a cluster pair.
  if (choices.tmaStore && path == MXMmaPath::Bf16Operands && !activation &&
      !c.pingpong && c.clusterN == 1) {
    MXGemmProblem problem = getMXGemmProblem(op, path, c.swapOperands);
    MXGemmConfig staged = c;
    staged.tmaStore = kDefaultStoreBuffers;
    if (fitsMXGemm(problem, staged, target))
      c = staged;
  }
  // A dense product (one group) of more tiles than SMs: the tiles in bands
  // of M tiles, so that a wave's tiles reuse their A and B panels in L2.
  if (path == MXMmaPath::Bf16Operands && c.clusterN == 1 &&
      target.getDenseRasterM() > 1) {
    MXGemmProblem problem = getMXGemmProblem(op, path, c.swapOperands);
    if (problem.kind == MXGemmKind::Block && !problem.pairsBlocks() &&
        problem.numExperts == 1 &&
        numTiles(problem, c) > target.getMultiprocessors()) {
      c.rasterM = target.getDenseRasterM();
      if (!fitsMXGemm(problem, c, target))
        c.rasterM = 1;
    }
  }
  // k-turns: the two consumer warpgroups of a tile that round their lhs
  // take turns at the tensor cores each K tile.
  c.kTurns = choices.kTurns && c.roundLhs && c.consumerWarpgroups == 2 &&
             !c.pingpong;
  return GemmConfigAttr::get(
      op->getContext(), path, {c.tileM, c.tileN, c.tileK},
      {c.mmaM, c.mmaN, c.mmaK}, c.stages, c.dequantStages,
      {c.producerWarpgroups, c.consumerWarpgroups},
      {c.producerRegisters, c.consumerRegisters}, c.rhsNMajor, c.lhsMMajor,
      c.persistent, c.ctasPerSM, c.pingpong, c.clusterN, c.rasterM,
      c.evictFirstOutputs, c.rhsCodes, c.lhsCodes, c.lhsGather, c.roundLhs,
      c.roundRhs, c.swapOperands, c.rhsGather, c.tmaStore, c.storeColumns,
      c.kTurns);
}

std::string moe::noKernelMessage(const TargetInfo &target) {
  return ("has bf16 operands or a bias, and " + target.getChip() +
          " has GEMM kernels only for MX codes without bias (the " +
          stringifyMmaPathOption(target.getMXMmaPath()) + " MMA path)")
      .str();
}

MXGemmConfig moe::getMXGemmConfig(GemmConfigAttr config,
                                  const TargetInfo &target) {
  // The scale-table padding and the wait hint are the chip's, not choices.
  MXGemmConfig c = target.getMXGemmConfig(config.getMma());
  c.tileM = config.getTile()[0];
  c.tileN = config.getTile()[1];
  c.tileK = config.getTile()[2];
  c.mmaM = config.getMmaShape()[0];
  c.mmaN = config.getMmaShape()[1];
  c.mmaK = config.getMmaShape()[2];
  c.stages = config.getStages();
  c.dequantStages = config.getDequantStages();
  c.producerWarpgroups = config.getWarpgroups()[0];
  c.consumerWarpgroups = config.getWarpgroups()[1];
  c.producerRegisters = config.getRegisters()[0];
  c.consumerRegisters = config.getRegisters()[1];
  c.rhsNMajor = config.getRhsNMajor();
  c.lhsMMajor = config.getLhsMMajor();
  c.persistent = config.getPersistent();
  c.ctasPerSM = config.getCtasPerSm();
  c.pingpong = config.getPingpong();
  c.clusterN = config.getClusterN();
  c.rasterM = config.getRasterM();
  c.evictFirstOutputs = config.getEvictFirstOutputs();
  c.rhsCodes = config.getRhsCodes();
  c.lhsCodes = config.getLhsCodes();
  c.lhsGather = config.getLhsGather();
  c.roundLhs = config.getRoundLhs();
  c.roundRhs = config.getRoundRhs();
  c.swapOperands = config.getSwapOperands();
  c.rhsGather = config.getRhsGather();
  c.tmaStore = config.getTmaStore();
  c.storeColumns = config.getStoreColumns();
  c.kTurns = config.getKTurns();
  return c;
}
