//===- LayerBuilder.cpp - layer descriptions <-> moe.blockwise_bwd --------===//
//
// The one place that maps a LayerDesc to IR and back, so that a layer given
// on moe-run's command line and a layer read from a .mlir file are the same
// thing to every consumer:
//
//   LayerDesc --buildLayerModule--> func @f(x, dy, ...) { moe.blockwise_bwd }
//   moe.blockwise_bwd --describeLayer--> LayerDesc
//
//===----------------------------------------------------------------------===//
#include "LayerBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace moe::jit {

namespace {

/// Storage element type of a DType.
Type elementType(MLIRContext &ctx, DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return BFloat16Type::get(&ctx);
  case DType::F32:
    return Float32Type::get(&ctx);
  case DType::I32:
    return IntegerType::get(&ctx, 32);
  case DType::F8E4M3FN:
    return Float8E4M3FNType::get(&ctx);
  case DType::F8E5M2:
    return Float8E5M2Type::get(&ctx);
  case DType::F8E8M0FNU:
    return Float8E8M0FNUType::get(&ctx);
  }
  return Float32Type::get(&ctx);
}

mlir::moe::MXElement mxElement(Quant quant) {
  switch (quant) {
  case Quant::E4M3:
    return mlir::moe::MXElement::f8E4M3FN;
  case Quant::E5M2:
    return mlir::moe::MXElement::f8E5M2;
  case Quant::None:
    return mlir::moe::MXElement::none;
  }
  return mlir::moe::MXElement::none;
}

mlir::moe::ScaleRule scaleRule(ScaleRule rule) {
  switch (rule) {
  case ScaleRule::RCeil:
    return mlir::moe::ScaleRule::rceil;
  case ScaleRule::Floor:
    return mlir::moe::ScaleRule::floor;
  case ScaleRule::FloorAlt:
    return mlir::moe::ScaleRule::floor_alt;
  }
  return mlir::moe::ScaleRule::rceil;
}

FloatAttr limit(MLIRContext &ctx, const std::optional<double> &value) {
  return value ? FloatAttr::get(Float64Type::get(&ctx), *value) : FloatAttr();
}

std::optional<double> limit(FloatAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getValueAsDouble();
}

Type elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

} // namespace

