//===- moe-ref.cpp - command-line front end of the reference model --------===//
//
// Runs the reference model (lib/Reference) from the shell and exchanges its
// tensors as .npy files, so that outside tools (the Python cross-check,
// users' own scripts) can feed it inputs and read its results:
//   run         generate seeded inputs, run R_64 and R_mx, print a summary
//   gen         write seeded inputs and config.json to a directory
//   bwd         read such a directory, write one reference's gradients
//   quantize    MX-quantize a 2-D array (codes, scales, dequantized values)
//   route       top-k indices and scores -> the blocked routing layout
//   router-bwd  router forward (top-k, scores) and backward (dlogits)
// Argument parsing is hand-written and strict. A usage error (unknown
// option, missing or malformed value, bad combination) prints
// `moe-ref: error: ...` and exits 2; a file or data error names the file
// and exits 1.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/MX.h"
#include "moe/Reference/Model.h"
#include "moe/Reference/Npy.h"
#include "moe/Reference/Router.h"
#include "moe/Reference/Routing.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace moe::ref;

namespace {

/// A bad command line: reported with exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A file that cannot be read or written, or data that the reference
/// rejects: reported with exit status 1.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr const char *kHelp = R"(usage: moe-ref <command> [options]

Reference model of the MoE blockwise backward (R_64: fp64; R_mx: MXFP8
emulation). Tensors are exchanged as .npy files (little-endian, C order).

commands:
  run        [layer] [--seed S] [--empty-experts N]
             generate inputs, run R_64 and R_mx, print per-output norms,
             R_mx-vs-R_64 distance, NaN counts and timings
  gen        [layer] [--seed S] [--empty-experts N] --out DIR
             write every input (.npy, f64 / i32) and DIR/config.json
  bwd        --in DIR --out DIR --ref r64|rmx
             read config.json and the inputs in DIR, write dx, da, dwgu,
             dwd (and dbgu, dbd) as f64 .npy
  quantize   --in X.npy --axis 0|1 --codes Q.npy --scales S.npy
             [--elem e4m3|e5m2] [--rule rceil|floor|floor_alt]
             [--dequant D.npy]
             MX-quantize a 2-D f32 array (f64 accepted when every value is
             an f32 value); writes u8 codes, u8 scales, f32 dequantized
  route      --topk-idx I.npy --topk-scores S.npy --experts E
             --block-size B --out DIR
             write token_position_to_id, block_to_expert, affinities
  router-bwd --logits L.npy --topk K
             --mode topk_softmax|softmax_topk|softmax_topk_renorm
             [--dscores D.npy] --out DIR
             write topk_idx, topk_scores and (with --dscores) dlogits

layer options (default: T=256 H=256 I=128 E=4 K=2 B=128, e4m3, rceil,
swiglu, on_i):
  --T N --H N --I N --E N --K N --B N   shapes (H, I, B multiples of 32)
  --act swiglu|geglu                    gated activation
  --affinity on_i|on_h                  where the affinity multiplies
  --quant e4m3|e5m2|none                MX element type, none = bf16
  --rule rceil|floor|floor_alt          E8M0 scale rule
  --clamp-gate LO:HI, --clamp-up LO:HI  clamps (either side may be empty)
  --bias                                gate/up and down biases
  --checkpoint                          use the gate/up checkpoint
  --dense                               one expert, identity routing
                                        (implies E=1 K=1)
  --dx-f32                              dx in fp32 (default bf16)
  --weight-grad-bf16                    dWgu, dWd rounded to bf16
  --dx-accumulate f32|bf16              how a token's K experts are summed

Options take their value as the next argument or after '='.
Exit status: 0 success, 1 file or data error, 2 usage error.
)";

//===----------------------------------------------------------------------===//
// Value parsing
//===----------------------------------------------------------------------===//

/// Parses a decimal integer in [min, max] given to option `opt`.
int64_t parseInt(const std::string &opt, const std::string &text, int64_t min,
                 int64_t max) {
  if (text.empty() ||
      text.find_first_not_of("0123456789-") != std::string::npos)
    throw UsageError("invalid integer '" + text + "' for " + opt);
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0')
    throw UsageError("invalid integer '" + text + "' for " + opt);
  if (errno != 0 || value < min || value > max)
    throw UsageError("value '" + text + "' for " + opt + " must be in [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]");
  return value;
}

/// Parses a seed: any unsigned 64-bit decimal.
uint64_t parseSeed(const std::string &opt, const std::string &text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("invalid seed '" + text + "' for " + opt +
                     " (expected a non-negative integer)");
  errno = 0;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    throw UsageError("seed '" + text + "' for " + opt + " is out of range");
  return value;
}

/// Parses a finite floating-point number (no inf, nan or blanks).
double parseFinite(const std::string &opt, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(value) ||
      std::isspace(static_cast<unsigned char>(text[0])))
    throw UsageError("invalid number '" + text + "' for " + opt);
  return value;
}

/// "LO:HI" with either side optional.
void parseClamp(const std::string &opt, const std::string &text,
                std::optional<double> &lo, std::optional<double> &hi) {
  size_t colon = text.find(':');
  if (colon == std::string::npos ||
      text.find(':', colon + 1) != std::string::npos)
    throw UsageError("invalid clamp '" + text + "' for " + opt +
                     " (expected LO:HI, e.g. -7:7 or :7.0)");
  std::string loText = text.substr(0, colon), hiText = text.substr(colon + 1);
  lo.reset();
  hi.reset();
  if (!loText.empty())
    lo = parseFinite(opt, loText);
  if (!hiText.empty())
    hi = parseFinite(opt, hiText);
  if (lo && hi && !(*lo < *hi))
    throw UsageError("clamp '" + text + "' for " + opt + " needs LO < HI");
}

