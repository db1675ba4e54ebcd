//===- LayerDesc.cpp - spellings of the JIT API's plain types -------------===//
//
// The text forms of the public types of MoeJIT.h: the layer description
// syntax shared by moe-run's --layer and API users, and the names of
// dtypes, targets and cache sources. Plain C++: nothing here needs MLIR.
//
//===----------------------------------------------------------------------===//
#include "moe/JIT/MoeJIT.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

using namespace moe::jit;

size_t moe::jit::byteSize(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F8E4M3FN:
  case DType::F8E5M2:
  case DType::F8E8M0FNU:
    return 1;
  }
  return 1;
}

const char *moe::jit::toString(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::F8E4M3FN:
    return "f8E4M3FN";
  case DType::F8E5M2:
    return "f8E5M2";
  case DType::F8E8M0FNU:
    return "f8E8M0FNU";
  }
  return "?";
}

std::string moe::jit::shapeToString(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

namespace {
/// Every target with its name and its chip ("" for the host): the one list
/// that toString, chipOf and parseTarget read.
struct TargetName {
  Target target;
  const char *name, *chip;
};
constexpr TargetName kTargets[] = {{Target::Host, "host", ""},
                                   {Target::Sm90a, "sm90a", "sm_90a"},
                                   {Target::Sm100a, "sm100a", "sm_100a"},
                                   {Target::Sm120a, "sm120a", "sm_120a"}};
} // namespace

const char *moe::jit::toString(Target target) {
  for (const TargetName &t : kTargets)
    if (t.target == target)
      return t.name;
  return "?";
}

const char *moe::jit::chipOf(Target target) {
  for (const TargetName &t : kTargets)
    if (t.target == target)
      return t.chip;
  return "";
}

Expected<Target> moe::jit::parseTarget(std::string_view name) {
  // The name, or the chip ("sm_90a" for "sm90a").
  std::string expected;
  for (const TargetName &t : kTargets) {
    if (name == t.name || (*t.chip && name == t.chip))
      return t.target;
    if (!expected.empty())
      expected += &t == &kTargets[std::size(kTargets) - 1] ? " or " : ", ";
    expected += t.name;
  }
  return Status::error("unknown target '" + std::string(name) +
                       "' (expected " + expected + ")");
}

const char *moe::jit::toString(CompileInfo::Source source) {
  switch (source) {
  case CompileInfo::Source::Compiled:
    return "compiled";
  case CompileInfo::Source::MemoryCache:
    return "memory cache";
  case CompileInfo::Source::DiskCache:
    return "disk cache";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Kernel choices
//===----------------------------------------------------------------------===//

Status moe::jit::setKernelChoices(CompileOptions &options,
                                  std::string_view text) {
  auto error = [](const std::string &message) {
    return Status::error("kernel choices: " + message);
  };
  // A decimal integer in [min, max] (no sign; at most 18 digits, so no
  // overflow before the range check).
  auto integer = [](std::string_view value, int64_t min,
                    int64_t max) -> std::optional<int64_t> {
    if (value.empty() || value.size() > 18 ||
        value.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    int64_t n = std::stoll(std::string(value));
    if (n < min || n > max)
      return std::nullopt;
    return n;
  };
  CompileOptions out = options;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find(',', pos), text.size());
    std::string pair(text.substr(pos, end - pos));
    pos = end + 1;
    size_t eq = pair.find('=');
    if (eq == std::string::npos)
      return error("'" + pair + "' is not OPTION=value");
    std::string name = pair.substr(0, eq), value = pair.substr(eq + 1);
    bool known = false;
#define MOE_KERNEL_CHOICE_BOOL(FIELD, OPTION, DEFAULT, PASSES, FLAG,           \
                               FLAG_SETS, DESC)                                \
  if (name == OPTION) {                                                        \
    known = true;                                                              \
    if (value != "true" && value != "false")                                   \
      return error("invalid value '" + value +                                 \
                   "' for " OPTION " (expected true or false)");               \
    out.FIELD = value == "true";                                               \
  }
#define MOE_KERNEL_CHOICE_INT(FIELD, OPTION, DEFAULT, PASSES, FLAG, MIN, MAX,  \
                              DESC)                                            \
  if (name == OPTION) {                                                        \
    known = true;                                                              \
    std::optional<int64_t> n = integer(value, MIN, MAX);                       \
    if (!n)                                                                    \
      return error("invalid value '" + value +                                 \
                   "' for " OPTION " (expected an integer in [" #MIN ", " #MAX \
                   "])");                                                      \
    out.FIELD = *n;                                                            \
  }
#include "moe/Pipelines/KernelChoices.def"
    if (!known) {
      std::string accepted;
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  accepted += accepted.empty() ? OPTION : ", " OPTION;
#include "moe/Pipelines/KernelChoices.def"
      return error("unknown option '" + name + "' (expected one of " +
                   accepted + ")");
    }
  }
  options = out;
  return Status();
}

