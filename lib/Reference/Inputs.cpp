//===- Inputs.cpp - validation and seeded generation of layer inputs ------===//
//
// validate() checks a configuration and its inputs against the contract
// before any reference runs on them; makeInputs() draws the seeded random
// inputs of SPEC section 6. The draws must be the same bits on every
// platform, so they come from std::mt19937_64 (fully specified by the
// standard) through a hand-written Box-Muller transform, never from
// std::normal_distribution (implementation-defined).
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Model.h"

#include "moe/Reference/BF16.h"
#include "moe/Reference/Router.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>
#include <stdexcept>

using namespace moe::ref;

static constexpr double kPi = 3.14159265358979323846;

namespace {

/// N(0,1) draws of one named stream of a seed. Each tensor has its own
/// stream, so switching an option (bias, checkpoint) leaves the other
/// tensors' values unchanged.
class NormalStream {
public:
  NormalStream(uint64_t seed, uint32_t stream) {
    std::seed_seq seq{static_cast<uint32_t>(seed),
                      static_cast<uint32_t>(seed >> 32), stream};
    gen.seed(seq);
  }

  /// Box-Muller: two uniforms give two independent normals; the second is
  /// kept for the next call.
  double next() {
    if (hasSpare) {
      hasSpare = false;
      return spare;
    }
    double radius = std::sqrt(-2.0 * std::log(uniform()));
    double theta = 2.0 * kPi * uniform();
    spare = radius * std::sin(theta);
    hasSpare = true;
    return radius * std::cos(theta);
  }

private:
  /// Uniform in (0, 1]: the top 53 bits, offset by half a step so that the
  /// logarithm never sees zero.
  double uniform() {
    return (static_cast<double>(gen() >> 11) + 0.5) * 0x1p-53;
  }

  std::mt19937_64 gen;
  double spare = 0.0;
  bool hasSpare = false;
};

/// Stream ids of makeInputs(), one per drawn tensor.
enum Stream : uint32_t {
  StreamX = 1,
  StreamDy,
  StreamWgu,
  StreamWd,
  StreamBgu,
  StreamBd,
  StreamRouter,
};

} // namespace

/// `n` draws of N(0, stddev^2), rounded to bf16.
static std::vector<double> bf16Normal(uint64_t seed, Stream stream, int64_t n,
                                      double stddev) {
  NormalStream normal(seed, stream);
  std::vector<double> out(n);
  for (double &v : out)
    v = roundToBF16(stddev * normal.next());
  return out;
}

static std::string sizeProblem(const char *name, size_t got,
                               const char *expectedName, int64_t expected) {
  if (static_cast<int64_t>(got) == expected)
    return {};
  return std::string(name) + " has " + std::to_string(got) +
         " values, expected " + expectedName + " = " + std::to_string(expected);
}

/// A tensor that must be present exactly when `on` holds.
static std::string optionalSizeProblem(const char *name, size_t got, bool on,
                                       const char *option,
                                       const char *expectedName,
                                       int64_t expected) {
  if (on)
    return sizeProblem(name, got, expectedName, expected);
  if (got == 0)
    return {};
  return std::string(name) + " must be empty when " + option +
         " is off, it has " + std::to_string(got) + " values";
}

