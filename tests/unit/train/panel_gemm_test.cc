// PanelGemm against a double-precision reference on every edge the kernel
// has: row counts that leave a partial register tile, widths that leave a
// partial panel, depths over one L1 block, beta 0 and 1, and panels of a
// transposed operand; GemmTransA (A given as its transpose) on the same
// shapes; each on the calling thread alone and split over teams of 2 and 3
// threads. And the trainer with packed weights against the trainer without
// them (every GEMM OpenBLAS's), step after step, so that panels left stale
// after an optimizer step would show.
#include "common/panel_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "train/thread_ranks.h"
#include "train/weight_panels.h"

extern "C" void openblas_set_num_threads(int);

namespace strata::train {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Shape {
  int m, n, k;
};

// C after `c = beta c0 + A B` for the shape's C [m, n] (row stride ldc):
// every element against the double-precision product, columns past n
// untouched. A(i, q) and B(q, j) read the operands.
template <typename A, typename B>
void ExpectProduct(int m, int n, int k, A&& a, B&& b, float beta,
                   const std::vector<float>& c0, const std::vector<float>& c,
                   int ldc, const std::string& what) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i) * ldc + j;
      if (j >= n) {  // past the columns: untouched
        ASSERT_EQ(c[at], c0[at]) << what << " row " << i << " col " << j;
        continue;
      }
      double want = beta != 0.0f ? c0[at] : 0.0;
      for (int q = 0; q < k; ++q)
        want += static_cast<double>(a(i, q)) * b(q, j);
      ASSERT_NEAR(c[at], want, 1e-5 * k)
          << what << " m " << m << " n " << n << " k " << k << " beta " << beta
          << " at (" << i << ", " << j << ")";
    }
  }
}

// c0, with C's m x n elements NaN where beta is 0 (beta 0 must not read C).
std::vector<float> Poisoned(std::vector<float> c, int m, int n, int ldc,
                            float beta) {
  if (beta == 0.0f) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c[static_cast<size_t>(i) * ldc + j] = NAN;
  }
  return c;
}

// Teams of the calling thread (SetGemmThreads): alone, and split in two
// and three (ranges of panels differing in size, some empty for n <= 64).
constexpr int kThreads[] = {1, 2, 3};

class PanelGemmTest : public ::testing::TestWithParam<Shape> {};

TEST_P(PanelGemmTest, MatchesReference) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "no AVX-512F on this CPU";
  const auto [m, n, k] = GetParam();
  std::mt19937 rng(m * 10007 + n * 101 + k);
  const int lda = k + 3, ldc = n + 5;  // strides wider than the rows
  const std::vector<float> a = Random(static_cast<size_t>(m) * lda, rng);
  // B [k, n] row-major (ldb n + 1) and the same B as the transpose of
  // bt [n, k] (ldb k + 2).
  const int ldb = n + 1, ldbt = k + 2;
  const std::vector<float> b = Random(static_cast<size_t>(k) * ldb, rng);
  std::vector<float> bt(static_cast<size_t>(n) * ldbt);
  for (int q = 0; q < k; ++q)
    for (int j = 0; j < n; ++j)
      bt[static_cast<size_t>(j) * ldbt + q] = b[q * ldb + j];
  const std::vector<float> c0 = Random(static_cast<size_t>(m) * ldc, rng);
  auto at = [&](int i, int q) { return a[static_cast<size_t>(i) * lda + q]; };
  auto bq = [&](int q, int j) { return b[static_cast<size_t>(q) * ldb + j]; };
  for (bool trans : {false, true}) {
    std::vector<float> panels(PanelFloats(k, n), NAN);
    if (trans) {
      PackPanels(bt.data(), ldbt, true, k, n, panels.data());
    } else {
      PackPanels(b.data(), ldb, false, k, n, panels.data());
    }
    for (int threads : kThreads) {
      SetGemmThreads(threads);
      for (float beta : {0.0f, 1.0f}) {
        std::vector<float> c = Poisoned(c0, m, n, ldc, beta);
        PanelGemm(m, n, k, a.data(), lda, panels.data(), beta, c.data(), ldc);
        ExpectProduct(
            m, n, k, at, bq, beta, c0, c, ldc,
            absl::StrCat(trans ? "PanelGemm, panels of B^T, " : "PanelGemm, ",
                         threads, " threads"));
      }
    }
  }
  SetGemmThreads(1);
}