OwningOpRef<ModuleOp> buildLayerModule(MLIRContext &ctx, const LayerDesc &layer,
                                       StringRef function) {
  Location loc = NameLoc::get(StringAttr::get(&ctx, "layer"));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(&ctx);
  b.setInsertionPointToEnd(module->getBody());

  int64_t T = layer.T, H = layer.H, I = layer.I, E = layer.E, B = layer.B;
  int64_t N = layer.numBlocks();
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  Type weightType = bf16;
  if (layer.prequantizedWeights)
    weightType = elementType(ctx, layer.quant == Quant::E5M2 ? DType::F8E5M2
                                                             : DType::F8E4M3FN);
  Type scaleType = Float8E8M0FNUType::get(&ctx);
  auto tensor = [](ArrayRef<int64_t> shape, Type type) -> Type {
    return RankedTensorType::get(shape, type);
  };

  // Operands in ODS order; the optional ones only when present.
  SmallVector<Type> argTypes = {tensor({T, H}, bf16), tensor({T, H}, bf16),
                                tensor({T * E}, f32),
                                tensor({E, H, 2, I}, weightType)};
  if (layer.prequantizedWeights)
    argTypes.push_back(tensor({E, H, 2, I / 32}, scaleType));
  argTypes.push_back(tensor({E, I, H}, weightType));
  if (layer.prequantizedWeights)
    argTypes.push_back(tensor({E, I, H / 32}, scaleType));
  argTypes.push_back(tensor({N * B}, i32));
  argTypes.push_back(tensor({N}, i32));
  if (layer.checkpoint)
    argTypes.push_back(
        tensor({N, 2, I, B}, elementType(ctx, layer.checkpointDType)));
  if (layer.bias) {
    Type biasType = elementType(ctx, layer.biasDType);
    argTypes.push_back(tensor({E, 2, I}, biasType));
    argTypes.push_back(tensor({E, H}, biasType));
  }

  Type weightGrad = layer.weightGradBF16 ? bf16 : f32;
  SmallVector<Type> resultTypes = {
      tensor({T, H}, layer.dxF32 ? f32 : bf16), tensor({T * E}, f32),
      tensor({E, H, 2, I}, weightGrad), tensor({E, I, H}, weightGrad)};
  if (layer.bias) {
    resultTypes.push_back(tensor({E, 2, I}, f32));
    resultTypes.push_back(tensor({E, H}, f32));
  }

  auto func = func::FuncOp::create(b, loc, function,
                                   b.getFunctionType(argTypes, resultTypes));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto args = body->getArguments();
  unsigned next = 0;
  auto take = [&](bool present) -> Value {
    return present ? args[next++] : Value();
  };
  Value x = take(true), dy = take(true), aff = take(true), wgu = take(true);
  Value wguScales = take(layer.prequantizedWeights);
  Value wd = take(true);
  Value wdScales = take(layer.prequantizedWeights);
  Value tok = take(true), blk = take(true);
  Value ckpt = take(layer.checkpoint);
  Value bgu = take(layer.bias), bd = take(layer.bias);

  mlir::moe::ClampAttr clamp;
  if (layer.gateLo || layer.gateHi || layer.upLo || layer.upHi)
    clamp = mlir::moe::ClampAttr::get(
        &ctx, limit(ctx, layer.gateLo), limit(ctx, layer.gateHi),
        limit(ctx, layer.upLo), limit(ctx, layer.upHi));
  // The per-result builder fills the result segment sizes (the bias
  // gradients are present or absent together).
  Type noType;
  auto op = mlir::moe::BlockwiseBwdOp::create(
      b, loc, resultTypes[0], resultTypes[1], resultTypes[2], resultTypes[3],
      layer.bias ? resultTypes[4] : noType,
      layer.bias ? resultTypes[5] : noType, x, dy, aff, wgu, wguScales, wd,
      wdScales, tok, blk, ckpt, bgu, bd, b.getI64IntegerAttr(B),
      b.getI64IntegerAttr(layer.K),
      mlir::moe::ActivationAttr::get(&ctx, layer.act == Activation::SwiGLU
                                               ? mlir::moe::Activation::swiglu
                                               : mlir::moe::Activation::geglu),
      mlir::moe::AffinityAttr::get(&ctx,
                                   layer.affinity == AffinityPlacement::OnI
                                       ? mlir::moe::Affinity::on_i
                                       : mlir::moe::Affinity::on_h),
      mlir::moe::MXQuantAttr::get(&ctx, mxElement(layer.quant), 32,
                                  scaleRule(layer.rule)),
      clamp, layer.bias ? b.getUnitAttr() : UnitAttr(),
      mlir::moe::DxAccumulateAttr::get(&ctx,
                                       layer.dxAccumulate == DxAccumulate::F32
                                           ? mlir::moe::DxAccumulate::f32
                                           : mlir::moe::DxAccumulate::bf16),
      layer.dense ? b.getUnitAttr() : UnitAttr());
  func::ReturnOp::create(b, loc, op->getResults());
  return module;
}

