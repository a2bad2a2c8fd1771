// Building blocks of the trainer's element-wise kernels: a float exp that
// vectorizes, and (from common/kernel.h) the attribute that compiles a
// kernel for AVX-512, AVX2+FMA and the baseline ISA, picking one at load
// time.
//
// Kernels are plain loops written so that GCC's -O3 vectorizer takes them
// (fixed-width lane accumulators instead of serial float sums, no libm
// calls inside loops); train/CMakeLists.txt builds these files with -O3
// -fno-trapping-math -fno-math-errno. The AVX-512 clone took GeLU from
// 3.0% to 1.3% of a one-thread `small` step on this AMD EPYC
// (docs/train.md).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "common/kernel.h"

namespace strata::train {

// Lanes of the manual reductions: 16 floats fill two AVX2 registers (or
// one AVX-512 register), enough independent chains to hide FMA latency.
inline constexpr int kLanes = 16;

// e^x in float without a libm call, so loops over it vectorize: x = k ln2 +
// r with |r| <= ln2/2 (Cody-Waite: ln2 split into a high part exact in
// float, 0.693145751953125, and the low remainder), e^r by its Taylor
// series to r^7/7! (relative error below 2e-7 on that interval), 2^k put
// into the exponent bits. k is rounded with the 1.5 x 2^23 trick, which
// needs no rounding instruction beyond SSE2. Inputs are clamped to
// [-87, 88], where e^x is a normal float.
STRATA_INLINE float ExpF(float x) {
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

// Sets row[j] = e^(row[j] - max) for j < n and returns that max; *sum gets
// the sum of the new row. Max and sum run in kLanes lanes: serial float
// reductions do not vectorize (their order is fixed without -ffast-math).
STRATA_INLINE float ExpMinusMax(float* row, int n, float* sum) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = -__builtin_inff();
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], row[j + l]);
  }
  float mx = -__builtin_inff();
  for (int l = 0; l < kLanes; ++l) mx = std::max(mx, lanes[l]);
  for (; j < n; ++j) mx = std::max(mx, row[j]);
  float acc[kLanes] = {};
  j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      row[j + l] = ExpF(row[j + l] - mx);
      acc[l] += row[j + l];
    }
  }
  float s = 0;
  for (; j < n; ++j) {
    row[j] = ExpF(row[j] - mx);
    s += row[j];
  }
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  *sum = s;
  return mx;
}

}  // namespace strata::train
