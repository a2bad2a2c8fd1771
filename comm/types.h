// Element types and reduction operators of collectives (docs/comm.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::comm {

enum class DataType { kF32, kF64, kF16, kBF16, kI32, kI64 };
enum class ReduceOp { kSum, kAvg, kMax, kMin };

size_t ElementSize(DataType t);
const char* DataTypeName(DataType t);
const char* ReduceOpName(ReduceOp op);

// acc[i] = acc[i] (op) in[i] for i < count. kAvg reduces like kSum; the
// caller divides once at the end (Scale). f16/bf16 are accumulated in fp32
// per element and rounded to nearest even on store.
void ReduceInto(void* acc, const void* in, size_t count, DataType t,
                ReduceOp op);

// buf[i] /= divisor (integer types: truncating division).
void Divide(void* buf, size_t count, DataType t, int divisor);

// IEEE half / bfloat16 conversions (round to nearest even).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace strata::comm