/// Maps `text` to the value of the matching name in `choices`; the error
/// lists every accepted name.
template <typename Enum>
Enum parseChoice(const std::string &opt, const std::string &text,
                 const std::vector<std::pair<const char *, Enum>> &choices) {
  std::string names;
  for (const auto &[name, value] : choices) {
    if (text == name)
      return value;
    names += names.empty() ? name : std::string("|") + name;
  }
  throw UsageError("invalid value '" + text + "' for " + opt + " (expected " +
                   names + ")");
}

//===----------------------------------------------------------------------===//
// Command-line options
//===----------------------------------------------------------------------===//

/// One option of a command: a flag, or an option taking one value.
struct Option {
  std::string name;
  bool takesValue;
  std::function<void(const std::string &)> apply;
};

/// Applies `args` to `options`. Every option may appear at most once.
void parseOptions(const std::string &command,
                  const std::vector<std::string> &args,
                  const std::vector<Option> &options) {
  std::map<std::string, bool> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0)
      throw UsageError("unexpected argument '" + arg + "' for " + command);
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const Option *option = nullptr;
    for (const Option &candidate : options)
      if (candidate.name == name)
        option = &candidate;
    if (!option)
      throw UsageError("unknown option '" + name + "' for " + command +
                       " (see moe-ref --help)");
    if (seen[name])
      throw UsageError("option " + name + " given twice");
    seen[name] = true;
    if (!option->takesValue) {
      if (eq != std::string::npos)
        throw UsageError("option " + name + " takes no value");
      option->apply("");
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= args.size() || args[i + 1].compare(0, 2, "--") == 0)
        throw UsageError("missing value for " + name);
      value = args[++i];
    }
    option->apply(value);
  }
}

/// Throws unless `value` was set.
void require(const std::string &value, const char *option,
             const std::string &command) {
  if (value.empty())
    throw UsageError(command + " needs " + option);
}

/// The layer options shared by run and gen.
struct LayerArgs {
  LayerConfig cfg;
  uint64_t seed = 0;
  int64_t emptyExperts = 0;
  bool setE = false, setK = false;

  LayerArgs() {
    cfg.T = 256;
    cfg.H = 256;
    cfg.I = 128;
    cfg.E = 4;
    cfg.K = 2;
    cfg.B = 128;
  }

  /// Adds the layer options, --seed and --empty-experts to `options`.
  void addOptions(std::vector<Option> &options) {
    // Shapes are capped so that no tensor exceeds a few GiB in fp64; a
    // bigger request is a typo, not a job for a reference model.
    auto shape = [&](const char *name, int64_t &field, bool *set) {
      options.push_back({name, true, [name, &field, set](const std::string &v) {
                           field = parseInt(name, v, 1, 1 << 20);
                           if (set)
                             *set = true;
                         }});
    };
    shape("--T", cfg.T, nullptr);
    shape("--H", cfg.H, nullptr);
    shape("--I", cfg.I, nullptr);
    shape("--E", cfg.E, &setE);
    shape("--K", cfg.K, &setK);
    shape("--B", cfg.B, nullptr);
    options.push_back(
        {"--act", true, [this](const std::string &v) {
           cfg.act = parseChoice<Activation>(
               "--act", v,
               {{"swiglu", Activation::SwiGLU}, {"geglu", Activation::GeGLU}});
         }});
    options.push_back({"--affinity", true, [this](const std::string &v) {
                         cfg.affinity = parseChoice<AffinityPlacement>(
                             "--affinity", v,
                             {{"on_i", AffinityPlacement::OnI},
                              {"on_h", AffinityPlacement::OnH}});
                       }});
    options.push_back({"--quant", true, [this](const std::string &v) {
                         // 0, 1: an MX element type; 2: bf16 operands.
                         int choice = parseChoice<int>(
                             "--quant", v,
                             {{"e4m3", 0}, {"e5m2", 1}, {"none", 2}});
                         cfg.quant.enabled = choice != 2;
                         if (choice == 1)
                           cfg.quant.elem = MXElem::E5M2;
                       }});
    options.push_back({"--rule", true, [this](const std::string &v) {
                         cfg.quant.rule = parseRule("--rule", v);
                       }});
    options.push_back({"--clamp-gate", true, [this](const std::string &v) {
                         parseClamp("--clamp-gate", v, cfg.clamp.gateLo,
                                    cfg.clamp.gateHi);
                       }});
    options.push_back({"--clamp-up", true, [this](const std::string &v) {
                         parseClamp("--clamp-up", v, cfg.clamp.upLo,
                                    cfg.clamp.upHi);
                       }});
    options.push_back(
        {"--bias", false, [this](const std::string &) { cfg.bias = true; }});
    options.push_back({"--checkpoint", false,
                       [this](const std::string &) { cfg.checkpoint = true; }});
    options.push_back(
        {"--dense", false, [this](const std::string &) { cfg.dense = true; }});
    options.push_back(
        {"--dx-f32", false, [this](const std::string &) { cfg.dxF32 = true; }});
    options.push_back(
        {"--weight-grad-bf16", false,
         [this](const std::string &) { cfg.weightGradBF16 = true; }});
    options.push_back(
        {"--dx-accumulate", true, [this](const std::string &v) {
           cfg.dxAccumulate = parseChoice<DxAccumulate>(
               "--dx-accumulate", v,
               {{"f32", DxAccumulate::F32}, {"bf16", DxAccumulate::BF16}});
         }});
    options.push_back({"--seed", true, [this](const std::string &v) {
                         seed = parseSeed("--seed", v);
                       }});
    options.push_back({"--empty-experts", true, [this](const std::string &v) {
                         emptyExperts =
                             parseInt("--empty-experts", v, 0, 1 << 20);
                       }});
  }