/// A round-trip spelling of a value for messages.
static std::string formatValue(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

/// The checks that need no tensors: shapes, attributes, clamp order.
static std::string validateConfig(const LayerConfig &cfg) {
  if (cfg.T <= 0 || cfg.H <= 0 || cfg.I <= 0 || cfg.E <= 0 || cfg.K <= 0 ||
      cfg.B <= 0)
    return "T, H, I, E, K and B must be positive";
  if (cfg.H % kMXBlock != 0)
    return "H = " + std::to_string(cfg.H) + " is not a multiple of 32";
  if (cfg.I % kMXBlock != 0)
    return "I = " + std::to_string(cfg.I) + " is not a multiple of 32";
  if (cfg.B % kMXBlock != 0)
    return "B = " + std::to_string(cfg.B) + " is not a multiple of 32";
  if (cfg.K > cfg.E)
    return "K = " + std::to_string(cfg.K) +
           " exceeds E = " + std::to_string(cfg.E);
  if (cfg.dense && (cfg.E != 1 || cfg.K != 1))
    return "dense mode requires E = 1 and K = 1";
  const ClampConfig &c = cfg.clamp;
  if (c.gateLo && c.gateHi && !(*c.gateLo < *c.gateHi))
    return "gate clamp needs gate_lo < gate_hi";
  if (c.upLo && c.upHi && !(*c.upLo < *c.upHi))
    return "up clamp needs up_lo < up_hi";
  return {};
}

std::string moe::ref::validate(const LayerConfig &cfg, const LayerInputs &in) {
  std::string problem = validateConfig(cfg);
  if (!problem.empty())
    return problem;

  int64_t T = cfg.T, H = cfg.H, I = cfg.I, E = cfg.E, B = cfg.B;
  int64_t N = cfg.numBlocks();
  for (std::string p :
       {sizeProblem("x", in.x.size(), "T*H", T * H),
        sizeProblem("dy", in.dy.size(), "T*H", T * H),
        sizeProblem("wgu", in.wgu.size(), "E*H*2*I", E * H * 2 * I),
        sizeProblem("wd", in.wd.size(), "E*I*H", E * I * H),
        optionalSizeProblem("bgu", in.bgu.size(), cfg.bias, "bias", "E*2*I",
                            E * 2 * I),
        optionalSizeProblem("bd", in.bd.size(), cfg.bias, "bias", "E*H", E * H),
        optionalSizeProblem("checkpoint", in.checkpoint.size(), cfg.checkpoint,
                            "checkpoint", "N*2*I*B", N * 2 * I * B)})
    if (!p.empty())
      return p;
  return validateRouting(cfg, in.routing, in.affinities);
}

std::string moe::ref::validateRouting(const LayerConfig &cfg,
                                      const Routing &r,
                                      const std::vector<double> &affinities) {
  std::string problem = validateConfig(cfg);
  if (!problem.empty())
    return problem;
  int64_t T = cfg.T, E = cfg.E, B = cfg.B;
  int64_t N = cfg.numBlocks();
  problem = sizeProblem("affinities", affinities.size(), "T*E", T * E);
  if (!problem.empty())
    return problem;
  if (static_cast<int64_t>(r.blockToExpert.size()) != N)
    return "block_to_expert has " + std::to_string(r.blockToExpert.size()) +
           " blocks, expected N = " + std::to_string(N);
  problem = sizeProblem("token_position_to_id", r.tokenPositionToId.size(),
                        "N*B", N * B);
  if (!problem.empty())
    return problem;
  problem = verifyRouting(r, T, E, B);
  if (!problem.empty())
    return "invalid routing: " + problem;

  // Routed pairs are those of the layout; verifyRouting guarantees each
  // appears once.
  std::vector<char> routed(T * E, 0);
  std::vector<int64_t> perToken(T, 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b) {
      int32_t t = r.tokenPositionToId[n * B + b];
      if (t < 0)
        continue;
      routed[t * E + r.blockToExpert[n]] = 1;
      ++perToken[t];
    }
  for (int64_t t = 0; t < T; ++t) {
    if (perToken[t] > cfg.K)
      return "token " + std::to_string(t) + " is routed to " +
             std::to_string(perToken[t]) +
             " experts, more than K = " + std::to_string(cfg.K);
    if (cfg.dense && perToken[t] != 1)
      return "dense mode routes every token, token " + std::to_string(t) +
             " is not routed";
    for (int64_t e = 0; e < E; ++e) {
      double a = affinities[t * E + e];
      std::string pair =
          "(" + std::to_string(t) + ", " + std::to_string(e) + ")";
      if (routed[t * E + e] && !(a > 0.0 && std::isfinite(a)))
        return "affinity of routed pair " + pair +
               " must be positive and finite, got " + formatValue(a);
      if (!routed[t * E + e] && a != 0.0)
        return "affinity of non-routed pair " + pair + " must be 0, got " +
               formatValue(a);
    }
  }
  return {};
}

/// The checkpoint of the fp64 forward: clamped g and u of every routed slot,
/// rounded to bf16, in the [N,2,I,B] layout; padding slots stay zero.
static std::vector<double> makeCheckpoint(const LayerConfig &cfg,
                                          const LayerInputs &in) {
  int64_t H = cfg.H, I = cfg.I, B = cfg.B, twoI = 2 * I;
  int64_t N = static_cast<int64_t>(in.routing.blockToExpert.size());
  std::vector<double> ckpt(N * twoI * B, 0.0);
  std::vector<double> gu(twoI);
  for (int64_t n = 0; n < N; ++n) {
    int64_t e = in.routing.blockToExpert[n];
    for (int64_t b = 0; b < B; ++b) {
      int64_t t = in.routing.tokenPositionToId[n * B + b];
      if (t < 0)
        continue;
      std::fill(gu.begin(), gu.end(), 0.0);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < twoI; ++j)
          gu[j] += in.x[t * H + h] * in.wgu[(e * H + h) * twoI + j];
      for (int64_t j = 0; j < twoI; ++j) {
        double v = gu[j] + (cfg.bias ? in.bgu[e * twoI + j] : 0.0);
        bool gate = j < I;
        const ClampConfig &c = cfg.clamp;
        const std::optional<double> &lo = gate ? c.gateLo : c.upLo;
        const std::optional<double> &hi = gate ? c.gateHi : c.upHi;
        if (lo)
          v = std::max(v, *lo);
        if (hi)
          v = std::min(v, *hi);
        ckpt[(n * twoI + j) * B + b] = roundToBF16(v);
      }
    }
  }
  return ckpt;
}

