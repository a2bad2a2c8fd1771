// Hand-written backward passes of train/ops.h and train/block.h checked
// against central finite differences of the forward pass (in double-checked
// fp32: relative error per element < 2e-2 with h = 1e-2 on O(1) inputs).
#include "train/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstdlib>
#include <random>
#include <span>

#include "train/adamw.h"
#include "train/block.h"
#include "train/threads.h"

extern "C" void openblas_set_num_threads(int);

namespace strata::train {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Checks d(sum(w .* f(x)))/dx[i] == analytic[i] for a sample of i.
void CheckGradient(std::span<float> x, std::span<const float> analytic,
                   const std::function<double()>& loss, const char* what) {
  ASSERT_EQ(x.size(), analytic.size());
  const float h = 1e-2f;
  int checked = 0;
  for (size_t i = 0; i < x.size(); i += std::max<size_t>(1, x.size() / 40)) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 2e-2 * std::max(1.0, std::abs(numeric)))
        << what << " element " << i;
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

TEST(OpsTest, LinearBackward) {
  openblas_set_num_threads(1);
  const int t = 5, in = 7, out = 6;
  auto x = Random(t * in, 1), w = Random(in * out, 2), b = Random(out, 3),
       probe = Random(t * out, 4);
  auto loss = [&] {
    std::vector<float> y(t * out);
    Linear(x.data(), w.data(), b.data(), t, in, out, y.data());
    return Dot(y, probe);
  };
  std::vector<float> dx(t * in), dw(in * out, 0), db(out, 0);
  LinearBackward(x.data(), w.data(), probe.data(), t, in, out, dx.data(),
                 dw.data(), db.data());
  CheckGradient(x, dx, loss, "dx");
  CheckGradient(w, dw, loss, "dw");
  CheckGradient(b, db, loss, "db");
}

TEST(OpsTest, LayerNormBackward) {
  const int t = 4, h = 9;
  auto x = Random(t * h, 5), g = Random(h, 6), b = Random(h, 7),
       probe = Random(t * h, 8);
  std::vector<float> mean(t), rstd(t);
  auto loss = [&] {
    std::vector<float> y(t * h);
    LayerNorm(x.data(), g.data(), b.data(), t, h, y.data(), mean.data(),
              rstd.data());
    return Dot(y, probe);
  };
  loss();
  std::vector<float> dx(t * h), dg(h, 0), db(h, 0);
  LayerNormBackward(x.data(), g.data(), mean.data(), rstd.data(), probe.data(),
                    t, h, dx.data(), dg.data(), db.data());
  CheckGradient(x, dx, loss, "dx");
  CheckGradient(g, dg, loss, "dg");
  CheckGradient(b, db, loss, "db");
}

TEST(OpsTest, GeluBackward) {
  auto x = Random(50, 9, 2.0f), probe = Random(50, 10);
  auto loss = [&] {
    std::vector<float> y(50);
    Gelu(x.data(), 50, y.data());
    return Dot(y, probe);
  };
  std::vector<float> dx(50);
  GeluBackward(x.data(), probe.data(), 50, dx.data());
  CheckGradient(x, dx, loss, "dx");
}

TEST(OpsTest, GeluIsTheTanhFormulaToFloatPrecision) {
  // The trainer computes GeLU through its own exp (no libm call); it must
  // equal 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) everywhere,
  // including far out where e^{-2z} over- or underflows.
  std::vector<float> x;
  for (float u = -40.0f; u <= 40.0f; u += 0.0013f) x.push_back(u);
  std::vector<float> y(x.size());
  Gelu(x.data(), static_cast<int>(x.size()), y.data());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i];
    // 0.5 u (1 + tanh z) written as u sigmoid(2z), in double (in the tanh
    // form 1 + tanh z cancels to 0 long before the value is 0).
    const double z = 0.7978845608028654 * (u + 0.044715 * u * u * u);
    const double want = u / (1 + std::exp(-2 * z));
    const double err = std::fabs(y[i] - want);
    if (err > 1e-30) worst = std::max(worst, err / std::fabs(want));
    ASSERT_TRUE(std::isfinite(y[i])) << "u=" << u;
  }
  EXPECT_LT(worst, 1e-5) << "worst relative error";
}