  static ScaleRule parseRule(const char *opt, const std::string &v) {
    return parseChoice<ScaleRule>(opt, v,
                                  {{"rceil", ScaleRule::RCeil},
                                   {"floor", ScaleRule::Floor},
                                   {"floor_alt", ScaleRule::FloorAlt}});
  }

  /// Resolves --dense and checks what makeInputs relies on, so that a bad
  /// combination is a usage error rather than a failure deep inside.
  void finish() {
    if (cfg.dense) {
      if ((setE && cfg.E != 1) || (setK && cfg.K != 1))
        throw UsageError("--dense needs E=1 and K=1");
      cfg.E = 1;
      cfg.K = 1;
    }
    // MX blocks of 32 run along H, 2I and the slots of a block.
    for (auto [name, value] : {std::pair<const char *, int64_t>{"--H", cfg.H},
                               {"--I", cfg.I},
                               {"--B", cfg.B}})
      if (value % kMXBlock != 0)
        throw UsageError(std::string(name) + " " + std::to_string(value) +
                         " is not a multiple of 32");
    if (cfg.K > cfg.E)
      throw UsageError("K=" + std::to_string(cfg.K) +
                       " exceeds E=" + std::to_string(cfg.E));
    if (emptyExperts > 0 && cfg.dense)
      throw UsageError("--empty-experts does not apply to --dense");
    if (cfg.K > cfg.E - emptyExperts)
      throw UsageError("--empty-experts " + std::to_string(emptyExperts) +
                       " leaves fewer than K=" + std::to_string(cfg.K) +
                       " experts to route to");
    // The largest tensors: Wgu [E,H,2,I] and the checkpoint [N,2,I,B].
    const double limit = double(1 << 28);
    if (double(cfg.E) * cfg.H * 2 * cfg.I > limit ||
        double(cfg.T) * cfg.H > limit || double(cfg.T) * cfg.E > limit ||
        (double(cfg.T) * cfg.K + cfg.E * cfg.B) * 2 * cfg.I > limit)
      throw UsageError("layer too large for the reference (a tensor would "
                       "exceed 2^28 elements)");
  }
};

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// DIR/NAME.
std::string joinPath(const std::string &dir, const std::string &name) {
  return (std::filesystem::path(dir) / name).string();
}

/// Creates `dir` and its parents unless they exist.
void makeDir(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw DataError(dir + ": cannot create directory" +
                    (ec ? " (" + ec.message() + ")" : std::string()));
}

/// "[2, 3]" for messages and the run summary.
std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// Reads a .npy file or throws a DataError naming it.
NpyArray readArray(const std::string &path) {
  NpyArray array;
  std::string error;
  if (!readNpy(path, array, error))
    throw DataError(error);
  return array;
}

/// Throws unless `array` has exactly the shape `want`.
void checkShape(const std::string &path, const NpyArray &array,
                const std::vector<int64_t> &want) {
  if (array.shape != want)
    throw DataError(path + ": shape " + shapeText(array.shape) +
                    " does not match the expected " + shapeText(want));
}

/// A float array (f64, f32 or bf16) of the given shape, as fp64.
std::vector<double> readFloats(const std::string &path,
                               const std::vector<int64_t> &shape) {
  NpyArray array = readArray(path);
  if (array.type != NpyType::F64 && array.type != NpyType::F32 &&
      array.type != NpyType::BF16)
    throw DataError(path + ": expected a float array (f64, f32 or bf16)");
  if (!shape.empty())
    checkShape(path, array, shape);
  return array.toDouble();
}

/// An int32 array of the given shape.
std::vector<int32_t> readInts(const std::string &path,
                              const std::vector<int64_t> &shape) {
  NpyArray array = readArray(path);
  if (array.type != NpyType::I32)
    throw DataError(path + ": expected an int32 array ('<i4')");
  checkShape(path, array, shape);
  return array.toInt32();
}

/// Writes fp64 values as `type` (every value must be exact in it).
void writeFloats(const std::string &path, const std::vector<double> &values,
                 const std::vector<int64_t> &shape,
                 NpyType type = NpyType::F64) {
  std::string error;
  if (!writeNpy(path, values, shape, type, error))
    throw DataError(error);
}

/// Writes an int32 array.
void writeInts(const std::string &path, const std::vector<int32_t> &values,
               const std::vector<int64_t> &shape) {
  std::string error;
  if (!writeNpy(path, values, shape, error))
    throw DataError(error);
}

/// Writes a uint8 array.
void writeBytes(const std::string &path, const std::vector<uint8_t> &values,
                const std::vector<int64_t> &shape) {
  NpyArray array;
  array.type = NpyType::U8;
  array.shape = shape;
  array.data = values;
  std::string error;
  if (!writeNpy(path, array, error))
    throw DataError(error);
}

//===----------------------------------------------------------------------===//
// config.json
//===----------------------------------------------------------------------===//

/// A JSON number that reads back to the same double.
std::string jsonNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

/// A JSON number, or null for an unset clamp limit.
std::string jsonOptional(const std::optional<double> &value) {
  return value ? jsonNumber(*value) : "null";
}

/// A JSON boolean.
const char *boolText(bool value) { return value ? "true" : "false"; }

/// The --quant spelling of a quantization config.
std::string quantText(const QuantConfig &quant) {
  return quant.enabled ? toString(quant.elem) : "none";
}