std::string moe::jit::kernelChoicesToString(const CompileOptions &options) {
  std::string text;
  auto append = [&](const char *option, const std::string &value) {
    text += (text.empty() ? "" : ",") + std::string(option) + "=" + value;
  };
#define MOE_KERNEL_CHOICE_BOOL(FIELD, OPTION, DEFAULT, PASSES, FLAG,           \
                               FLAG_SETS, DESC)                                \
  append(OPTION, options.FIELD ? "true" : "false");
#define MOE_KERNEL_CHOICE_INT(FIELD, OPTION, DEFAULT, PASSES, FLAG, MIN, MAX,  \
                              DESC)                                            \
  append(OPTION, std::to_string(options.FIELD));
#include "moe/Pipelines/KernelChoices.def"
  return text;
}

//===----------------------------------------------------------------------===//
// Layer descriptions
//===----------------------------------------------------------------------===//

namespace {

/// Matches `value` against `names`; the error lists every accepted name.
template <typename Enum>
Expected<Enum>
choose(const std::string &key, const std::string &value,
       std::initializer_list<std::pair<const char *, Enum>> names) {
  std::string accepted;
  for (const auto &[name, choice] : names) {
    if (value == name)
      return choice;
    accepted += accepted.empty() ? name : std::string("|") + name;
  }
  return Status::error("layer: invalid value '" + value + "' for " + key +
                       " (expected " + accepted + ")");
}

/// A positive decimal integer no larger than 2^20 (bigger shapes are typos:
/// the references could not hold them).
Expected<int64_t> positive(const std::string &key, const std::string &value) {
  bool digits = !value.empty() &&
                value.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  long long parsed = digits ? std::strtoll(value.c_str(), nullptr, 10) : 0;
  if (!digits || errno != 0 || parsed < 1 || parsed > (1 << 20))
    return Status::error("layer: " + key + "=" + value +
                         " is not an integer in [1, 1048576]");
  return static_cast<int64_t>(parsed);
}

/// A finite number, the side of a clamp.
Expected<double> finite(const std::string &key, const std::string &value) {
  errno = 0;
  char *end = nullptr;
  double parsed = value.empty() ? 0.0 : std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(parsed) ||
      std::isspace(static_cast<unsigned char>(value[0])))
    return Status::error("layer: invalid number '" + value + "' in " + key);
  return parsed;
}

/// "LO:HI" (either side optional) or "none".
Status clampLimits(const std::string &key, const std::string &value,
                   std::optional<double> &lo, std::optional<double> &hi) {
  lo.reset();
  hi.reset();
  if (value == "none")
    return Status();
  size_t colon = value.find(':');
  if (colon == std::string::npos ||
      value.find(':', colon + 1) != std::string::npos)
    return Status::error("layer: invalid " + key + "=" + value +
                         " (expected LO:HI, e.g. -7:7 or :7, or none)");
  std::string loText = value.substr(0, colon), hiText = value.substr(colon + 1);
  if (!loText.empty()) {
    Expected<double> v = finite(key, loText);
    if (!v)
      return v.status();
    lo = *v;
  }
  if (!hiText.empty()) {
    Expected<double> v = finite(key, hiText);
    if (!v)
      return v.status();
    hi = *v;
  }
  if (lo && hi && !(*lo < *hi))
    return Status::error("layer: " + key + "=" + value + " needs LO < HI");
  return Status();
}

/// "off" or a storage type (on = bf16) for bias and checkpoint.
Status optionalStorage(const std::string &key, const std::string &value,
                       bool &enabled, DType &dtype) {
  Expected<int> choice =
      choose<int>(key, value, {{"off", 0}, {"on", 1}, {"bf16", 1}, {"f32", 2}});
  if (!choice)
    return choice.status();
  enabled = *choice != 0;
  dtype = *choice == 2 ? DType::F32 : DType::BF16;
  return Status();
}

std::string number(double value) {
  std::ostringstream os;
  os.precision(17);
  os << value;
  return os.str();
}

std::string clampText(const std::optional<double> &lo,
                      const std::optional<double> &hi) {
  if (!lo && !hi)
    return "none";
  return (lo ? number(*lo) : "") + ":" + (hi ? number(*hi) : "");
}

std::string storageText(bool enabled, DType dtype) {
  return enabled ? toString(dtype) : "off";
}

} // namespace

