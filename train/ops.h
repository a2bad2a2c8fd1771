// fp32 kernels of the reference trainer, forward and hand-written
// backward, on row-major matrices. The GEMMs run on strata's kernels
// (common/panel_gemm.h) when the caller passes the weight's panels (the
// trainer packs them once per step, weight_panels.h), else on OpenBLAS
// (cblas_sgemm); attention is a fused per-head kernel (attention.cc),
// LayerNorm, GeLU, softmax and the element-wise passes are loops that
// vectorize, built for AVX2+FMA and for baseline x86-64 and chosen at load
// time (vec_math.h). No function allocates once its per-thread scratch
// (workspace.h) has grown to the step's sizes. Backward functions
// *accumulate* into parameter gradients (+=) and *overwrite* input
// gradients unless noted.
// Formulas: GPT-2 (Radford et al. 2019) block with pre-LayerNorm, tanh GeLU
// (Hendrycks & Gimpel 2016), LayerNorm (Ba et al. 2016), scaled dot-product
// causal attention (Vaswani et al. 2017). Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace strata::train {

// Optional accounting of every Gemm call by shape (strata-bench train):
// while enabled, calls are timed and summed per (trans_a, trans_b, m, n, k).
struct GemmShape {
  bool trans_a, trans_b;
  int m, n, k;
  auto operator<=>(const GemmShape&) const = default;
};
struct GemmTotals {
  int64_t calls = 0;
  double seconds = 0;
};
void EnableGemmProfile(bool on);
std::map<GemmShape, GemmTotals> TakeGemmProfile();

// C[m,n] (+)= A[m,k] * B[k,n] with optional transposes (op(A) is m x k,
// op(B) is k x n); lda/ldb/ldc are row strides. beta 0 overwrites.
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

// y[t,:] = x[t,:] @ w + bias (bias may be null). x [T,in], w [in,out].
// With w_panels (w packed by PackPanels, panel_gemm.h) the GEMM reads the
// panels instead of w; the profile counts it under the same shape.
void Linear(const float* x, const float* w, const float* bias, int t, int in,
            int out, float* y, const float* w_panels = nullptr);
// dx = dy @ w^T (dx may be null; += with accumulate_dx); dw += x^T dy;
// db += colsum(dy). With wt_panels (w^T packed) dx is computed from them
// and dw by GemmTransA (panel_gemm.h): strata's kernels, not OpenBLAS's.
void LinearBackward(const float* x, const float* w, const float* dy, int t,
                    int in, int out, float* dx, float* dw, float* db,
                    bool accumulate_dx = false,
                    const float* wt_panels = nullptr);

// Element-wise passes over [t, n] row-major matrices: y[i,j] += bias[j];
// y[i,j] += x[i,j] + bias[j] (a residual plus a replicated bias);
// sums[j] += sum_i x[i,j]; y[i] += x[i].
void AddBias(float* y, const float* bias, int t, int n);
void AddResidual(float* y, const float* x, const float* bias, int t, int n);
void AddColumnSums(const float* x, int t, int n, float* sums);
void AddInto(float* y, const float* x, size_t n);

// LayerNorm over the last dim (eps 1e-5, GPT-2). Saves mean and rstd [T].
void LayerNorm(const float* x, const float* g, const float* b, int t, int h,
               float* y, float* mean, float* rstd);
void LayerNormBackward(const float* x, const float* g, const float* mean,
                       const float* rstd, const float* dy, int t, int h,
                       float* dx, float* dg, float* db);

// GPT-2's tanh approximation.
void Gelu(const float* x, int n, float* y);
void GeluBackward(const float* x, const float* dy, int n, float* dx);

// Causal multi-head attention for `seqs` sequences of `s` tokens over
// `heads` local heads of size `d`. q, k, v, out: [seqs*s, heads*d];
// probs: [seqs, heads, s, s] (saved for backward; masked entries are 0).
// Backward overwrites dq, dk, dv.
void Attention(const float* q, const float* k, const float* v, int seqs, int s,
               int heads, int d, float* probs, float* out);
void AttentionBackward(const float* q, const float* k, const float* v,
                       const float* probs, const float* dout, int seqs, int s,
                       int heads, int d, float* dq, float* dk, float* dv);

// Mean-free cross entropy against a tied embedding: logits = x @ wte^T
// ([T,V]); returns the *sum* of token losses. With dx != null also
// computes dx = scale * dlogits @ wte and dwte += scale * dlogits^T x.
// With the head packed (the head's W is wte^T: w_panels of wte^T,
// wt_panels of wte; weight_panels.h) every GEMM is strata's, as in Linear
// and LinearBackward.
double CrossEntropyTied(const float* x, const float* wte,
                        const int32_t* targets, int t, int h, int vocab,
                        float scale, float* dx, float* dwte,
                        const float* w_panels = nullptr,
                        const float* wt_panels = nullptr);

}  // namespace strata::train