/// config.json: every LayerConfig field, plus N (derived, checked on
/// reading) and the seed and empty-expert count the inputs came from.
std::string configJson(const LayerConfig &cfg, uint64_t seed,
                       int64_t emptyExperts) {
  std::ostringstream os;
  os << "{\n"
     << "  \"T\": " << cfg.T << ",\n"
     << "  \"H\": " << cfg.H << ",\n"
     << "  \"I\": " << cfg.I << ",\n"
     << "  \"E\": " << cfg.E << ",\n"
     << "  \"K\": " << cfg.K << ",\n"
     << "  \"B\": " << cfg.B << ",\n"
     << "  \"N\": " << cfg.numBlocks() << ",\n"
     << "  \"act\": \"" << toString(cfg.act) << "\",\n"
     << "  \"affinity\": \"" << toString(cfg.affinity) << "\",\n"
     << "  \"quant\": \"" << quantText(cfg.quant) << "\",\n"
     << "  \"rule\": \"" << toString(cfg.quant.rule) << "\",\n"
     << "  \"clamp_gate_lo\": " << jsonOptional(cfg.clamp.gateLo) << ",\n"
     << "  \"clamp_gate_hi\": " << jsonOptional(cfg.clamp.gateHi) << ",\n"
     << "  \"clamp_up_lo\": " << jsonOptional(cfg.clamp.upLo) << ",\n"
     << "  \"clamp_up_hi\": " << jsonOptional(cfg.clamp.upHi) << ",\n"
     << "  \"bias\": " << boolText(cfg.bias) << ",\n"
     << "  \"checkpoint\": " << boolText(cfg.checkpoint) << ",\n"
     << "  \"dense\": " << boolText(cfg.dense) << ",\n"
     << "  \"dx_accumulate\": \""
     << (cfg.dxAccumulate == DxAccumulate::F32 ? "f32" : "bf16") << "\",\n"
     << "  \"dx_f32\": " << boolText(cfg.dxF32) << ",\n"
     << "  \"weight_grad_bf16\": " << boolText(cfg.weightGradBF16) << ",\n"
     << "  \"seed\": " << seed << ",\n"
     << "  \"empty_experts\": " << emptyExperts << "\n"
     << "}\n";
  return os.str();
}

/// One value of the flat JSON object config.json holds.
struct JsonValue {
  enum Kind { Number, String, Bool, Null } kind = Null;
  double number = 0;
  std::string text;
  bool flag = false;
};

