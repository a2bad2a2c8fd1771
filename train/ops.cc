#include "train/ops.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common/panel_gemm.h"
#include "train/vec_math.h"
#include "train/workspace.h"

namespace strata::train {
namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;            // Hendrycks & Gimpel
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

namespace {
// Runs `gemm`, timing it under `shape` while the profile is enabled.
template <typename Fn>
void Profiled(const GemmShape& shape, Fn&& gemm) {
  if (!g_profile.load(std::memory_order_relaxed)) {
    gemm();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  gemm();
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::lock_guard<std::mutex> lock(g_profile_mu);
  GemmTotals& t = g_totals[shape];
  ++t.calls;
  t.seconds += s;
}
}  // namespace

void Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  Profiled({trans_a, trans_b, m, n, k}, [&] {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
                ldb, beta, c, ldc);
  });
}

namespace {

// C[m, n] = beta C + A B, where B is given as a weight `b` (B = b, or b^T
// with trans_b; row stride ldb) and, when packed, as its panels: PanelGemm
// on the panels, else OpenBLAS on `b`. Profiled under the same shape.
void WeightGemm(bool trans_b, int m, int n, int k, const float* a, int lda,
                const float* b, int ldb, const float* panels, float beta,
                float* c, int ldc) {
  if (panels == nullptr) {
    Gemm(false, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  Profiled({false, trans_b, m, n, k},
           [&] { PanelGemm(m, n, k, a, lda, panels, beta, c, ldc); });
}

// C[m, n] += A^T B with A [k, m], B [k, n] row-major (a weight gradient):
// GemmTransA where the caller's weights are packed (strata's kernels are
// in use), else OpenBLAS.
void GradientGemm(bool packed, int m, int n, int k, const float* a, int lda,
                  const float* b, int ldb, float* c, int ldc) {
  if (!packed) {
    Gemm(true, false, m, n, k, a, lda, b, ldb, 1.0f, c, ldc);
    return;
  }
  Profiled({true, false, m, n, k},
           [&] { GemmTransA(m, n, k, a, lda, b, ldb, 1.0f, c, ldc); });
}

}  // namespace

STRATA_KERNEL
void AddBias(float* y, const float* bias, int t, int n) {
  for (int i = 0; i < t; ++i) {
    float* row = y + static_cast<int64_t>(i) * n;
    for (int j = 0; j < n; ++j) row[j] += bias[j];
  }
}

STRATA_KERNEL
void AddResidual(float* y, const float* x, const float* bias, int t, int n) {
  for (int i = 0; i < t; ++i) {
    const int64_t o = static_cast<int64_t>(i) * n;
    for (int j = 0; j < n; ++j) y[o + j] += x[o + j] + bias[j];
  }
}

STRATA_KERNEL
void AddColumnSums(const float* x, int t, int n, float* sums) {
  for (int i = 0; i < t; ++i) {
    const float* row = x + static_cast<int64_t>(i) * n;
    for (int j = 0; j < n; ++j) sums[j] += row[j];
  }
}

STRATA_KERNEL
void AddInto(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void Linear(const float* x, const float* w, const float* bias, int t, int in,
            int out, float* y, const float* w_panels) {
  WeightGemm(false, t, out, in, x, in, w, out, w_panels, 0.0f, y, out);
  if (bias != nullptr) AddBias(y, bias, t, out);
}

void LinearBackward(const float* x, const float* w, const float* dy, int t,
                    int in, int out, float* dx, float* dw, float* db,
                    bool accumulate_dx, const float* wt_panels) {
  if (dx != nullptr) {
    WeightGemm(true, t, in, out, dy, out, w, out, wt_panels,
               accumulate_dx ? 1.0f : 0.0f, dx, in);
  }
  if (dw != nullptr) {
    GradientGemm(wt_panels != nullptr, in, out, t, x, in, dy, out, dw, out);
  }
  if (db != nullptr) AddColumnSums(dy, t, out, db);
}

// GeLU, tanh form: 0.5 u (1 + tanh z) with z = c (u + a u^3). Since
// 0.5 (1 + tanh z) = sigmoid(2z), this is u / (1 + e^{-2z}): one exp, no
// cancellation for negative u, and the loop vectorizes (ExpF).
STRATA_KERNEL
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
STRATA_KERNEL
void GeluBackward(const float* x, const float* dy, int n, float* dx) {
  for (int i = 0; i < n; ++i) {
    const float u = x[i];
    const float z = kGeluC * (u + kGeluA * u * u * u);
    const float sg = 1.0f / (1.0f + ExpF(-2.0f * z));
    const float dz = kGeluC * (1.0f + 3.0f * kGeluA * u * u);
    dx[i] = dy[i] * (sg + 2.0f * u * sg * (1.0f - sg) * dz);
  }
}

namespace {

// One row of logits: returns log-sum-exp and leaves e^(row - max) in row,
// their sum in *sum.
STRATA_KERNEL
float ExpRow(float* row, int n, float* sum) {
  const float mx = ExpMinusMax(row, n, sum);
  return mx + std::log(*sum);
}

}  // namespace

// Softmax cross-entropy: loss_i = lse(logits_i) - logits_i[target_i],
// dlogits_i = scale (softmax(logits_i) - onehot(target_i)).
double CrossEntropyTied(const float* x, const float* wte,
                        const int32_t* targets, int t, int h, int vocab,
                        float scale, float* dx, float* dwte,
                        const float* w_panels, const float* wt_panels) {
  float* logits = Scratch(Slot::kLogits, static_cast<size_t>(t) * vocab);
  WeightGemm(true, t, vocab, h, x, h, wte, h, w_panels, 0.0f, logits, vocab);
  double loss = 0;
  for (int i = 0; i < t; ++i) {
    float* row = logits + static_cast<int64_t>(i) * vocab;
    const float target_logit = row[targets[i]];
    float sum = 0;
    const float lse = ExpRow(row, vocab, &sum);
    loss += static_cast<double>(lse) - target_logit;
    if (dx == nullptr) continue;
    const float k = scale / sum;
    for (int j = 0; j < vocab; ++j) row[j] *= k;
    row[targets[i]] -= scale;
  }
  if (dx != nullptr) {
    WeightGemm(false, t, h, vocab, logits, vocab, wte, h, wt_panels, 0.0f, dx,
               h);
    GradientGemm(wt_panels != nullptr, vocab, h, t, logits, vocab, x, h, dwte,
                 h);
  }
  return loss;
}

}  // namespace strata::train