// GemmTransA: A given as its transpose at [k, m] (row stride m + 3), B
// [k, n] row-major (row stride n + 1).
TEST_P(PanelGemmTest, TransAMatchesReference) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "no AVX-512F on this CPU";
  const auto [m, n, k] = GetParam();
  std::mt19937 rng(m * 7919 + n * 31 + k);
  const int lda = m + 3, ldb = n + 1, ldc = n + 5;
  const std::vector<float> at = Random(static_cast<size_t>(k) * lda, rng);
  const std::vector<float> b = Random(static_cast<size_t>(k) * ldb, rng);
  const std::vector<float> c0 = Random(static_cast<size_t>(m) * ldc, rng);
  auto a = [&](int i, int q) { return at[static_cast<size_t>(q) * lda + i]; };
  auto bq = [&](int q, int j) { return b[static_cast<size_t>(q) * ldb + j]; };
  for (int threads : kThreads) {
    SetGemmThreads(threads);
    for (float beta : {0.0f, 1.0f}) {
      std::vector<float> c = Poisoned(c0, m, n, ldc, beta);
      GemmTransA(m, n, k, at.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      ExpectProduct(m, n, k, a, bq, beta, c0, c, ldc,
                    absl::StrCat("GemmTransA, ", threads, " threads"));
    }
  }
  SetGemmThreads(1);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PanelGemmTest,
    ::testing::Values(Shape{1, 1, 1}, Shape{13, 17, 5}, Shape{14, 32, 128},
                      Shape{15, 33, 129}, Shape{128, 320, 320},
                      Shape{128, 80, 1280}, Shape{29, 48, 300},
                      Shape{64, 160, 64}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      return "m" + std::to_string(info.param.m) + "_n" +
             std::to_string(info.param.n) + "_k" + std::to_string(info.param.k);
    });

// The trainer with packed weights follows the trainer without them for 10
// steps (tiny, serial and tp=2 pp=2 dp=2): the same model, not just a close
// first step.
TEST(PanelGemmTest, TrainerMatchesUnpackedTrainer) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "no AVX-512F on this CPU";
  openblas_set_num_threads(1);
  TrainOptions o;
  o.model = *ModelPreset("tiny");
  o.global_batch = 8;
  o.micro_batch = 2;
  {  // the trainer's weights are packed
    const StageParams params(o.model, Parallel{});
    const WeightPanels panels(params, true);
    ASSERT_NE(panels.Forward(params.layers[0].q_w), nullptr);
    ASSERT_NE(panels.Backward(params.layers[0].fc2_w), nullptr);
    // The tied head: packed on the last stage, which computes it.
    ASSERT_NE(panels.Forward(params.wte), nullptr);
    ASSERT_NE(panels.Backward(params.wte), nullptr);
    EXPECT_EQ(WeightPanels(params, false).Forward(params.layers[0].q_w),
              nullptr);
  }
  // Serial with 1 and 2 BLAS threads per rank (strata's kernels split
  // over a team of 2), and tp=2 pp=2 dp=2.
  for (auto [tp, pp, dp, threads] :
       {std::tuple{1, 1, 1, 1}, std::tuple{1, 1, 1, 2},
        std::tuple{2, 2, 2, 1}}) {
    openblas_set_num_threads(threads);
    o.pack_weights = true;
    ThreadRun packed = RunThreads(o, tp, pp, dp, 10);
    o.pack_weights = false;
    ThreadRun plain = RunThreads(o, tp, pp, dp, 10);
    openblas_set_num_threads(1);
    ASSERT_TRUE(packed.status.ok()) << packed.status;
    ASSERT_TRUE(plain.status.ok()) << plain.status;
    ASSERT_EQ(packed.losses.size(), plain.losses.size());
    EXPECT_LT(packed.losses.back(), packed.losses.front());
    for (size_t i = 0; i < plain.losses.size(); ++i) {
      EXPECT_NEAR(packed.losses[i], plain.losses[i],
                  1e-4 * std::abs(plain.losses[i]))
          << "tp " << tp << " pp " << pp << " dp " << dp << " threads "
          << threads << " step " << i + 1;
    }
  }
}

}  // namespace
}  // namespace strata::train