Expected<LayerDesc> describeLayer(mlir::moe::BlockwiseBwdOp op) {
  LayerDesc layer;
  layer.T = op.getNumTokens();
  layer.H = op.getHiddenSize();
  layer.I = op.getIntermediateSize();
  layer.E = op.getNumExperts();
  layer.K = op.getTopK();
  layer.B = op.getBlockSize();
  layer.act = op.getActivation() == mlir::moe::Activation::swiglu
                  ? Activation::SwiGLU
                  : Activation::GeGLU;
  layer.affinity = op.getAffinity() == mlir::moe::Affinity::on_i
                       ? AffinityPlacement::OnI
                       : AffinityPlacement::OnH;
  mlir::moe::MXQuantAttr quant = op.getQuant();
  if (quant.getBlockSize() != 32)
    return Status::error("MX block size " +
                         std::to_string(quant.getBlockSize()) +
                         " is not 32, the only size a layer description has");
  switch (quant.getElement()) {
  case mlir::moe::MXElement::f8E4M3FN:
    layer.quant = Quant::E4M3;
    break;
  case mlir::moe::MXElement::f8E5M2:
    layer.quant = Quant::E5M2;
    break;
  case mlir::moe::MXElement::none:
    layer.quant = Quant::None;
    break;
  }
  switch (quant.getRule()) {
  case mlir::moe::ScaleRule::rceil:
    layer.rule = ScaleRule::RCeil;
    break;
  case mlir::moe::ScaleRule::floor:
    layer.rule = ScaleRule::Floor;
    break;
  case mlir::moe::ScaleRule::floor_alt:
    layer.rule = ScaleRule::FloorAlt;
    break;
  }
  if (mlir::moe::ClampAttr clamp = op.getClampAttr()) {
    layer.gateLo = limit(clamp.getGateLo());
    layer.gateHi = limit(clamp.getGateHi());
    layer.upLo = limit(clamp.getUpLo());
    layer.upHi = limit(clamp.getUpHi());
  }
  layer.bias = op.getBias();
  if (layer.bias) {
    Type bgu = elementTypeOf(op.getGateUpBias());
    if (bgu != elementTypeOf(op.getDownBias()))
      return Status::error("gate_up_bias and down_bias have different element "
                           "types; a layer description has one bias type");
    layer.biasDType = bgu.isF32() ? DType::F32 : DType::BF16;
  }
  if (Value ckpt = op.getGateUpCheckpoint()) {
    layer.checkpoint = true;
    layer.checkpointDType =
        elementTypeOf(ckpt).isF32() ? DType::F32 : DType::BF16;
  }
  layer.dense = op.getSingleExpertDense();
  layer.dxAccumulate = op.getDxAccumulate() == mlir::moe::DxAccumulate::f32
                           ? DxAccumulate::F32
                           : DxAccumulate::BF16;
  layer.dxF32 = elementTypeOf(op.getHiddenStatesGrad()).isF32();
  Type dwgu = elementTypeOf(op.getGateUpWeightGrad());
  if (dwgu != elementTypeOf(op.getDownWeightGrad()))
    return Status::error("gate_up_weight_grad and down_weight_grad have "
                         "different element types; a layer description has "
                         "one weight-gradient type");
  layer.weightGradBF16 = dwgu.isBF16();
  bool wguFP8 = !elementTypeOf(op.getGateUpWeight()).isBF16();
  if (wguFP8 != !elementTypeOf(op.getDownWeight()).isBF16())
    return Status::error("one weight is pre-quantized and the other bf16; a "
                         "layer description has both of one kind");
  layer.prequantizedWeights = wguFP8;
  return layer;
}

std::string operandName(mlir::moe::BlockwiseBwdOp op, Value value) {
  const std::pair<Value, const char *> names[] = {
      {op.getHiddenStates(), "x"},
      {op.getOutputGrad(), "dy"},
      {op.getExpertAffinitiesMasked(), "affinities"},
      {op.getGateUpWeight(), "wgu"},
      {op.getGateUpScales(), "wgu_scales"},
      {op.getDownWeight(), "wd"},
      {op.getDownScales(), "wd_scales"},
      {op.getTokenPositionToId(), "token_position_to_id"},
      {op.getBlockToExpert(), "block_to_expert"},
      {op.getGateUpCheckpoint(), "checkpoint"},
      {op.getGateUpBias(), "bgu"},
      {op.getDownBias(), "bd"},
  };
  for (const auto &[operand, name] : names)
    if (operand && operand == value)
      return name;
  return "";
}

std::string resultName(mlir::moe::BlockwiseBwdOp op, Value value) {
  const std::pair<Value, const char *> names[] = {
      {op.getHiddenStatesGrad(), "dx"},   {op.getAffinitiesGrad(), "da"},
      {op.getGateUpWeightGrad(), "dwgu"}, {op.getDownWeightGrad(), "dwd"},
      {op.getGateUpBiasGrad(), "dbgu"},   {op.getDownBiasGrad(), "dbd"},
  };
  for (const auto &[result, name] : names)
    if (result && result == value)
      return name;
  return "";
}

} // namespace moe::jit