/// Parses a flat JSON object of numbers, strings, booleans and nulls (what
/// configJson writes, in any order and spacing).
std::map<std::string, JsonValue> parseFlatJson(const std::string &path,
                                               const std::string &text) {
  size_t pos = 0;
  auto fail = [&](const std::string &why) -> DataError {
    return DataError(path + ": " + why + " at offset " + std::to_string(pos));
  };
  auto skip = [&] {
    while (pos < text.size() &&
           std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  };
  auto expect = [&](char c) {
    skip();
    if (pos >= text.size() || text[pos] != c)
      throw fail(std::string("expected '") + c + "'");
    ++pos;
  };
  auto parseString = [&] {
    expect('"');
    size_t end = text.find('"', pos);
    if (end == std::string::npos)
      throw fail("unterminated string");
    std::string out = text.substr(pos, end - pos);
    if (out.find('\\') != std::string::npos)
      throw fail("escapes are not supported");
    pos = end + 1;
    return out;
  };
  std::map<std::string, JsonValue> object;
  expect('{');
  skip();
  if (pos < text.size() && text[pos] == '}') {
    ++pos;
  } else {
    while (true) {
      std::string key = parseString();
      if (object.count(key))
        throw fail("duplicate key \"" + key + "\"");
      expect(':');
      skip();
      JsonValue value;
      if (pos < text.size() && text[pos] == '"') {
        value.kind = JsonValue::String;
        value.text = parseString();
      } else if (text.compare(pos, 4, "true") == 0) {
        value.kind = JsonValue::Bool;
        value.flag = true;
        pos += 4;
      } else if (text.compare(pos, 5, "false") == 0) {
        value.kind = JsonValue::Bool;
        pos += 5;
      } else if (text.compare(pos, 4, "null") == 0) {
        pos += 4;
      } else {
        const char *begin = text.c_str() + pos;
        char *end = nullptr;
        value.kind = JsonValue::Number;
        value.number = std::strtod(begin, &end);
        if (end == begin || !std::isfinite(value.number))
          throw fail("expected a value for \"" + key + "\"");
        pos += end - begin;
      }
      object[key] = value;
      skip();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      expect('}');
      break;
    }
  }
  skip();
  if (pos != text.size())
    throw fail("trailing characters");
  return object;
}

/// Reads config.json. T, H, I, E, K and B are required, every other field
/// defaults as in LayerConfig; an unknown key is an error (a misspelt
/// option must not be silently ignored).
LayerConfig readConfig(const std::string &path) {
  std::ifstream file(path);
  if (!file)
    throw DataError(path + ": cannot open file");
  std::stringstream buffer;
  buffer << file.rdbuf();
  std::map<std::string, JsonValue> json = parseFlatJson(path, buffer.str());

  auto bad = [&](const std::string &key, const std::string &why) {
    return DataError(path + ": \"" + key + "\" " + why);
  };
  auto take = [&](const std::string &key, JsonValue::Kind kind,
                  bool required) -> const JsonValue * {
    auto it = json.find(key);
    if (it == json.end()) {
      if (required)
        throw bad(key, "is missing");
      return nullptr;
    }
    if (it->second.kind != kind &&
        !(it->second.kind == JsonValue::Null && kind == JsonValue::Number))
      throw bad(key, "has the wrong type");
    return &it->second;
  };
  auto integer = [&](const std::string &key, int64_t &field) {
    const JsonValue *v = take(key, JsonValue::Number, true);
    if (v->kind != JsonValue::Number || v->number != std::floor(v->number) ||
        v->number < 1 || v->number > (1 << 20))
      throw bad(key, "must be an integer in [1, 2^20]");
    field = static_cast<int64_t>(v->number);
  };
  auto text = [&](const std::string &key) -> std::string {
    const JsonValue *v = take(key, JsonValue::String, false);
    return v ? v->text : std::string();
  };
  auto flag = [&](const std::string &key, bool &field) {
    if (const JsonValue *v = take(key, JsonValue::Bool, false))
      field = v->flag;
  };
  auto optional = [&](const std::string &key, std::optional<double> &field) {
    if (const JsonValue *v = take(key, JsonValue::Number, false))
      if (v->kind == JsonValue::Number)
        field = v->number;
  };

  static const char *known[] = {"T",
                                "H",
                                "I",
                                "E",
                                "K",
                                "B",
                                "N",
                                "act",
                                "affinity",
                                "quant",
                                "rule",
                                "clamp_gate_lo",
                                "clamp_gate_hi",
                                "clamp_up_lo",
                                "clamp_up_hi",
                                "bias",
                                "checkpoint",
                                "dense",
                                "dx_accumulate",
                                "dx_f32",
                                "weight_grad_bf16",
                                "seed",
                                "empty_experts"};
  for (const auto &entry : json) {
    bool isKnown = false;
    for (const char *name : known)
      isKnown |= entry.first == name;
    if (!isKnown)
      throw bad(entry.first, "is not a configuration key");
  }

  LayerConfig cfg;
  integer("T", cfg.T);
  integer("H", cfg.H);
  integer("I", cfg.I);
  integer("E", cfg.E);
  integer("K", cfg.K);
  integer("B", cfg.B);
  std::string value;
  if (!(value = text("act")).empty() && !parseActivation(value, cfg.act))
    throw bad("act", "is not swiglu or geglu");
  if (!(value = text("affinity")).empty() &&
      !parseAffinity(value, cfg.affinity))
    throw bad("affinity", "is not on_i or on_h");
  if (!(value = text("quant")).empty()) {
    cfg.quant.enabled = value != "none";
    if (cfg.quant.enabled && !parseMXElem(value, cfg.quant.elem))
      throw bad("quant", "is not e4m3, e5m2 or none");
  }
  if (!(value = text("rule")).empty() && !parseScaleRule(value, cfg.quant.rule))
    throw bad("rule", "is not rceil, floor or floor_alt");
  optional("clamp_gate_lo", cfg.clamp.gateLo);
  optional("clamp_gate_hi", cfg.clamp.gateHi);
  optional("clamp_up_lo", cfg.clamp.upLo);
  optional("clamp_up_hi", cfg.clamp.upHi);
  flag("bias", cfg.bias);
  flag("checkpoint", cfg.checkpoint);
  flag("dense", cfg.dense);
  flag("dx_f32", cfg.dxF32);
  flag("weight_grad_bf16", cfg.weightGradBF16);
  if (!(value = text("dx_accumulate")).empty()) {
    if (value == "f32")
      cfg.dxAccumulate = DxAccumulate::F32;
    else if (value == "bf16")
      cfg.dxAccumulate = DxAccumulate::BF16;
    else
      throw bad("dx_accumulate", "is not f32 or bf16");
  }
  if (const JsonValue *n = take("N", JsonValue::Number, false))
    if (n->kind != JsonValue::Number || n->number != cfg.numBlocks())
      throw bad("N", "does not match the block count " +
                         std::to_string(cfg.numBlocks()) + " of T, K, E and B");
  return cfg;
}

//===----------------------------------------------------------------------===//
// Shared output helpers
//===----------------------------------------------------------------------===//

/// One result tensor of the layer with its shape and .npy name.
struct Output {
  const char *name;
  const std::vector<double> *values;
  std::vector<int64_t> shape;
};

/// The outputs of a layer with their .npy names and SPEC shapes.
std::vector<Output> outputsOf(const LayerConfig &cfg, const LayerGrads &g) {
  std::vector<Output> outs = {
      {"dx", &g.dx, {cfg.T, cfg.H}},
      {"da", &g.da, {cfg.T * cfg.E}},
      {"dwgu", &g.dwgu, {cfg.E, cfg.H, 2, cfg.I}},
      {"dwd", &g.dwd, {cfg.E, cfg.I, cfg.H}},
  };
  if (cfg.bias) {
    outs.push_back({"dbgu", &g.dbgu, {cfg.E, 2, cfg.I}});
    outs.push_back({"dbd", &g.dbd, {cfg.E, cfg.H}});
  }
  return outs;
}

/// The one-line summary of a configuration printed by `run`.
std::string configLine(const LayerConfig &cfg) {
  auto clamp = [](const std::optional<double> &lo,
                  const std::optional<double> &hi) {
    if (!lo && !hi)
      return std::string("none");
    std::ostringstream os;
    os.precision(9);
    if (lo)
      os << *lo;
    os << ':';
    if (hi)
      os << *hi;
    return os.str();
  };
  std::ostringstream os;
  os << "T=" << cfg.T << " H=" << cfg.H << " I=" << cfg.I << " E=" << cfg.E
     << " K=" << cfg.K << " B=" << cfg.B << " act=" << toString(cfg.act)
     << " affinity=" << toString(cfg.affinity)
     << " quant=" << quantText(cfg.quant)
     << " rule=" << toString(cfg.quant.rule)
     << " clamp_gate=" << clamp(cfg.clamp.gateLo, cfg.clamp.gateHi)
     << " clamp_up=" << clamp(cfg.clamp.upLo, cfg.clamp.upHi)
     << " bias=" << (cfg.bias ? "on" : "off")
     << " checkpoint=" << (cfg.checkpoint ? "on" : "off")
     << " dense=" << (cfg.dense ? "on" : "off")
     << " dx=" << (cfg.dxF32 ? "f32" : "bf16") << " dx_accumulate="
     << (cfg.dxAccumulate == DxAccumulate::F32 ? "f32" : "bf16")
     << " weight_grads=" << (cfg.weightGradBF16 ? "bf16" : "f32");
  return os.str();
}

/// Runs validate() and turns a complaint into a data error.
void checkValid(const LayerConfig &cfg, const LayerInputs &in,
                const std::string &where) {
  std::string problem = validate(cfg, in);
  if (!problem.empty())
    throw DataError(where + ": invalid layer: " + problem);
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

/// moe-ref run: generate, run both references, print the summary table.
int runCommand(const std::vector<std::string> &args) {
  LayerArgs layer;
  std::vector<Option> options;
  layer.addOptions(options);
  parseOptions("run", args, options);
  layer.finish();
  const LayerConfig &cfg = layer.cfg;

  LayerInputs in = makeInputs(cfg, layer.seed, layer.emptyExperts);
  checkValid(cfg, in, "generated inputs");

  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  LayerGrads r64 = backward64(cfg, in);
  auto t1 = Clock::now();
  LayerGrads rmx = backwardMX(cfg, in);
  auto t2 = Clock::now();

  int64_t routed = 0;
  for (int32_t id : in.routing.tokenPositionToId)
    routed += id >= 0;
  int64_t N = static_cast<int64_t>(in.routing.blockToExpert.size());

  std::printf("moe-ref run: %s seed=%llu\n", configLine(cfg).c_str(),
              static_cast<unsigned long long>(layer.seed));
  std::printf("blocks: N=%lld (%lld slots), routed pairs %lld, empty "
              "experts %lld\n",
              static_cast<long long>(N), static_cast<long long>(N * cfg.B),
              static_cast<long long>(routed),
              static_cast<long long>(layer.emptyExperts));
  std::printf("%-6s %-16s %14s %16s %6s\n", "output", "shape", "|R_mx|_F",
              "rel(R_mx,R_64)", "NaN");
  std::vector<Output> mx = outputsOf(cfg, rmx), ref = outputsOf(cfg, r64);
  for (size_t i = 0; i < mx.size(); ++i) {
    double sum = 0;
    int64_t nans = 0;
    for (double v : *mx[i].values) {
      nans += std::isnan(v);
      if (!std::isnan(v))
        sum += v * v;
    }
    double rel = relativeFrobenius(*mx[i].values, *ref[i].values);
    std::printf("%-6s %-16s %14.6e %16.3e %6lld\n", mx[i].name,
                shapeText(mx[i].shape).c_str(), std::sqrt(sum), rel,
                static_cast<long long>(nans));
  }
  std::printf("time: R_64 %.3f s, R_mx %.3f s\n",
              std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  return 0;
}

/// moe-ref gen: write the generated inputs and config.json.
int genCommand(const std::vector<std::string> &args) {
  LayerArgs layer;
  std::string out;
  std::vector<Option> options;
  layer.addOptions(options);
  options.push_back({"--out", true, [&](const std::string &v) { out = v; }});
  parseOptions("gen", args, options);
  require(out, "--out DIR", "gen");
  layer.finish();
  const LayerConfig &cfg = layer.cfg;

  LayerInputs in = makeInputs(cfg, layer.seed, layer.emptyExperts);
  checkValid(cfg, in, "generated inputs");
  int64_t N = cfg.numBlocks();

  makeDir(out);
  auto path = [&](const char *name) { return joinPath(out, name); };
  writeFloats(path("x.npy"), in.x, {cfg.T, cfg.H});
  writeFloats(path("dy.npy"), in.dy, {cfg.T, cfg.H});
  writeFloats(path("affinities.npy"), in.affinities, {cfg.T * cfg.E});
  writeFloats(path("wgu.npy"), in.wgu, {cfg.E, cfg.H, 2, cfg.I});
  writeFloats(path("wd.npy"), in.wd, {cfg.E, cfg.I, cfg.H});
  writeInts(path("token_position_to_id.npy"), in.routing.tokenPositionToId,
            {N * cfg.B});
  writeInts(path("block_to_expert.npy"), in.routing.blockToExpert, {N});
  if (!in.topkIdx.empty())
    writeInts(path("topk_idx.npy"), in.topkIdx, {cfg.T, cfg.K});
  if (cfg.bias) {
    writeFloats(path("bgu.npy"), in.bgu, {cfg.E, 2, cfg.I});
    writeFloats(path("bd.npy"), in.bd, {cfg.E, cfg.H});
  }
  if (cfg.checkpoint)
    writeFloats(path("checkpoint.npy"), in.checkpoint, {N, 2, cfg.I, cfg.B});

  std::string json = path("config.json");
  std::ofstream file(json);
  file << configJson(cfg, layer.seed, layer.emptyExperts);
  file.close();
  if (!file)
    throw DataError(json + ": cannot write file");
  return 0;
}

/// moe-ref bwd: one reference on inputs read from a directory.
int bwdCommand(const std::vector<std::string> &args) {
  std::string in, out, ref;
  std::vector<Option> options = {
      {"--in", true, [&](const std::string &v) { in = v; }},
      {"--out", true, [&](const std::string &v) { out = v; }},
      {"--ref", true,
       [&](const std::string &v) {
         if (v != "r64" && v != "rmx")
           throw UsageError("invalid value '" + v +
                            "' for --ref (expected r64|rmx)");
         ref = v;
       }},
  };
  parseOptions("bwd", args, options);
  require(in, "--in DIR", "bwd");
  require(out, "--out DIR", "bwd");
  require(ref, "--ref r64|rmx", "bwd");

  LayerConfig cfg = readConfig(joinPath(in, "config.json"));
  int64_t N = cfg.numBlocks();
  auto path = [&](const char *name) { return joinPath(in, name); };
  LayerInputs inputs;
  inputs.x = readFloats(path("x.npy"), {cfg.T, cfg.H});
  inputs.dy = readFloats(path("dy.npy"), {cfg.T, cfg.H});
  // The masked affinities may be stored flat [T*E] or as a [T,E] matrix.
  {
    std::string file = path("affinities.npy");
    NpyArray a = readArray(file);
    if (a.shape != std::vector<int64_t>{cfg.T * cfg.E} &&
        a.shape != std::vector<int64_t>{cfg.T, cfg.E})
      throw DataError(file + ": shape " + shapeText(a.shape) +
                      " does not match the expected [" +
                      std::to_string(cfg.T * cfg.E) + "] or [" +
                      std::to_string(cfg.T) + ", " + std::to_string(cfg.E) +
                      "]");
    inputs.affinities = readFloats(file, {});
  }
  inputs.wgu = readFloats(path("wgu.npy"), {cfg.E, cfg.H, 2, cfg.I});
  inputs.wd = readFloats(path("wd.npy"), {cfg.E, cfg.I, cfg.H});
  inputs.routing.tokenPositionToId =
      readInts(path("token_position_to_id.npy"), {N * cfg.B});
  inputs.routing.blockToExpert = readInts(path("block_to_expert.npy"), {N});
  if (cfg.bias) {
    inputs.bgu = readFloats(path("bgu.npy"), {cfg.E, 2, cfg.I});
    inputs.bd = readFloats(path("bd.npy"), {cfg.E, cfg.H});
  }
  if (cfg.checkpoint)
    inputs.checkpoint =
        readFloats(path("checkpoint.npy"), {N, 2, cfg.I, cfg.B});
  checkValid(cfg, inputs, in);

  LayerGrads grads =
      ref == "r64" ? backward64(cfg, inputs) : backwardMX(cfg, inputs);
  makeDir(out);
  for (const Output &o : outputsOf(cfg, grads))
    writeFloats(joinPath(out, std::string(o.name) + ".npy"), *o.values,
                o.shape);
  return 0;
}

/// moe-ref quantize: MX-quantize one 2-D array.
int quantizeCommand(const std::vector<std::string> &args) {
  std::string in, codes, scales, dequant;
  int64_t axis = -1;
  MXElem elem = MXElem::E4M3;
  ScaleRule rule = ScaleRule::RCeil;
  std::vector<Option> options = {
      {"--in", true, [&](const std::string &v) { in = v; }},
      {"--axis", true,
       [&](const std::string &v) { axis = parseInt("--axis", v, 0, 1); }},
      {"--elem", true,
       [&](const std::string &v) {
         elem = parseChoice<MXElem>(
             "--elem", v, {{"e4m3", MXElem::E4M3}, {"e5m2", MXElem::E5M2}});
       }},
      {"--rule", true,
       [&](const std::string &v) { rule = LayerArgs::parseRule("--rule", v); }},
      {"--codes", true, [&](const std::string &v) { codes = v; }},
      {"--scales", true, [&](const std::string &v) { scales = v; }},
      {"--dequant", true, [&](const std::string &v) { dequant = v; }},
  };
  parseOptions("quantize", args, options);
  require(in, "--in X.npy", "quantize");
  if (axis < 0)
    throw UsageError("quantize needs --axis 0|1");
  require(codes, "--codes Q.npy", "quantize");
  require(scales, "--scales S.npy", "quantize");

  NpyArray x = readArray(in);
  if (x.shape.size() != 2)
    throw DataError(in + ": expected a 2-D array, got shape " +
                    shapeText(x.shape));
  if (x.type != NpyType::F32 && x.type != NpyType::F64 &&
      x.type != NpyType::BF16)
    throw DataError(in + ": expected an f32 (or exactly-f32 f64) array");
  std::vector<double> wide = x.toDouble();
  std::vector<float> values(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    values[i] = static_cast<float>(wide[i]);
    if (!std::isnan(wide[i]) && static_cast<double>(values[i]) != wide[i]) {
      std::ostringstream os;
      os.precision(17);
      os << in << ": element " << i << " (" << wide[i]
         << ") is not an f32 value";
      throw DataError(os.str());
    }
  }
  int64_t rows = x.shape[0], cols = x.shape[1];
  MXMatrix q = quantizeMatrix(values.data(), rows, cols, static_cast<int>(axis),
                              elem, rule);
  std::vector<int64_t> scaleShape =
      axis == 1 ? std::vector<int64_t>{rows, (cols + kMXBlock - 1) / kMXBlock}
                : std::vector<int64_t>{(rows + kMXBlock - 1) / kMXBlock, cols};
  writeBytes(codes, q.codes, {rows, cols});
  writeBytes(scales, q.scales, scaleShape);
  if (!dequant.empty()) {
    std::vector<float> d = q.dequantize();
    writeFloats(dequant, std::vector<double>(d.begin(), d.end()), {rows, cols},
                NpyType::F32);
  }
  return 0;
}

/// moe-ref route: the blocked layout and masked affinities of a top-k.
int routeCommand(const std::vector<std::string> &args) {
  std::string idxPath, scorePath, out;
  int64_t E = 0, B = 0;
  std::vector<Option> options = {
      {"--topk-idx", true, [&](const std::string &v) { idxPath = v; }},
      {"--topk-scores", true, [&](const std::string &v) { scorePath = v; }},
      {"--experts", true,
       [&](const std::string &v) { E = parseInt("--experts", v, 1, 1 << 20); }},
      {"--block-size", true,
       [&](const std::string &v) {
         B = parseInt("--block-size", v, 1, 1 << 20);
       }},
      {"--out", true, [&](const std::string &v) { out = v; }},
  };
  parseOptions("route", args, options);
  require(idxPath, "--topk-idx I.npy", "route");
  require(scorePath, "--topk-scores S.npy", "route");
  if (E == 0)
    throw UsageError("route needs --experts E");
  if (B == 0)
    throw UsageError("route needs --block-size B");
  if (B % 32 != 0)
    throw UsageError("--block-size " + std::to_string(B) +
                     " is not a multiple of 32");
  require(out, "--out DIR", "route");

  NpyArray idxArray = readArray(idxPath);
  if (idxArray.type != NpyType::I32)
    throw DataError(idxPath + ": expected an int32 array ('<i4')");
  if (idxArray.shape.size() != 2)
    throw DataError(idxPath + ": expected a 2-D array [T,K], got shape " +
                    shapeText(idxArray.shape));
  int64_t T = idxArray.shape[0], K = idxArray.shape[1];
  std::vector<int32_t> idx = idxArray.toInt32();
  std::vector<double> scores = readFloats(scorePath, {T, K});
  Routing routing;
  try {
    routing = buildRouting(idx.data(), T, K, E, B);
  } catch (const std::invalid_argument &e) {
    throw DataError(idxPath + ": " + e.what());
  }
  std::vector<double> aff =
      maskedAffinities(idx.data(), scores.data(), T, K, E);
  makeDir(out);
  int64_t N = static_cast<int64_t>(routing.blockToExpert.size());
  writeInts(joinPath(out, "token_position_to_id.npy"),
            routing.tokenPositionToId, {N * B});
  writeInts(joinPath(out, "block_to_expert.npy"), routing.blockToExpert, {N});
  writeFloats(joinPath(out, "affinities.npy"), aff, {T * E});
  return 0;
}

/// moe-ref router-bwd: router forward and, with --dscores, backward.
int routerBwdCommand(const std::vector<std::string> &args) {
  std::string logitsPath, dscoresPath, out;
  int64_t K = 0;
  bool haveMode = false;
  RouterMode mode = RouterMode::TopKThenSoftmax;
  std::vector<Option> options = {
      {"--logits", true, [&](const std::string &v) { logitsPath = v; }},
      {"--topk", true,
       [&](const std::string &v) { K = parseInt("--topk", v, 1, 1 << 20); }},
      {"--mode", true,
       [&](const std::string &v) {
         haveMode = true;
         mode = parseChoice<RouterMode>(
             "--mode", v,
             {{"topk_softmax", RouterMode::TopKThenSoftmax},
              {"softmax_topk", RouterMode::SoftmaxThenTopK},
              {"softmax_topk_renorm", RouterMode::SoftmaxThenTopKRenorm}});
       }},
      {"--dscores", true, [&](const std::string &v) { dscoresPath = v; }},
      {"--out", true, [&](const std::string &v) { out = v; }},
  };
  parseOptions("router-bwd", args, options);
  require(logitsPath, "--logits L.npy", "router-bwd");
  if (K == 0)
    throw UsageError("router-bwd needs --topk K");
  if (!haveMode)
    throw UsageError("router-bwd needs --mode "
                     "topk_softmax|softmax_topk|softmax_topk_renorm");
  require(out, "--out DIR", "router-bwd");

  NpyArray logitsArray = readArray(logitsPath);
  if (logitsArray.shape.size() != 2 || logitsArray.type == NpyType::I32 ||
      logitsArray.type == NpyType::U8)
    throw DataError(logitsPath + ": expected a 2-D float array [T,E], got " +
                    shapeText(logitsArray.shape));
  int64_t T = logitsArray.shape[0], E = logitsArray.shape[1];
  if (K > E)
    throw UsageError("--topk " + std::to_string(K) + " exceeds the " +
                     std::to_string(E) + " experts of " + logitsPath);
  std::vector<double> logits = logitsArray.toDouble();
  std::vector<double> dscores;
  if (!dscoresPath.empty())
    dscores = readFloats(dscoresPath, {T, K});

  RouterOutput fwd;
  std::vector<double> dlogits;
  try {
    fwd = routerForward(logits.data(), T, E, K, mode);
    if (!dscoresPath.empty())
      dlogits = routerBackward(logits.data(), fwd.topkIdx.data(),
                               dscores.data(), T, E, K, mode);
  } catch (const std::invalid_argument &e) {
    throw DataError(logitsPath + ": " + e.what());
  }
  makeDir(out);
  writeInts(joinPath(out, "topk_idx.npy"), fwd.topkIdx, {T, K});
  writeFloats(joinPath(out, "topk_scores.npy"), fwd.topkScores, {T, K});
  if (!dscoresPath.empty())
    writeFloats(joinPath(out, "dlogits.npy"), dlogits, {T, E});
  return 0;
}

/// Runs the command named by the first argument.
int dispatch(const std::vector<std::string> &argv) {
  if (argv.empty())
    throw UsageError("no command given (see moe-ref --help)");
  for (const std::string &arg : argv) {
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
  }
  const std::string &command = argv[0];
  std::vector<std::string> args(argv.begin() + 1, argv.end());
  if (command == "run")
    return runCommand(args);
  if (command == "gen")
    return genCommand(args);
  if (command == "bwd")
    return bwdCommand(args);
  if (command == "quantize")
    return quantizeCommand(args);
  if (command == "route")
    return routeCommand(args);
  if (command == "router-bwd")
    return routerBwdCommand(args);
  throw UsageError("unknown command '" + command + "' (see moe-ref --help)");
}

} // namespace

int main(int argc, char **argv) {
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError &e) {
    std::fprintf(stderr, "moe-ref: error: %s\n", e.what());
    return 2;
  } catch (const DataError &e) {
    std::fprintf(stderr, "moe-ref: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "moe-ref: error: out of memory\n");
    return 1;
  } catch (const std::exception &e) {
    // The library reports invalid data (bad routing, shapes) by throwing.
    std::fprintf(stderr, "moe-ref: error: %s\n", e.what());
    return 1;
  }
}
