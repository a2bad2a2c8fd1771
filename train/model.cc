#include "train/model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "train/splitmix.h"

namespace strata::train {
namespace {


uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Standard normal from two uniforms (Box-Muller).
float Normal(uint64_t key) {
  const double u1 = ((SplitMix64(key) >> 11) + 1) * (1.0 / 9007199254740993.0);
  const double u2 = (SplitMix64(key ^ 0x5851f42d4c957f2dULL) >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                            std::cos(2 * M_PI * u2));
}

}  // namespace

StatusOr<ModelConfig> ModelPreset(const std::string& name) {
  if (name == "tiny") return ModelConfig{"tiny", 64, 16, 48, 8, 8};
  if (name == "small") return ModelConfig{"small", 256, 64, 320, 8, 8};
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model '", name, "' (tiny, small)"));
}

int64_t ParameterCount(const ModelConfig& m) {
  const int64_t h = m.hidden, f = m.ffn();
  const int64_t per_layer = 4 * h + 3 * (h * h + h) + h * h + h + h * f + f +
                            f * h + h;
  return m.vocab * h + m.seq * h + m.layers * per_layer + 2 * h;
}

Status ValidateSplit(const ModelConfig& m, const Parallel& p, int global_batch,
                     int micro_batch) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (p.tp < 1 || p.pp < 1 || p.dp < 1) return bad("tp, pp and dp must be >= 1");
  if (m.heads % p.tp != 0) {
    return bad("tp=", p.tp, " does not divide the ", m.heads, " heads of '",
               m.name, "'");
  }
  if (!p.stage_layers.empty()) {
    int sum = 0, least = m.layers;
    for (int l : p.stage_layers) sum += l, least = std::min(least, l);
    if (static_cast<int>(p.stage_layers.size()) != p.pp || sum != m.layers ||
        least < 1) {
      return bad("layers per stage [", absl::StrJoin(p.stage_layers, ","),
                 "] must be pp=", p.pp, " counts >= 1 that sum to the ",
                 m.layers, " layers of '", m.name, "'");
    }
  } else if (m.layers % p.pp != 0) {
    return bad("pp=", p.pp, " does not divide the ", m.layers, " layers of '",
               m.name, "'");
  }
  if (micro_batch < 1 || global_batch < 1) {
    return bad("--global-batch and --micro-batch must be >= 1");
  }
  if (global_batch % (p.dp * micro_batch) != 0) {
    return bad("--global-batch ", global_batch, " is not divisible by dp=",
               p.dp, " x --micro-batch ", micro_batch);
  }
  return absl::OkStatus();
}

int StageParams::Add(std::string name, std::vector<int64_t> global_shape,
                     std::vector<int64_t> local_shape,
                     std::vector<int64_t> offset, bool decay,
                     bool tp_replicated) {
  ParamShard s;
  s.name = std::move(name);
  s.global_shape = std::move(global_shape);
  s.local_shape = std::move(local_shape);
  s.offset = std::move(offset);
  s.size = 1;
  for (int64_t d : s.local_shape) s.size *= d;
  s.start = w.size();
  s.decay = decay;
  s.tp_replicated = tp_replicated;
  w.resize(w.size() + s.size);
  shards.push_back(std::move(s));
  return static_cast<int>(shards.size()) - 1;
}

std::pair<int, int> Parallel::LayerRange(int layers) const {
  if (stage_layers.empty()) {
    const int per_stage = layers / pp;
    return {pp_rank * per_stage, (pp_rank + 1) * per_stage};
  }
  int first = 0;
  for (int s = 0; s < pp_rank; ++s) first += stage_layers[s];
  return {first, first + stage_layers[pp_rank]};
}