Expected<LayerDesc> moe::jit::parseLayerDesc(std::string_view spec) {
  LayerDesc layer;
  std::vector<std::string> seen;
  bool setE = false, setK = false;
  size_t pos = 0;
  std::string text(spec);
  if (text.empty())
    return Status::error("layer: empty description");
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos)
      comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    size_t eq = item.find('=');
    if (item.empty() || eq == std::string::npos || eq == 0)
      return Status::error("layer: expected key=value, got '" + item + "'");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    for (const std::string &previous : seen)
      if (previous == key)
        return Status::error("layer: key " + key + " given twice");
    seen.push_back(key);

    Status status;
    auto shape = [&](int64_t &field) {
      Expected<int64_t> v = positive(key, value);
      if (!v)
        return v.status();
      field = *v;
      return Status();
    };
    auto set = [&](auto &field, Expected<std::decay_t<decltype(field)>> v) {
      if (!v)
        return v.status();
      field = *v;
      return Status();
    };
    if (key == "T") {
      status = shape(layer.T);
    } else if (key == "H") {
      status = shape(layer.H);
    } else if (key == "I") {
      status = shape(layer.I);
    } else if (key == "E") {
      status = shape(layer.E);
      setE = true;
    } else if (key == "K") {
      status = shape(layer.K);
      setK = true;
    } else if (key == "B") {
      status = shape(layer.B);
    } else if (key == "act") {
      status =
          set(layer.act, choose<Activation>(key, value,
                                            {{"swiglu", Activation::SwiGLU},
                                             {"geglu", Activation::GeGLU}}));
    } else if (key == "affinity") {
      status =
          set(layer.affinity,
              choose<AffinityPlacement>(key, value,
                                        {{"on_i", AffinityPlacement::OnI},
                                         {"on_h", AffinityPlacement::OnH}}));
    } else if (key == "quant") {
      status = set(layer.quant, choose<Quant>(key, value,
                                              {{"e4m3", Quant::E4M3},
                                               {"e5m2", Quant::E5M2},
                                               {"none", Quant::None}}));
    } else if (key == "rule") {
      status = set(layer.rule,
                   choose<ScaleRule>(key, value,
                                     {{"rceil", ScaleRule::RCeil},
                                      {"floor", ScaleRule::Floor},
                                      {"floor_alt", ScaleRule::FloorAlt}}));
    } else if (key == "clamp_gate") {
      status = clampLimits(key, value, layer.gateLo, layer.gateHi);
    } else if (key == "clamp_up") {
      status = clampLimits(key, value, layer.upLo, layer.upHi);
    } else if (key == "bias") {
      status = optionalStorage(key, value, layer.bias, layer.biasDType);
    } else if (key == "checkpoint") {
      status =
          optionalStorage(key, value, layer.checkpoint, layer.checkpointDType);
    } else if (key == "dense") {
      status = set(layer.dense,
                   choose<bool>(key, value, {{"off", false}, {"on", true}}));
    } else if (key == "dx") {
      status = set(layer.dxF32,
                   choose<bool>(key, value, {{"bf16", false}, {"f32", true}}));
    } else if (key == "dx_accumulate") {
      status = set(layer.dxAccumulate,
                   choose<DxAccumulate>(key, value,
                                        {{"f32", DxAccumulate::F32},
                                         {"bf16", DxAccumulate::BF16}}));
    } else if (key == "weight_grads") {
      status = set(layer.weightGradBF16,
                   choose<bool>(key, value, {{"f32", false}, {"bf16", true}}));
    } else if (key == "weights") {
      status = set(layer.prequantizedWeights,
                   choose<bool>(key, value, {{"bf16", false}, {"mx", true}}));
    } else {
      status = Status::error(
          "layer: unknown key '" + key +
          "' (keys: T H I E K B act affinity quant rule clamp_gate clamp_up "
          "bias checkpoint dense dx dx_accumulate weight_grads weights)");
    }
    if (!status)
      return status;
  }
  if (layer.dense) {
    if ((setE && layer.E != 1) || (setK && layer.K != 1))
      return Status::error("layer: dense=on needs E=1 and K=1");
    layer.E = 1;
    layer.K = 1;
  }
  return layer;
}

std::string moe::jit::toString(const LayerDesc &layer) {
  static const char *acts[] = {"swiglu", "geglu"};
  static const char *affinities[] = {"on_i", "on_h"};
  static const char *quants[] = {"e4m3", "e5m2", "none"};
  static const char *rules[] = {"rceil", "floor", "floor_alt"};
  std::ostringstream os;
  os << "T=" << layer.T << ",H=" << layer.H << ",I=" << layer.I
     << ",E=" << layer.E << ",K=" << layer.K << ",B=" << layer.B
     << ",act=" << acts[static_cast<int>(layer.act)]
     << ",affinity=" << affinities[static_cast<int>(layer.affinity)]
     << ",quant=" << quants[static_cast<int>(layer.quant)]
     << ",rule=" << rules[static_cast<int>(layer.rule)]
     << ",clamp_gate=" << clampText(layer.gateLo, layer.gateHi)
     << ",clamp_up=" << clampText(layer.upLo, layer.upHi)
     << ",bias=" << storageText(layer.bias, layer.biasDType)
     << ",checkpoint=" << storageText(layer.checkpoint, layer.checkpointDType)
     << ",dense=" << (layer.dense ? "on" : "off")
     << ",dx=" << (layer.dxF32 ? "f32" : "bf16") << ",dx_accumulate="
     << (layer.dxAccumulate == DxAccumulate::F32 ? "f32" : "bf16")
     << ",weight_grads=" << (layer.weightGradBF16 ? "bf16" : "f32")
     << ",weights=" << (layer.prequantizedWeights ? "mx" : "bf16");
  return os.str();
}
