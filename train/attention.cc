// Causal scaled dot-product attention (Vaswani et al. 2017, eq. 1) of
// ops.h, fused per (sequence, head): no per-head GEMM calls. A head's
// operands are copied once into zero-padded scratch (rows to a multiple of
// 16, head size to a multiple of 16; K and V also transposed), where three
// register-tiled loops of 4 rows x 16 columns do all products. The causal
// mask skips whole 16-key blocks: the 4 query rows from i0 read keys below
// round_up(i0 + 4, 16) only, about half of the s x s work. For the presets
// (s 64, d 40) every operand stays in L1.
//
// Backward (the standard softmax-attention gradients): with P the saved
// probabilities and dO the output gradient, dV = P^T dO, dP = dO V^T,
// dS = P .* (dP - rowsum(P .* dP)) / sqrt(d), dQ = dS K, dK = dS^T Q.
// P and dS are zero above the diagonal, so dV and dK rows j sum over
// query rows i >= j only.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "train/ops.h"
#include "train/vec_math.h"
#include "train/workspace.h"

namespace strata::train {
namespace {

constexpr int kRows = 4;   // rows of a register tile
constexpr int kCols = 16;  // columns of a register tile (two AVX2 vectors)

int RoundUp(int x, int m) { return (x + m - 1) / m * m; }

// Padded sizes of one head: sp rows/keys, dp head columns.
struct HeadDims {
  int s, d, ld, sp, dp;
  HeadDims(int s_, int d_, int ld_)
      : s(s_), d(d_), ld(ld_), sp(RoundUp(s_, kCols)), dp(RoundUp(d_, kCols)) {}
};

// dst[i * dp + c] = scale * src[i * ld + c] for i < s, c < d; zero padding.
STRATA_INLINE void CopyRows(const float* src, const HeadDims& h, float scale,
                            float* dst) {
  std::memset(dst, 0, sizeof(float) * h.sp * h.dp);
  for (int i = 0; i < h.s; ++i) {
    const float* r = src + static_cast<int64_t>(i) * h.ld;
    for (int c = 0; c < h.d; ++c) dst[i * h.dp + c] = scale * r[c];
  }
}

// dst[c * sp + j] = src[j * ld + c] (transpose), zero padding.
STRATA_INLINE void CopyTransposed(const float* src, const HeadDims& h,
                                  float* dst) {
  std::memset(dst, 0, sizeof(float) * h.d * h.sp);
  for (int j = 0; j < h.s; ++j) {
    const float* r = src + static_cast<int64_t>(j) * h.ld;
    for (int c = 0; c < h.d; ++c) dst[c * h.sp + j] = r[c];
  }
}

// Eight floats in a GCC vector: one AVX2 register in the x86-64-v3 clone,
// two SSE registers in the baseline one. Tiles keep kRows x 2 of them as
// accumulators (16 of the v3 clone's registers: 8 sums, the rest loads).
// The vectors never cross a call boundary (every helper is inlined), so
// GCC's note that their ABI differs between the clones does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float V8 __attribute__((vector_size(32)));
STRATA_INLINE V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
STRATA_INLINE void Store(float* p, V8 v) { std::memcpy(p, &v, sizeof(v)); }

// C[i0 + r][j] = sum_k A[i0 + r][k] BT[k][j] for r < kRows, j < jend
// (a multiple of kCols); A rows of stride dp, BT rows and C rows of
// stride sp.
STRATA_INLINE void TileABt(const float* a, const float* bt, const HeadDims& h,
                           int i0, int jend, float* c) {
  for (int j0 = 0; j0 < jend; j0 += kCols) {
    V8 acc[kRows][2] = {};
    for (int k = 0; k < h.d; ++k) {
      const V8 b0 = Load(bt + k * h.sp + j0), b1 = Load(bt + k * h.sp + j0 + 8);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const float x = a[(i0 + r) * h.dp + k];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      Store(c + (i0 + r) * h.sp + j0, acc[r][0]);
      Store(c + (i0 + r) * h.sp + j0 + 8, acc[r][1]);
    }
  }
}

// Stores rows r < kRows of an accumulator tile at out[(row0 + r) * ld + c0],
// the first min(kCols, d - c0) columns of the rows below s.
STRATA_INLINE void StoreTile(V8 (&acc)[kRows][2], const HeadDims& h, int row0,
                             int c0, float* out) {
  const int n = std::min(kCols, h.d - c0);
  for (int r = 0; r < kRows && row0 + r < h.s; ++r) {
    float t[kCols];
    Store(t, acc[r][0]);
    Store(t + 8, acc[r][1]);
    std::memcpy(out + static_cast<int64_t>(row0 + r) * h.ld + c0, t,
                sizeof(float) * n);
  }
}

// out[i0 + r][:d] = sum_{j < jend} M[i0 + r][j] B[j][:] (M rows of stride
// sp, B of dp, out of ld).
STRATA_INLINE void TileMB(const float* m, const float* b, const HeadDims& h,
                          int i0, int jend, float* out) {
  for (int c0 = 0; c0 < h.dp; c0 += kCols) {
    V8 acc[kRows][2] = {};
    for (int j = 0; j < jend; ++j) {
      const V8 b0 = Load(b + j * h.dp + c0), b1 = Load(b + j * h.dp + c0 + 8);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const float x = m[(i0 + r) * h.sp + j];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
    StoreTile(acc, h, i0, c0, out);
  }
}

// out[j0 + r][:d] = sum_{i >= j0} M[i][j0 + r] B[i][:] (M is zero above
// its diagonal, so rows i < j0 would add nothing).
STRATA_INLINE void TileMtB(const float* m, const float* b, const HeadDims& h,
                           int j0, float* out) {
  for (int c0 = 0; c0 < h.dp; c0 += kCols) {
    V8 acc[kRows][2] = {};
    for (int i = j0; i < h.sp; ++i) {
      const V8 b0 = Load(b + i * h.dp + c0), b1 = Load(b + i * h.dp + c0 + 8);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const float x = m[i * h.sp + j0 + r];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
    StoreTile(acc, h, j0, c0, out);
  }
}

// Keys the query rows [i0, i0 + kRows) need, rounded up to a tile.
int KeyEnd(int i0, const HeadDims& h) {
  return std::min(h.sp, RoundUp(i0 + kRows, kCols));
}

// sum_j a[j] b[j] over j < n in kLanes lanes (a serial float sum would
// not vectorize: its order is fixed without -ffast-math).
STRATA_INLINE float Dot(const float* a, const float* b, int n) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[j + l] * b[j + l];
  }
  float s = 0;
  for (; j < n; ++j) s += a[j] * b[j];
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  return s;
}

// In-place softmax of row[0, len); row[len, n) = 0.
STRATA_INLINE void SoftmaxRow(float* row, int len, int n) {
  float sum = 0;
  ExpMinusMax(row, len, &sum);
  const float inv = 1.0f / sum;
  for (int j = 0; j < len; ++j) row[j] *= inv;
  for (int j = len; j < n; ++j) row[j] = 0.0f;
}

// One (sequence, head) of the forward: q, k, v and out point at the head's
// first row (row stride ld); p is its s x s block of probabilities.
STRATA_KERNEL
void AttentionHead(const float* q, const float* k, const float* v,
                   const HeadDims& h, float scale, float* qs, float* kt,
                   float* vp, float* sc, float* p, float* out) {
  CopyRows(q, h, scale, qs);
  CopyTransposed(k, h, kt);
  CopyRows(v, h, 1.0f, vp);
  std::memset(sc, 0, sizeof(float) * h.sp * h.sp);
  for (int i0 = 0; i0 < h.s; i0 += kRows) {
    TileABt(qs, kt, h, i0, KeyEnd(i0, h), sc);
  }
  for (int i = 0; i < h.s; ++i) SoftmaxRow(sc + i * h.sp, i + 1, h.sp);
  for (int i0 = 0; i0 < h.s; i0 += kRows) {
    TileMB(sc, vp, h, i0, KeyEnd(i0, h), out);
  }
  for (int i = 0; i < h.s; ++i) {
    std::memcpy(p + static_cast<int64_t>(i) * h.s, sc + i * h.sp,
                sizeof(float) * h.s);
  }
}

// One (sequence, head) of the backward; pointers as AttentionHead's.
STRATA_KERNEL
void AttentionHeadBackward(const float* q, const float* k, const float* v,
                           const float* p, const float* dout, const HeadDims& h,
                           float scale, float* dop, float* vt, float* kp,
                           float* qp, float* pp, float* ds, float* dq,
                           float* dk, float* dv) {
  CopyRows(dout, h, 1.0f, dop);
  CopyTransposed(v, h, vt);
  CopyRows(k, h, 1.0f, kp);
  CopyRows(q, h, 1.0f, qp);
  std::memset(pp, 0, sizeof(float) * h.sp * h.sp);
  for (int i = 0; i < h.s; ++i) {
    std::memcpy(pp + i * h.sp, p + static_cast<int64_t>(i) * h.s,
                sizeof(float) * h.s);
  }
  // dP = dO V^T on the unmasked tiles, then dS row by row (0 above the
  // diagonal and in the padding).
  for (int i0 = 0; i0 < h.s; i0 += kRows) {
    TileABt(dop, vt, h, i0, KeyEnd(i0, h), ds);
  }
  for (int i = 0; i < h.sp; ++i) {
    float* dr = ds + i * h.sp;
    const float* pr = pp + i * h.sp;
    const int len = i < h.s ? i + 1 : 0;
    const float dot = Dot(pr, dr, len);
    for (int j = 0; j < len; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
    for (int j = len; j < h.sp; ++j) dr[j] = 0.0f;
  }
  for (int i0 = 0; i0 < h.s; i0 += kRows) {
    TileMB(ds, kp, h, i0, KeyEnd(i0, h), dq);  // dQ = dS K
  }
  for (int j0 = 0; j0 < h.s; j0 += kRows) {
    TileMtB(ds, qp, h, j0, dk);   // dK = dS^T Q
    TileMtB(pp, dop, h, j0, dv);  // dV = P^T dO
  }
}

}  // namespace

void Attention(const float* q, const float* k, const float* v, int seqs, int s,
               int heads, int d, float* probs, float* out) {
  const HeadDims h(s, d, heads * d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const size_t rows = static_cast<size_t>(h.sp) * h.dp;
  float* qs = Scratch(Slot::kAttnA, rows);
  float* kt = Scratch(Slot::kAttnB, rows);
  float* vp = Scratch(Slot::kAttnC, rows);
  float* sc = Scratch(Slot::kAttnS, static_cast<size_t>(h.sp) * h.sp);
  for (int n = 0; n < seqs; ++n) {
    for (int hd = 0; hd < heads; ++hd) {
      const int64_t base = static_cast<int64_t>(n) * s * h.ld + hd * d;
      AttentionHead(q + base, k + base, v + base, h, scale, qs, kt, vp, sc,
                    probs + (static_cast<int64_t>(n) * heads + hd) * s * s,
                    out + base);
    }
  }
}

void AttentionBackward(const float* q, const float* k, const float* v,
                       const float* probs, const float* dout, int seqs, int s,
                       int heads, int d, float* dq, float* dk, float* dv) {
  const HeadDims h(s, d, heads * d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const size_t rows = static_cast<size_t>(h.sp) * h.dp;
  const size_t square = static_cast<size_t>(h.sp) * h.sp;
  float* dop = Scratch(Slot::kAttnA, rows);
  float* vt = Scratch(Slot::kAttnB, rows);
  float* kp = Scratch(Slot::kAttnC, rows);
  float* qp = Scratch(Slot::kAttnD, rows);
  float* pp = Scratch(Slot::kAttnS, square);
  float* ds = Scratch(Slot::kAttnDs, square);
  for (int n = 0; n < seqs; ++n) {
    for (int hd = 0; hd < heads; ++hd) {
      const int64_t base = static_cast<int64_t>(n) * s * h.ld + hd * d;
      AttentionHeadBackward(
          q + base, k + base, v + base,
          probs + (static_cast<int64_t>(n) * heads + hd) * s * s, dout + base,
          h, scale, dop, vt, kp, qp, pp, ds, dq + base, dk + base, dv + base);
    }
  }
}

}  // namespace strata::train
