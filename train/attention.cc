// Causal scaled dot-product attention (Vaswani et al. 2017, eq. 1) of
// ops.h, fused per head: no per-head GEMM calls. For each (sequence,
// head), K (forward) or V (backward) is transposed once into a d x s
// scratch so that a row of scores is a sum of d vector updates over the
// keys, and row i touches only keys j <= i: the causal mask is never
// computed, which halves the work of a full s x s product. All operands of
// one head (q, k, v, dout rows of d floats; s x s probabilities) stay in L1
// for the sizes of the presets (s 64, d 40: 10 KiB per operand).
//
// Backward (the standard softmax-attention gradients): with P the saved
// probabilities and dO the output gradient, dV = P^T dO, dP = dO V^T,
// dS = P .* (dP - rowsum(P .* dP)) / sqrt(d), dQ = dS K, dK = dS^T Q.
#include <cmath>
#include <cstdint>

#include "train/ops.h"
#include "train/vec_math.h"
#include "train/workspace.h"

namespace strata::train {
namespace {

// t[c * s + j] = x[j * ld + c] for j < s, c < d.
STRATA_INLINE void Transpose(const float* x, int ld, int s, int d, float* t) {
  for (int j = 0; j < s; ++j) {
    for (int c = 0; c < d; ++c) t[c * s + j] = x[static_cast<int64_t>(j) * ld + c];
  }
}

// row[j] = sum_c a[c] * t[c * s + j] for j < n.
STRATA_INLINE void RowTimesT(const float* a, const float* t, int s, int d, int n,
               float* row) {
  for (int j = 0; j < n; ++j) row[j] = 0.0f;
  for (int c = 0; c < d; ++c) {
    const float ac = a[c];
    const float* tc = t + static_cast<int64_t>(c) * s;
    for (int j = 0; j < n; ++j) row[j] += ac * tc[j];
  }
}

STRATA_INLINE float RowMax(const float* x, int n) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = -INFINITY;
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], x[j + l]);
  }
  float m = -INFINITY;
  for (int l = 0; l < kLanes; ++l) m = std::max(m, lanes[l]);
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// x[j] = e^(x[j] - mx); returns the sum.
STRATA_INLINE float ExpShiftSum(float* x, int n, float mx) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      x[j + l] = ExpF(x[j + l] - mx);
      lanes[l] += x[j + l];
    }
  }
  float sum = 0;
  for (; j < n; ++j) {
    x[j] = ExpF(x[j] - mx);
    sum += x[j];
  }
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

STRATA_INLINE float Dot(const float* a, const float* b, int n) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[j + l] * b[j + l];
  }
  float sum = 0;
  for (; j < n; ++j) sum += a[j] * b[j];
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

// y[c] += a * x[c], c < d.
STRATA_INLINE void Axpy(float a, const float* x, int d, float* y) {
  for (int c = 0; c < d; ++c) y[c] += a * x[c];
}

// out_i = sum_{j <= i} p[j] v_j (rows of v with stride ld).
STRATA_INLINE void WeightedRows(const float* p, int n, const float* v, int ld, int d,
                  float* out) {
  for (int c = 0; c < d; ++c) out[c] = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float pj = p[j];
    const float* vj = v + static_cast<int64_t>(j) * ld;
    for (int c = 0; c < d; ++c) out[c] += pj * vj[c];
  }
}

STRATA_INLINE void Scale(float* x, int n, float a) {
  for (int j = 0; j < n; ++j) x[j] *= a;
}

// One (sequence, head) of the forward: q, k, v and out point at the head's
// first row (row stride ld); p is its s x s block of probabilities.
STRATA_KERNEL
void AttentionHead(const float* q, const float* k, const float* v, int s,
                   int ld, int d, float scale, float* kt, float* qs, float* p,
                   float* out) {
  Transpose(k, ld, s, d, kt);
  for (int i = 0; i < s; ++i) {
    const int64_t ri = static_cast<int64_t>(i) * ld;
    float* row = p + static_cast<int64_t>(i) * s;
    const int len = i + 1;  // keys j <= i; the rest is masked
    for (int c = 0; c < d; ++c) qs[c] = q[ri + c] * scale;
    RowTimesT(qs, kt, s, d, len, row);
    const float mx = RowMax(row, len);
    const float sum = ExpShiftSum(row, len, mx);
    Scale(row, len, 1.0f / sum);
    for (int j = len; j < s; ++j) row[j] = 0.0f;
    WeightedRows(row, len, v, ld, d, out + ri);
  }
}

// One (sequence, head) of the backward; pointers as AttentionHead's, ds a
// scratch row of s floats.
STRATA_KERNEL
void AttentionHeadBackward(const float* q, const float* k, const float* v,
                           const float* p, const float* dout, int s, int ld,
                           int d, float scale, float* vt, float* ds, float* dq,
                           float* dk, float* dv) {
  Transpose(v, ld, s, d, vt);
  for (int j = 0; j < s; ++j) {
    for (int c = 0; c < d; ++c) {
      dk[static_cast<int64_t>(j) * ld + c] = 0.0f;
      dv[static_cast<int64_t>(j) * ld + c] = 0.0f;
    }
  }
  for (int i = 0; i < s; ++i) {
    const int64_t ri = static_cast<int64_t>(i) * ld;
    const float* pr = p + static_cast<int64_t>(i) * s;
    const int len = i + 1;
    // dP row i = dO_i V^T over the unmasked keys, then dS.
    RowTimesT(dout + ri, vt, s, d, len, ds);
    const float dot = Dot(pr, ds, len);
    for (int j = 0; j < len; ++j) ds[j] = pr[j] * (ds[j] - dot) * scale;
    // dQ_i = sum_j dS_ij K_j; dK_j += dS_ij Q_i; dV_j += P_ij dO_i.
    WeightedRows(ds, len, k, ld, d, dq + ri);
    for (int j = 0; j < len; ++j) {
      const int64_t rj = static_cast<int64_t>(j) * ld;
      Axpy(ds[j], q + ri, d, dk + rj);
      Axpy(pr[j], dout + ri, d, dv + rj);
    }
  }
}

}  // namespace

void Attention(const float* q, const float* k, const float* v, int seqs,
               int s, int heads, int d, float* probs, float* out) {
  const int ld = heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* kt = Scratch(Slot::kAttnT, static_cast<size_t>(d) * s);
  float* qs = Scratch(Slot::kAttnRow, d);
  for (int n = 0; n < seqs; ++n) {
    for (int hd = 0; hd < heads; ++hd) {
      const int64_t base = static_cast<int64_t>(n) * s * ld + hd * d;
      AttentionHead(q + base, k + base, v + base, s, ld, d, scale, kt, qs,
                    probs + (static_cast<int64_t>(n) * heads + hd) * s * s,
                    out + base);
    }
  }
}

void AttentionBackward(const float* q, const float* k, const float* v,
                       const float* probs, const float* dout, int seqs, int s,
                       int heads, int d, float* dq, float* dk, float* dv) {
  const int ld = heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* vt = Scratch(Slot::kAttnT, static_cast<size_t>(d) * s);
  float* ds = Scratch(Slot::kAttnRow, s);
  for (int n = 0; n < seqs; ++n) {
    for (int hd = 0; hd < heads; ++hd) {
      const int64_t base = static_cast<int64_t>(n) * s * ld + hd * d;
      AttentionHeadBackward(
          q + base, k + base, v + base,
          probs + (static_cast<int64_t>(n) * heads + hd) * s * s, dout + base,
          s, ld, d, scale, vt, ds, dq + base, dk + base, dv + base);
    }
  }
}

}  // namespace strata::train
