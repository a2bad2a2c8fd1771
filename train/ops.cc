#include "train/ops.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace strata::train {
namespace {
constexpr float kLayerNormEps = 1e-5f;        // GPT-2 / PyTorch default
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;            // Hendrycks & Gimpel

// e^x in float without a libm call, so loops over it vectorize: x = k ln2 +
// r with |r| <= ln2/2 (Cody-Waite: ln2 split into a high part exact in
// float, 0.693145751953125, and the low remainder), e^r by its Taylor
// series to r^7/7! (relative error below 2e-7 on that interval), 2^k put
// into the exponent bits. k is rounded with the 1.5 x 2^23 trick, which
// needs no rounding instruction beyond SSE2. Inputs are clamped to
// [-87, 88], where e^x is a normal float.
inline float ExpF(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float shifted = x * kLog2e + kRound;
  const float kf = shifted - kRound;
  const int32_t k =
      std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  float r = x - kf * 0.693145751953125f;
  r -= kf * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((k + 127) << 23);
}
}  // namespace

namespace {
// Profiling state; the bench enables it from one thread (ranks as threads
// share it, hence the mutex).
std::atomic<bool> g_profile{false};
std::mutex g_profile_mu;
std::map<GemmShape, GemmTotals> g_totals;
}  // namespace

void EnableGemmProfile(bool on) { g_profile = on; }

std::map<GemmShape, GemmTotals> TakeGemmProfile() {
  std::lock_guard<std::mutex> lock(g_profile_mu);
  return std::exchange(g_totals, {});
}

void Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const bool profile = g_profile.load(std::memory_order_relaxed);
  const auto t0 = profile ? std::chrono::steady_clock::now()
                          : std::chrono::steady_clock::time_point();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, beta, c, ldc);
  if (!profile) return;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::lock_guard<std::mutex> lock(g_profile_mu);
  GemmTotals& t = g_totals[{trans_a, trans_b, m, n, k}];
  ++t.calls;
  t.seconds += s;
}

void Linear(const float* x, const float* w, const float* bias, int t, int in,
            int out, float* y) {
  Gemm(false, false, t, out, in, x, in, w, out, 0.0f, y, out);
  if (bias == nullptr) return;
  for (int i = 0; i < t; ++i) {
    float* row = y + static_cast<int64_t>(i) * out;
    for (int j = 0; j < out; ++j) row[j] += bias[j];
  }
}

void LinearBackward(const float* x, const float* w, const float* dy, int t,
                    int in, int out, float* dx, float* dw, float* db) {
  if (dx != nullptr) Gemm(false, true, t, in, out, dy, out, w, out, 0.0f, dx, in);
  if (dw != nullptr) Gemm(true, false, in, out, t, x, in, dy, out, 1.0f, dw, out);
  if (db != nullptr) {
    for (int i = 0; i < t; ++i) {
      const float* row = dy + static_cast<int64_t>(i) * out;
      for (int j = 0; j < out; ++j) db[j] += row[j];
    }
  }
}

void LayerNorm(const float* x, const float* g, const float* b, int t, int h,
               float* y, float* mean, float* rstd) {
  for (int i = 0; i < t; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * h;
    float* yi = y + static_cast<int64_t>(i) * h;
    double m = 0, v = 0;
    for (int j = 0; j < h; ++j) m += xi[j];
    m /= h;
    for (int j = 0; j < h; ++j) v += (xi[j] - m) * (xi[j] - m);
    v /= h;
    const float r = 1.0f / std::sqrt(static_cast<float>(v) + kLayerNormEps);
    for (int j = 0; j < h; ++j) {
      yi[j] = (xi[j] - static_cast<float>(m)) * r * g[j] + b[j];
    }
    mean[i] = static_cast<float>(m);
    rstd[i] = r;
  }
}

void LayerNormBackward(const float* x, const float* g, const float* mean,
                       const float* rstd, const float* dy, int t, int h,
                       float* dx, float* dg, float* db) {
  for (int i = 0; i < t; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * h;
    const float* dyi = dy + static_cast<int64_t>(i) * h;
    float* dxi = dx + static_cast<int64_t>(i) * h;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int j = 0; j < h; ++j) {
      const float xhat = (xi[j] - mean[i]) * rstd[i];
      const float dxhat = dyi[j] * g[j];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      dg[j] += dyi[j] * xhat;
      db[j] += dyi[j];
    }
    const float a = static_cast<float>(sum_dxhat / h);
    const float c = static_cast<float>(sum_dxhat_xhat / h);
    for (int j = 0; j < h; ++j) {
      const float xhat = (xi[j] - mean[i]) * rstd[i];
      dxi[j] = rstd[i] * (dyi[j] * g[j] - a - xhat * c);
    }
  }
}

// GeLU, tanh form: 0.5 u (1 + tanh z) with z = c (u + a u^3). Since
// 0.5 (1 + tanh z) = sigmoid(2z), this is u / (1 + e^{-2z}): one exp, no
// cancellation for negative u, and the loop vectorizes (ExpF).
void Gelu(const float* x, int n, float* y) {
  for (int i = 0; i < n; ++i) {
    const float u = x[i];
    const float z = kGeluC * (u + kGeluA * u * u * u);
    y[i] = u / (1.0f + ExpF(-2.0f * z));
  }
}