TEST(OpsTest, CausalAttentionBackward) {
  const int seqs = 2, s = 5, heads = 2, d = 3, n = seqs * s * heads * d;
  auto q = Random(n, 11), k = Random(n, 12), v = Random(n, 13),
       probe = Random(n, 14);
  std::vector<float> probs(seqs * heads * s * s);
  auto loss = [&] {
    std::vector<float> out(n);
    Attention(q.data(), k.data(), v.data(), seqs, s, heads, d, probs.data(),
              out.data());
    return Dot(out, probe);
  };
  loss();
  // Causality: a later token does not change an earlier output.
  std::vector<float> out0(n), out1(n);
  Attention(q.data(), k.data(), v.data(), seqs, s, heads, d, probs.data(),
            out0.data());
  k[(s - 1) * heads * d] += 1.0f;
  Attention(q.data(), k.data(), v.data(), seqs, s, heads, d, probs.data(),
            out1.data());
  k[(s - 1) * heads * d] -= 1.0f;
  for (int i = 0; i < (s - 1) * heads * d; ++i) EXPECT_EQ(out0[i], out1[i]);
  loss();
  std::vector<float> dq(n), dk(n), dv(n);
  AttentionBackward(q.data(), k.data(), v.data(), probs.data(), probe.data(),
                    seqs, s, heads, d, dq.data(), dk.data(), dv.data());
  CheckGradient(q, dq, loss, "dq");
  CheckGradient(k, dk, loss, "dk");
  CheckGradient(v, dv, loss, "dv");
}

// The fused attention kernel against the textbook definition in double:
// softmax(q k^T / sqrt(d) + causal mask) v, per sequence and head, with
// sizes that exercise the vector tails (s 37, d 13).
TEST(OpsTest, AttentionMatchesNaiveDefinition) {
  const int seqs = 2, s = 37, heads = 3, d = 13, ld = heads * d;
  const int n = seqs * s * ld;
  auto q = Random(n, 31), k = Random(n, 32), v = Random(n, 33);
  std::vector<float> probs(seqs * heads * s * s), out(n);
  Attention(q.data(), k.data(), v.data(), seqs, s, heads, d, probs.data(),
            out.data());
  double worst = 0;
  for (int b = 0; b < seqs; ++b) {
    for (int hd = 0; hd < heads; ++hd) {
      for (int i = 0; i < s; ++i) {
        std::vector<double> p(s, 0.0);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c) {
            dot += double(q[(b * s + i) * ld + hd * d + c]) *
                   k[(b * s + j) * ld + hd * d + c];
          }
          p[j] = dot / std::sqrt(double(d));
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j <= i; ++j) sum += p[j] = std::exp(p[j] - mx);
        const float* got = &probs[((b * heads + hd) * s + i) * s];
        for (int j = 0; j < s; ++j) {
          const double want = j <= i ? p[j] / sum : 0.0;
          worst = std::max(worst, std::abs(got[j] - want));
        }
        for (int c = 0; c < d; ++c) {
          double want = 0;
          for (int j = 0; j <= i; ++j) {
            want += p[j] / sum * v[(b * s + j) * ld + hd * d + c];
          }
          worst = std::max(worst,
                           std::abs(out[(b * s + i) * ld + hd * d + c] - want));
        }
      }
    }
  }
  EXPECT_LT(worst, 1e-5);
}