StageParams::StageParams(const ModelConfig& m, const Parallel& p) {
  const int64_t h = m.hidden, f = m.ffn(), t = p.tp, r = p.tp_rank;
  const auto [begin_layer, end_layer] = p.LayerRange(m.layers);
  first_layer = begin_layer;
  const bool first = p.pp_rank == 0, last = p.pp_rank == p.pp - 1;
  auto vec = [&](const std::string& n, int64_t len, bool split) {
    return split ? Add(n, {len}, {len / t}, {r * len / t}, false, false)
                 : Add(n, {len}, {len}, {0}, false, true);
  };
  auto column = [&](const std::string& n, int64_t in, int64_t out) {
    return Add(n, {in, out}, {in, out / t}, {0, r * out / t}, true, false);
  };
  auto row = [&](const std::string& n, int64_t in, int64_t out) {
    return Add(n, {in, out}, {in / t, out}, {r * in / t, 0}, true, false);
  };
  if (first) {
    wte = Add("wte", {m.vocab, h}, {m.vocab, h}, {0, 0}, true, true);
    wpe = Add("wpe", {m.seq, h}, {m.seq, h}, {0, 0}, true, true);
  }
  for (int l = begin_layer; l < end_layer; ++l) {
    const std::string p_ = absl::StrCat("h.", l, ".");
    LayerParams lp;
    lp.begin = w.size();
    lp.ln1_g = vec(p_ + "ln1_g", h, false);
    lp.ln1_b = vec(p_ + "ln1_b", h, false);
    lp.q_w = column(p_ + "attn.q_w", h, h);
    lp.q_b = vec(p_ + "attn.q_b", h, true);
    lp.k_w = column(p_ + "attn.k_w", h, h);
    lp.k_b = vec(p_ + "attn.k_b", h, true);
    lp.v_w = column(p_ + "attn.v_w", h, h);
    lp.v_b = vec(p_ + "attn.v_b", h, true);
    lp.o_w = row(p_ + "attn.o_w", h, h);
    lp.o_b = vec(p_ + "attn.o_b", h, false);
    lp.ln2_g = vec(p_ + "ln2_g", h, false);
    lp.ln2_b = vec(p_ + "ln2_b", h, false);
    lp.fc1_w = column(p_ + "mlp.fc1_w", h, f);
    lp.fc1_b = vec(p_ + "mlp.fc1_b", f, true);
    lp.fc2_w = row(p_ + "mlp.fc2_w", f, h);
    lp.fc2_b = vec(p_ + "mlp.fc2_b", h, false);
    lp.end = w.size();
    layers.push_back(lp);
  }
  if (last) {
    lnf_g = vec("lnf_g", h, false);
    lnf_b = vec("lnf_b", h, false);
    if (!first) {
      wte = Add("wte", {m.vocab, h}, {m.vocab, h}, {0, 0}, true, true);
      shards[wte].tied_copy = true;
    }
  }
  g.assign(w.size(), 0.0f);
  total_layers_ = m.layers;
}

void StageParams::Init(uint64_t seed) {
  for (const auto& s : shards) {
    float* dst = w.data() + s.start;
    const bool is_gain = s.name.ends_with("_g");
    const bool is_bias = s.name.ends_with("_b");
    if (is_gain || is_bias) {
      std::fill(dst, dst + s.size, is_gain ? 1.0f : 0.0f);
      continue;
    }
    float std = 0.02f;
    if (s.name.ends_with("o_w") || s.name.ends_with("fc2_w")) {
      // GPT-2: residual projections scaled by 1/sqrt(2 * n_layer).
      std = 0.02f / std::sqrt(2.0f * static_cast<float>(total_layers_));
    }
    const uint64_t base = SplitMix64(seed ^ HashName(s.name));
    const int64_t cols = s.global_shape.size() == 2 ? s.global_shape[1] : 1;
    const int64_t lcols = s.local_shape.size() == 2 ? s.local_shape[1] : 1;
    const int64_t r0 = s.offset[0], c0 = s.offset.size() == 2 ? s.offset[1] : 0;
    for (size_t i = 0; i < s.size; ++i) {
      const int64_t lr = static_cast<int64_t>(i) / lcols, lc = i % lcols;
      const uint64_t gi = static_cast<uint64_t>((r0 + lr) * cols + c0 + lc);
      dst[i] = std * Normal(base + gi * 2);
    }
  }
}

}  // namespace strata::train
