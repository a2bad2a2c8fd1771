// strata's fp32 GEMM kernels (AVX-512): the trainer's GEMMs, against a
// weight packed once per step instead of once per call (PanelGemm), and
// the weight-gradient GEMM (GemmTransA); split over the calling thread's
// team (SetGemmThreads). The worker probe times PanelGemm as a CPU rank's
// GEMM rate (topology/probe/probe.cc).
//
// OpenBLAS (like every Goto-style BLAS: Goto & van de Geijn 2008, "Anatomy
// of high-performance matrix multiplication", §4) copies the B operand into
// panels of its register tile's width on every call. In training the same
// weight is the B operand of every micro-batch's forward GEMM and, as W^T,
// of every input-gradient GEMM, and it only changes at the optimizer step:
// packing it on each call re-reads it from memory column-strided 2 x
// micro-batches times per step (docs/train.md, "Performance"). Here
// the weight is packed into the same kind of panels once per step and the
// panels are streamed sequentially by an AVX-512 kernel.
//
// Layout of the panels of B [k, n]: ceil(n / 32) panels, panel j holding
// rows p = 0..k-1 of B's columns [32 j, 32 j + 32) contiguously (32 floats
// a row, zeros past column n).
#pragma once

#include <cstddef>

namespace strata {

inline constexpr int kPanelWidth = 32;  // two 16-float AVX-512 vectors

// Floats the panels of a [k, n] operand take.
size_t PanelFloats(int k, int n);

// Packs B [k, n] into `panels`. B is read from `b` with row stride ldb, or,
// with `trans`, as the transpose of a row-major [n, k] matrix at `b` (row
// stride ldb): B[p][j] = b[j * ldb + p].
void PackPanels(const float* b, int ldb, bool trans, int k, int n,
                float* panels);

// True where PanelGemm runs (the CPU has AVX-512F); elsewhere callers use
// Gemm on the unpacked weight.
bool PanelGemmAvailable();

// C[m, n] = beta C + A[m, k] B, with A row-major (row stride lda), B given
// as its panels and beta 0 or 1 (0 overwrites C without reading it).
// Requires PanelGemmAvailable().
void PanelGemm(int m, int n, int k, const float* a, int lda,
               const float* panels, float beta, float* c, int ldc);

// C[m, n] = beta C + A^T B with A [k, m] and B [k, n] both row-major (row
// strides lda, ldb): the weight-gradient GEMM dW += x^T dy, whose operands
// are a micro-batch's activations and change every call. Both are packed
// per call (A^T in slivers of the tile's rows, B one panel at a time, per-
// thread scratch grown once) and multiplied with PanelGemm's register tile.
// Requires PanelGemmAvailable().
void GemmTransA(int m, int n, int k, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc);

// Threads that the calling thread's PanelGemm and GemmTransA calls run on,
// itself included (default 1): a rank's BLAS threads. Their columns of
// panels are split evenly among a team (common/fork_join.h) that the
// calling thread owns from the first call with threads > 1 until it sets 1
// again or exits. Each thread of a process (a rank, when ranks are threads)
// has its own setting and team.
void SetGemmThreads(int threads);
int GemmThreads();

}  // namespace strata
