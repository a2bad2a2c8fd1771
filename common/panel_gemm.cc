#include "common/panel_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/fork_join.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define STRATA_HAVE_PANEL_GEMM 1
#endif

namespace strata {
#ifdef STRATA_HAVE_PANEL_GEMM
namespace {

// Register tile: kRows rows of A times one 32-wide panel, 2 kRows
// accumulators + 2 panel vectors + 1 broadcast of the 32 vector registers.
constexpr int kRows = 14;
// Rows of a panel per pass (kDepth x 32 floats = 16 KiB, a half to a third
// of the 32-48 KiB L1d of the CPUs measured), so that the sub-panel stays
// in L1 while every row block of A streams by (Goto & van de Geijn 2008,
// §6: the B micro-panel lives in L1).
constexpr int kDepth = 128;

#define STRATA_AVX512 __attribute__((target("avx512f")))

// C[R, 32] (masked to its valid columns) = (add ? C : 0) + A[R, k] P[k, 32]
// with P a packed panel (32 floats a row, zero-padded). A(r, q) is
// a[r lda + q] (A row-major), or with kSliverA a[q kRows + r]: A packed
// kRows rows at a time, column by column (SliverA), as a Goto-style BLAS
// packs its A operand, so the R broadcasts of one q are adjacent.
template <int R, bool kSliverA>
STRATA_AVX512 inline void Tile(int k, const float* a, int64_t lda,
                               const float* p, bool add, float* c, int64_t ldc,
                               __mmask16 m0, __mmask16 m1) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
    // C is read back only after the k loop: fetch it meanwhile (a weight
    // gradient accumulated over micro-batches is out of cache by then).
    if (add) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16),
                   _MM_HINT_T0);
    }
  }
  for (int q = 0; q < k; ++q) {
    const __m512 b0 = _mm512_loadu_ps(p + q * kPanelWidth);
    const __m512 b1 = _mm512_loadu_ps(p + q * kPanelWidth + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 av =
          _mm512_set1_ps(kSliverA ? a[q * kRows + r] : a[r * lda + q]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    if (add) {
      acc0[r] = _mm512_add_ps(acc0[r], _mm512_maskz_loadu_ps(m0, cr));
      acc1[r] = _mm512_add_ps(acc1[r], _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    _mm512_mask_storeu_ps(cr, m0, acc0[r]);
    _mm512_mask_storeu_ps(cr + 16, m1, acc1[r]);
  }
}

// Every row of C[rows, 32] in tiles of kRows rows, the last one shorter.
// `a` is A's first row (row-major) or first sliver (kSliverA: slivers
// `sliver` floats apart). `next` (may be null): the `next_floats` of B
// that the next call will read, fetched into L1 a share before each tile.
// Packed weights come from memory once per micro-batch, and the hardware
// prefetchers do not run ahead of a block that is read once per row tile:
// without this a 128 x 320 x 320 GEMM with B cold ran at 187 GFLOP/s
// against 265 with B in cache.
template <bool kSliverA>
STRATA_AVX512 void Tiles(int rows, int k, const float* a, int64_t lda,
                         int64_t sliver, const float* p, bool add, float* c,
                         int64_t ldc, __mmask16 m0, __mmask16 m1,
                         const float* next, int64_t next_floats) {
  constexpr int64_t kLine = 64 / sizeof(float);
  const int64_t lines = next != nullptr ? (next_floats + kLine - 1) / kLine : 0;
  const int tiles = (rows + kRows - 1) / kRows;
  int64_t fetched = 0;
  auto fetch = [&](int tile) {  // lines [fetched, lines (tile + 1) / tiles)
    for (const int64_t to = lines * (tile + 1) / tiles; fetched < to;
         ++fetched) {
      _mm_prefetch(reinterpret_cast<const char*>(next + fetched * kLine),
                   _MM_HINT_T0);
    }
  };
  const int64_t step = kSliverA ? sliver : kRows * lda;
  int i = 0;
  for (; i + kRows <= rows; i += kRows, a += step) {
    fetch(i / kRows);
    Tile<kRows, kSliverA>(k, a, lda, p, add, c + i * ldc, ldc, m0, m1);
  }
  if (i < rows) fetch(tiles - 1);
  c += i * ldc;
  switch (rows - i) {
#define STRATA_TILE_CASE(R)                               \
  case R:                                                 \
    Tile<R, kSliverA>(k, a, lda, p, add, c, ldc, m0, m1); \
    break;
    STRATA_TILE_CASE(1)
    STRATA_TILE_CASE(2)
    STRATA_TILE_CASE(3)
    STRATA_TILE_CASE(4)
    STRATA_TILE_CASE(5)
    STRATA_TILE_CASE(6)
    STRATA_TILE_CASE(7)
    STRATA_TILE_CASE(8)
    STRATA_TILE_CASE(9)
    STRATA_TILE_CASE(10)
    STRATA_TILE_CASE(11)
    STRATA_TILE_CASE(12)
    STRATA_TILE_CASE(13)
#undef STRATA_TILE_CASE
    default:
      break;
  }
}

__mmask16 Mask(int valid) {
  if (valid >= 16) return 0xFFFF;
  if (valid <= 0) return 0;
  return static_cast<__mmask16>((1u << valid) - 1);
}

}  // namespace
#endif  // STRATA_HAVE_PANEL_GEMM

size_t PanelFloats(int k, int n) {
  const size_t panels =
      (static_cast<size_t>(n) + kPanelWidth - 1) / kPanelWidth;
  return panels * static_cast<size_t>(k) * kPanelWidth;
}

void PackPanels(const float* b, int ldb, bool trans, int k, int n,
                float* panels) {
  for (int j0 = 0; j0 < n; j0 += kPanelWidth) {
    const int w = std::min(kPanelWidth, n - j0);
    float* out = panels + static_cast<size_t>(j0) * k;
    if (!trans) {
      for (int q = 0; q < k; ++q) {
        float* row = out + static_cast<size_t>(q) * kPanelWidth;
        std::memcpy(row, b + static_cast<int64_t>(q) * ldb + j0,
                    sizeof(float) * w);
        std::fill(row + w, row + kPanelWidth, 0.0f);
      }
      continue;
    }
    // B[q][j0 + c] = b[(j0 + c) ldb + q]: read `w` rows of b in step.
    for (int q = 0; q < k; ++q) {
      float* row = out + static_cast<size_t>(q) * kPanelWidth;
      for (int c = 0; c < w; ++c)
        row[c] = b[static_cast<int64_t>(j0 + c) * ldb + q];
      std::fill(row + w, row + kPanelWidth, 0.0f);
    }
  }
}

#ifdef STRATA_HAVE_PANEL_GEMM
bool PanelGemmAvailable() {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

namespace {

// The calling thread's team (SetGemmThreads); null: the caller alone.
thread_local std::unique_ptr<ForkJoin> t_team;

// fn(begin, end) over [0, n) on the calling thread's team.
void Split(int n, absl::FunctionRef<void(int, int)> fn) {
  if (t_team != nullptr) {
    t_team->Run(n, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

int Panels(int n) { return (n + kPanelWidth - 1) / kPanelWidth; }

// PanelGemm's columns of panels [p0, p1), every depth block of each panel
// in turn, so that C's tiles stay in L1 between depth blocks.
STRATA_AVX512 void PanelRange(int p0, int p1, int m, int n, int k,
                              const float* a, int lda, const float* panels,
                              float beta, float* c, int ldc) {
  const float* end = panels + PanelFloats(k, n);
  for (int j0 = p0 * kPanelWidth; j0 < std::min(n, p1 * kPanelWidth);
       j0 += kPanelWidth) {
    for (int q0 = 0; q0 < k; q0 += kDepth) {
      const int depth = std::min(kDepth, k - q0);
      const bool add = q0 > 0 || beta != 0.0f;
      const float* p = panels + static_cast<size_t>(j0) * k +
                       static_cast<size_t>(q0) * kPanelWidth;
      // Panels are contiguous: the next block (of this panel or the next
      // one) follows this one.
      const float* next = p + static_cast<size_t>(depth) * kPanelWidth;
      const int64_t left = std::min<int64_t>(end - next, kDepth * kPanelWidth);
      Tiles<false>(m, depth, a + q0, lda, 0, p, add, c + j0, ldc, Mask(n - j0),
                   Mask(n - j0 - 16), left > 0 ? next : nullptr, left);
    }
  }
}

// GemmTransA's slivers [s0, s1) of A^T (layout in GemmTransA).
void PackSlivers(int s0, int s1, int m, int k, const float* a, int lda,
                 float* slivers) {
  for (int s = s0; s < s1; ++s) {
    const int i0 = s * kRows, w = std::min(kRows, m - i0);
    float* out = slivers + static_cast<int64_t>(s) * k * kRows;
    for (int q = 0; q < k; ++q, out += kRows) {
      std::memcpy(out, a + static_cast<int64_t>(q) * lda + i0,
                  sizeof(float) * w);
      std::fill(out + w, out + kRows, 0.0f);
    }
  }
}

// GemmTransA's columns of panels [p0, p1): each depth block of B's panel
// packed into this thread's scratch, then every sliver passes over it.
STRATA_AVX512 void TransARange(int p0, int p1, int m, int n, int k,
                               const float* slivers, const float* b, int ldb,
                               float beta, float* c, int ldc) {
  thread_local std::vector<float> panel;  // grown once per thread
  if (panel.size() < static_cast<size_t>(kDepth) * kPanelWidth)
    panel.resize(static_cast<size_t>(kDepth) * kPanelWidth);
  const int64_t sliver = static_cast<int64_t>(k) * kRows;
  for (int j0 = p0 * kPanelWidth; j0 < std::min(n, p1 * kPanelWidth);
       j0 += kPanelWidth) {
    const int w = std::min(kPanelWidth, n - j0);
    for (int q0 = 0; q0 < k; q0 += kDepth) {
      const int depth = std::min(kDepth, k - q0);
      const bool add = q0 > 0 || beta != 0.0f;
      PackPanels(b + static_cast<int64_t>(q0) * ldb + j0, ldb, false, depth, w,
                 panel.data());
      Tiles<true>(m, depth, slivers + q0 * kRows, 0, sliver, panel.data(), add,
                  c + j0, ldc, Mask(n - j0), Mask(n - j0 - 16), nullptr, 0);
    }
  }
}

}  // namespace

void PanelGemm(int m, int n, int k, const float* a, int lda,
               const float* panels, float beta, float* c, int ldc) {
  Split(Panels(n), [&](int p0, int p1) {
    PanelRange(p0, p1, m, n, k, a, lda, panels, beta, c, ldc);
  });
}

void GemmTransA(int m, int n, int k, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc) {
  // Both operands change every call, so both are packed per call, as a
  // Goto-style BLAS does: A^T into slivers of kRows rows (sliver s holds
  // A^T[s kRows + r][q] at q kRows + r, zeros past row m), read
  // sequentially by the tile; B one panel at a time (kDepth x 32 floats,
  // stays in L1 while every sliver passes). The slivers are the calling
  // thread's scratch, grown once, packed and then read by the whole team.
  thread_local std::vector<float> slivers;
  const int count = (m + kRows - 1) / kRows;
  const size_t floats = static_cast<size_t>(count) * k * kRows;
  if (slivers.size() < floats) slivers.resize(floats);
  float* sl = slivers.data();
  Split(count, [&](int s0, int s1) { PackSlivers(s0, s1, m, k, a, lda, sl); });
  Split(Panels(n), [&](int p0, int p1) {
    TransARange(p0, p1, m, n, k, sl, b, ldb, beta, c, ldc);
  });
}

void SetGemmThreads(int threads) {
  threads = std::max(threads, 1);
  if (GemmThreads() == threads) return;
  t_team = threads > 1 ? std::make_unique<ForkJoin>(threads) : nullptr;
}

int GemmThreads() { return t_team != nullptr ? t_team->threads() : 1; }

#else
bool PanelGemmAvailable() { return false; }

void PanelGemm(int, int, int, const float*, int, const float*, float, float*,
               int) {}

void GemmTransA(int, int, int, const float*, int, const float*, int, float,
                float*, int) {}

void SetGemmThreads(int) {}

int GemmThreads() { return 1; }
#endif  // STRATA_HAVE_PANEL_GEMM

}  // namespace strata
