// Reduction kernels: element-wise loops over non-overlapping arrays (acc
// and in never alias: callers reduce a received buffer or a ring slot into
// their own), built with -O3 so GCC vectorizes them (comm/CMakeLists.txt;
// at -O2 its very-cheap cost model left them scalar, one element per
// instruction, because the pointers might overlap). f32 and f64 sums, the
// reductions gradients use, are STRATA_KERNELs: AVX-512 or AVX2 where the
// CPU has it. Element-wise, so the result is bit-identical to the scalar
// loop. 16-bit floats go through fp32 per element.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "comm/types.h"
#include "common/kernel.h"

namespace strata::comm {
namespace {

STRATA_KERNEL
void SumF32(float* __restrict acc, const float* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += in[i];
}

STRATA_KERNEL
void SumF64(double* __restrict acc, const double* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += in[i];
}

template <typename T>
void ReduceTyped(T* __restrict acc, const T* __restrict in, size_t n,
                 ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      if constexpr (std::is_same_v<T, float>) {
        SumF32(acc, in, n);
      } else if constexpr (std::is_same_v<T, double>) {
        SumF64(acc, in, n);
      } else {
        for (size_t i = 0; i < n; ++i) acc[i] += in[i];
      }
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    float a = ToF(acc[i]), b = ToF(in[i]);
    float r = op == ReduceOp::kMax   ? std::max(a, b)
              : op == ReduceOp::kMin ? std::min(a, b)
                                     : a + b;
    acc[i] = FromF(r);
  }
}

template <typename T>
void DivideTyped(T* buf, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(buf[i] / d);
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Divide16(uint16_t* buf, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) buf[i] = FromF(ToF(buf[i]) / d);
}

}  // namespace

size_t ElementSize(DataType t) {
  switch (t) {
    case DataType::kF32:
    case DataType::kI32:
      return 4;
    case DataType::kF64:
    case DataType::kI64:
      return 8;
    case DataType::kF16:
    case DataType::kBF16:
      return 2;
  }
  return 1;
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kF16:
      return "f16";
    case DataType::kBF16:
      return "bf16";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
  }
  return "?";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

void ReduceInto(void* acc, const void* in, size_t n, DataType t, ReduceOp op) {
  switch (t) {
    case DataType::kF32:
      return ReduceTyped(static_cast<float*>(acc),
                         static_cast<const float*>(in), n, op);
    case DataType::kF64:
      return ReduceTyped(static_cast<double*>(acc),
                         static_cast<const double*>(in), n, op);
    case DataType::kI32:
      return ReduceTyped(static_cast<int32_t*>(acc),
                         static_cast<const int32_t*>(in), n, op);
    case DataType::kI64:
      return ReduceTyped(static_cast<int64_t*>(acc),
                         static_cast<const int64_t*>(in), n, op);
    case DataType::kF16:
      return Reduce16<HalfToFloat, FloatToHalf>(
          static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(in), n, op);
    case DataType::kBF16:
      return Reduce16<Bf16ToFloat, FloatToBf16>(
          static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(in), n, op);
  }
}

void Divide(void* buf, size_t n, DataType t, int d) {
  switch (t) {
    case DataType::kF32:
      return DivideTyped(static_cast<float*>(buf), n, d);
    case DataType::kF64:
      return DivideTyped(static_cast<double*>(buf), n, d);
    case DataType::kI32:
      return DivideTyped(static_cast<int32_t*>(buf), n, d);
    case DataType::kI64:
      return DivideTyped(static_cast<int64_t*>(buf), n, d);
    case DataType::kF16:
      return Divide16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(buf), n,
                                                d);
    case DataType::kBF16:
      return Divide16<Bf16ToFloat, FloatToBf16>(static_cast<uint16_t*>(buf), n,
                                                d);
  }
}

float Bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fff + ((u >> 16) & 1);                     // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      u = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000 | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // overflow -> inf
  if (abs < 0x38800000) {                       // subnormal or zero
    if (abs < 0x33000000) return sign;          // rounds to 0
    // value = mant * 2^(e-150); half subnormals count units of 2^-24.
    const uint32_t e = abs >> 23;
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const uint32_t drop = 126 - e;
    uint32_t q = mant >> drop;
    const uint32_t rem = mant & ((1u << drop) - 1);
    const uint32_t half = 1u << (drop - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

}  // namespace strata::comm