// The vectorized AdamW pass against the update written out per element
// (Loshchilov & Hutter 2019, Algorithm 2), on runs with and without decay
// and a length that is not a multiple of the lanes.
TEST(OpsTest, AdamWMatchesScalarUpdate) {
  const size_t n = 1003;
  auto w = Random(n, 41), g = Random(n, 42), m = Random(n, 43, 0.1f),
       v = Random(n, 44, 0.1f);
  for (auto& x : v) x = std::abs(x);
  std::vector<AdamSegment> segs = {{0, 500, true, true},
                                   {500, 777, false, true},
                                   {777, n, true, false}};
  AdamWStep st;
  st.coef = 0.7f;
  st.lr = 1e-3f;
  st.weight_decay = 0.1f;
  st.bc1 = 0.19f;
  st.bc2 = 0.0975f;
  auto w2 = w, m2 = m, v2 = v;
  double want_sq = 0;
  for (const auto& sg : segs) {
    for (size_t i = sg.begin; i < sg.end; ++i) {
      if (sg.counted) want_sq += double(g[i]) * g[i];
      const float gi = g[i] * st.coef;
      m2[i] = st.beta1 * m2[i] + (1 - st.beta1) * gi;
      v2[i] = st.beta2 * v2[i] + (1 - st.beta2) * gi * gi;
      const float u = (m2[i] / st.bc1) / (std::sqrt(v2[i] / st.bc2) + st.eps);
      w2[i] -= st.lr * (u + (sg.decay ? st.weight_decay * w2[i] : 0.0f));
    }
  }
  EXPECT_NEAR(SquaredNorm(g.data(), segs), want_sq, 1e-9 * want_sq);
  ASSERT_TRUE(AdamWUpdate(st, segs, g.data(), m.data(), v.data(), w.data()));
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(w[i], w2[i], 1e-6f * std::max(1.0f, std::abs(w2[i]))) << i;
    EXPECT_NEAR(m[i], m2[i], 1e-6f) << i;
    EXPECT_NEAR(v[i], v2[i], 1e-6f) << i;
  }
  w[5] = INFINITY;
  EXPECT_FALSE(AdamWUpdate(st, segs, g.data(), m.data(), v.data(), w.data()));
}

TEST(OpsTest, ThreadsPerRankRule) {
  unsetenv("STRATA_THREADS_PER_RANK");
  const int cpus = AffinityCpus();
  EXPECT_GE(cpus, 1);
  EXPECT_EQ(ThreadsPerRank(1), cpus);
  EXPECT_EQ(ThreadsPerRank(cpus * 4), 1);  // never below 1
  setenv("STRATA_THREADS_PER_RANK", "3", 1);
  EXPECT_EQ(ThreadsPerRank(8), 3);
  setenv("STRATA_THREADS_PER_RANK", "zero", 1);  // not a number: the rule
  EXPECT_EQ(ThreadsPerRank(1), cpus);
  unsetenv("STRATA_THREADS_PER_RANK");
}

TEST(OpsTest, TiedCrossEntropyBackward) {
  const int t = 6, h = 4, vocab = 11;
  auto x = Random(t * h, 15), wte = Random(vocab * h, 16);
  std::vector<int32_t> targets = {0, 3, 10, 5, 5, 1};
  auto loss = [&] {
    return CrossEntropyTied(x.data(), wte.data(), targets.data(), t, h, vocab,
                            1.0f, nullptr, nullptr);
  };
  std::vector<float> dx(t * h), dwte(vocab * h, 0);
  CrossEntropyTied(x.data(), wte.data(), targets.data(), t, h, vocab, 1.0f,
                   dx.data(), dwte.data());
  CheckGradient(x, dx, loss, "dx");
  CheckGradient(wte, dwte, loss, "dwte");
}

TEST(OpsTest, TransformerBlockBackward) {
  ModelConfig m{"t", 16, 4, 8, 2, 1};
  Parallel p;
  StageParams params(m, p);
  params.Init(7);
  // Non-trivial LayerNorm and bias values.
  for (auto& w : params.w) w += 0.05f * std::sin(&w - params.w.data());
  BlockDims dims{2, 4, 8, 2, 4, 32};
  const int th = dims.tokens() * dims.h;
  auto x = Random(th, 17), probe = Random(th, 18);
  const LayerParams& lp = params.layers[0];
  BlockActs acts;
  auto loss = [&] {
    std::vector<float> y(th);
    EXPECT_TRUE(BlockForward(params, nullptr, lp, dims, nullptr, x.data(), &acts,
                             y.data()).ok());
    return Dot(y, probe);
  };
  loss();
  std::fill(params.g.begin(), params.g.end(), 0.0f);
  std::vector<float> dx(th);
  ASSERT_TRUE(BlockBackward(params, nullptr, lp, dims, nullptr, acts, probe.data(),
                            dx.data()).ok());
  CheckGradient(x, dx, loss, "block dx");
  std::vector<float> dw(params.g.begin(), params.g.end());
  CheckGradient(params.w, dw, loss, "block parameters");
}

}  // namespace
}  // namespace strata::train