LayerInputs moe::ref::makeInputs(const LayerConfig &cfg, uint64_t seed,
                                 int64_t emptyExperts) {
  std::string problem = validateConfig(cfg);
  if (problem.empty() && emptyExperts < 0)
    problem = "emptyExperts must not be negative";
  if (problem.empty() && cfg.K > cfg.E - emptyExperts)
    problem = "K = " + std::to_string(cfg.K) + " exceeds the " +
              std::to_string(cfg.E - emptyExperts) + " experts with tokens";
  if (!problem.empty())
    throw std::invalid_argument("makeInputs: " + problem);

  int64_t T = cfg.T, H = cfg.H, I = cfg.I, E = cfg.E, K = cfg.K;
  double weightStd = 1.0 / std::sqrt(static_cast<double>(H));
  LayerInputs in;
  in.x = bf16Normal(seed, StreamX, T * H, 1.0);
  in.dy = bf16Normal(seed, StreamDy, T * H, 1.0);
  in.wgu = bf16Normal(seed, StreamWgu, E * H * 2 * I, weightStd);
  in.wd = bf16Normal(seed, StreamWd, E * I * H, weightStd);
  if (cfg.bias) {
    in.bgu = bf16Normal(seed, StreamBgu, E * 2 * I, weightStd);
    in.bd = bf16Normal(seed, StreamBd, E * H, weightStd);
  }

  // Top-k selection and scores [T,K]. Dense mode routes every token to its
  // one expert; its affinity is a sigmoid of a normal draw rather than 1 so
  // that the affinity gradient stays meaningful.
  std::vector<double> scores;
  NormalStream router(seed, StreamRouter);
  if (cfg.dense) {
    in.topkIdx.assign(T, 0);
    for (int64_t t = 0; t < T; ++t)
      scores.push_back(1.0 / (1.0 + std::exp(-router.next())));
  } else {
    // The experts meant to stay empty get a logit far below any draw
    // (finite, as routerForward requires), so top-k never selects them.
    const double kMaskedLogit = -1e30;
    std::vector<double> logits(T * E);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) {
        double z = router.next();
        logits[t * E + e] = e < E - emptyExperts ? z : kMaskedLogit;
      }
    RouterOutput out =
        routerForward(logits.data(), T, E, K, RouterMode::TopKThenSoftmax);
    in.topkIdx = std::move(out.topkIdx);
    scores = std::move(out.topkScores);
  }
  for (double &s : scores)
    s = static_cast<float>(s);
  in.affinities = maskedAffinities(in.topkIdx.data(), scores.data(), T, K, E);
  in.routing = buildRouting(in.topkIdx.data(), T, K, E, cfg.B);
  if (cfg.checkpoint)
    in.checkpoint = makeCheckpoint(cfg, in);
  return in;
}