// d/du [u s(2z)] = s + u s (1 - s) 2 z' with s = sigmoid(2z) and
// z' = c (1 + 3 a u^2) (the same as the tanh form's derivative, since
// 1 - tanh^2 z = 4 s (1 - s)).
void GeluBackward(const float* x, const float* dy, int n, float* dx) {
  for (int i = 0; i < n; ++i) {
    const float u = x[i];
    const float z = kGeluC * (u + kGeluA * u * u * u);
    const float sg = 1.0f / (1.0f + ExpF(-2.0f * z));
    const float dz = kGeluC * (1.0f + 3.0f * kGeluA * u * u);
    dx[i] = dy[i] * (sg + 2.0f * u * sg * (1.0f - sg) * dz);
  }
}

void Attention(const float* q, const float* k, const float* v, int seqs,
               int s, int heads, int d, float* probs, float* out) {
  const int ld = heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int n = 0; n < seqs; ++n) {
    for (int hd = 0; hd < heads; ++hd) {
      const int64_t base = static_cast<int64_t>(n) * s * ld + hd * d;
      float* p = probs + (static_cast<int64_t>(n) * heads + hd) * s * s;
      // scores = q k^T (s x s)
      Gemm(false, true, s, s, d, q + base, ld, k + base, ld, 0.0f, p, s);
      for (int i = 0; i < s; ++i) {
        float* row = p + static_cast<int64_t>(i) * s;
        float mx = -INFINITY;
        for (int j = 0; j <= i; ++j) mx = std::max(mx, row[j] * scale);
        double sum = 0;
        for (int j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] * scale - mx);
          sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int j = 0; j <= i; ++j) row[j] *= inv;
        for (int j = i + 1; j < s; ++j) row[j] = 0.0f;  // causal mask
      }
      Gemm(false, false, s, d, s, p, s, v + base, ld, 0.0f, out + base, ld);
    }
  }
}

void AttentionBackward(const float* q, const float* k, const float* v,
                       const float* probs, const float* dout, int seqs, int s,
                       int heads, int d, float* dq, float* dk, float* dv) {
  const int ld = heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> dp(static_cast<size_t>(s) * s);
  for (int n = 0; n < seqs; ++n) {
    for (int hd = 0; hd < heads; ++hd) {
      const int64_t base = static_cast<int64_t>(n) * s * ld + hd * d;
      const float* p = probs + (static_cast<int64_t>(n) * heads + hd) * s * s;
      // dv = p^T dout; dp = dout v^T
      Gemm(true, false, s, d, s, p, s, dout + base, ld, 0.0f, dv + base, ld);
      Gemm(false, true, s, s, d, dout + base, ld, v + base, ld, 0.0f,
           dp.data(), s);
      // softmax backward, then the 1/sqrt(d) scale of the scores.
      for (int i = 0; i < s; ++i) {
        const float* pr = p + static_cast<int64_t>(i) * s;
        float* dr = dp.data() + static_cast<int64_t>(i) * s;
        double dot = 0;
        for (int j = 0; j <= i; ++j) dot += pr[j] * dr[j];
        for (int j = 0; j <= i; ++j) {
          dr[j] = pr[j] * (dr[j] - static_cast<float>(dot)) * scale;
        }
        for (int j = i + 1; j < s; ++j) dr[j] = 0.0f;
      }
      // dq = ds k; dk = ds^T q
      Gemm(false, false, s, d, s, dp.data(), s, k + base, ld, 0.0f, dq + base, ld);
      Gemm(true, false, s, d, s, dp.data(), s, q + base, ld, 0.0f, dk + base, ld);
    }
  }
}

double CrossEntropyTied(const float* x, const float* wte,
                        const int32_t* targets, int t, int h, int vocab,
                        float scale, float* dx, float* dwte) {
  std::vector<float> logits(static_cast<size_t>(t) * vocab);
  Gemm(false, true, t, vocab, h, x, h, wte, h, 0.0f, logits.data(), vocab);
  double loss = 0;
  for (int i = 0; i < t; ++i) {
    float* row = logits.data() + static_cast<int64_t>(i) * vocab;
    float mx = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int j = 0; j < vocab; ++j) sum += std::exp(row[j] - mx);
    const double lse = mx + std::log(sum);
    loss += lse - row[targets[i]];
    if (dx == nullptr) continue;
    for (int j = 0; j < vocab; ++j) {
      row[j] = static_cast<float>(std::exp(row[j] - lse)) * scale;
    }
    row[targets[i]] -= scale;
  }
  if (dx != nullptr) {
    Gemm(false, false, t, h, vocab, logits.data(), vocab, wte, h, 0.0f, dx, h);
    Gemm(true, false, vocab, h, t, logits.data(), vocab, x, h, 1.0f, dwte, h);
  }
  return loss;
}

}  // namespace strata::train
