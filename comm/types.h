// Element types and reduction operators of collectives (docs/comm.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::comm {

// Send-side counters of one network connection to a peer, cumulative since
// it connected (the kernel's TCP_INFO, docs/fault.md "Slow links"): what
// slow-link detection compares between node pairs.
struct LinkCounter {
  int peer = -1;            // the peer's rank, in the reader's numbering
  int stream = 0;           // which of the peer's connections
  int64_t bytes_acked = 0;  // bytes the peer acknowledged
  int64_t busy_us = 0;      // time with data queued or in flight
};

enum class DataType { kF32, kF64, kF16, kBF16, kI32, kI64 };
enum class ReduceOp { kSum, kAvg, kMax, kMin };

size_t ElementSize(DataType t);
const char* DataTypeName(DataType t);
const char* ReduceOpName(ReduceOp op);

// acc[i] = acc[i] (op) in[i] for i < count. kAvg reduces like kSum; the
// caller divides once at the end (Scale). f16/bf16 are accumulated in fp32
// per element and rounded to nearest even on store. `acc` and `in` must not
// overlap (the kernels are vectorized on that promise, reduce.cc).
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
