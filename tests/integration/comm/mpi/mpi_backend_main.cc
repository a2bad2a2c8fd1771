// Run with `mpirun -np 4`: every operation and dtype of the MPI backend
// against values each rank computes itself. Exit 0 on success.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/algorithms/algorithms.h"
#include "comm/mpi/mpi_backend.h"

using namespace strata::comm;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int failures = 0;
  {
    auto b = NewMpiBackend();
    if (!b.ok()) return 2;
    Backend& g = **b;
    const int n = g.size(), r = g.rank();
    auto check = [&](bool ok, const char* what) {
      if (!ok) {
        std::printf("rank %d: %s failed\n", r, what);
        ++failures;
      }
    };
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099},
                         size_t{(1 << 20) + 5}}) {
      // Sum and max of small integers in every dtype, compared as floats.
      for (DataType t : {DataType::kF32, DataType::kF64, DataType::kF16,
                         DataType::kBF16, DataType::kI32, DataType::kI64}) {
        const size_t es = ElementSize(t);
        std::vector<char> buf(count * es), one(es);
        for (size_t i = 0; i < count; ++i) {
          // value (r+1)*(i%7+1) encoded in type t via a 1-element reduction
          std::vector<char> zero(es, 0);
          double v = (r + 1) * static_cast<double>(i % 7 + 1);
          switch (t) {
            case DataType::kF32: {
              float f = static_cast<float>(v);
              std::memcpy(buf.data() + i * es, &f, es);
              break;
            }
            case DataType::kF64:
              std::memcpy(buf.data() + i * es, &v, es);
              break;
            case DataType::kI32: {
              int32_t x = static_cast<int32_t>(v);
              std::memcpy(buf.data() + i * es, &x, es);
              break;
            }
            case DataType::kI64: {
              int64_t x = static_cast<int64_t>(v);
              std::memcpy(buf.data() + i * es, &x, es);
              break;
            }
            case DataType::kF16: {
              uint16_t x = FloatToHalf(static_cast<float>(v));
              std::memcpy(buf.data() + i * es, &x, es);
              break;
            }
            case DataType::kBF16: {
              uint16_t x = FloatToBf16(static_cast<float>(v));
              std::memcpy(buf.data() + i * es, &x, es);
              break;
            }
          }
        }
        std::vector<char> sum = buf;
        check(g.AllReduce(sum.data(), count, t, ReduceOp::kSum)->Wait().ok(),
              "allreduce");
        std::vector<char> mx = buf;
        check(g.AllReduce(mx.data(), count, t, ReduceOp::kMax)->Wait().ok(),
              "allreduce max");
        const double ranks = n * (n + 1) / 2.0;
        for (size_t i = 0; i < count; i += 97) {
          double got = 0, gotmax = 0;
          const char* p = sum.data() + i * es;
          const char* q = mx.data() + i * es;
          switch (t) {
            case DataType::kF32:
              got = *reinterpret_cast<const float*>(p);
              gotmax = *reinterpret_cast<const float*>(q);
              break;
            case DataType::kF64:
              got = *reinterpret_cast<const double*>(p);
              gotmax = *reinterpret_cast<const double*>(q);
              break;
            case DataType::kI32:
              got = *reinterpret_cast<const int32_t*>(p);
              gotmax = *reinterpret_cast<const int32_t*>(q);
              break;
            case DataType::kI64:
              got = static_cast<double>(*reinterpret_cast<const int64_t*>(p));
              gotmax =
                  static_cast<double>(*reinterpret_cast<const int64_t*>(q));
              break;
            case DataType::kF16:
              got = HalfToFloat(*reinterpret_cast<const uint16_t*>(p));
              gotmax = HalfToFloat(*reinterpret_cast<const uint16_t*>(q));
              break;
            case DataType::kBF16:
              got = Bf16ToFloat(*reinterpret_cast<const uint16_t*>(p));
              gotmax = Bf16ToFloat(*reinterpret_cast<const uint16_t*>(q));
              break;
          }
          check(got == ranks * (i % 7 + 1), DataTypeName(t));
          check(gotmax == n * static_cast<double>(i % 7 + 1), "max");
        }
      }
      // Reduce-scatter / all-gather with uneven blocks (f32).
      std::vector<float> in(count), out(count + 1), all(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r + i % 5);
      check(g.ReduceScatter(in.data(), out.data(), count, DataType::kF32,
                            ReduceOp::kSum)
                ->Wait()
                .ok(),
            "rs");
      const size_t b0 = algorithms::BlockBegin(count, n, r),
                   b1 = algorithms::BlockBegin(count, n, r + 1);
      for (size_t i = b0; i < b1; ++i)
        check(out[i - b0] == n * (n - 1) / 2.0f + n * (i % 5), "rs value");
      check(g.AllGather(out.data(), all.data(), count, DataType::kF32)
                ->Wait()
                .ok(),
            "ag");
      for (size_t i = 0; i < count; i += 31)
        check(all[i] == n * (n - 1) / 2.0f + n * (i % 5), "ag value");
    }
    std::vector<int64_t> x(100, r);
    check(g.Broadcast(x.data(), 100, DataType::kI64, n - 1)->Wait().ok() &&
              x[99] == n - 1,
          "bcast");
    std::vector<int32_t> a2a_in(n * 3), a2a_out(n * 3);
    for (int j = 0; j < n * 3; ++j) a2a_in[j] = r * 1000 + j;
    check(g.AllToAll(a2a_in.data(), a2a_out.data(), 3, DataType::kI32)
              ->Wait()
              .ok(),
          "a2a");
    for (int i = 0; i < n; ++i)
      check(a2a_out[i * 3] == i * 1000 + r * 3, "a2a value");
    check(g.Barrier()->Wait().ok(), "barrier");
    // Timeouts: the last rank joins 3 s late; the others see DeadlineExceeded
    // after their 200 ms (bound 2.5 s for loaded CI machines), then the
    // operation completes once it arrives.
    std::vector<float> late(1000, 1.0f);
    if (r == n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      check(
          g.AllReduce(late.data(), late.size(), DataType::kF32, ReduceOp::kSum)
              ->Wait()
              .ok(),
          "late all-reduce");
    } else {
      OpOptions o;
      o.timeout = std::chrono::milliseconds(200);
      auto w = g.AllReduce(late.data(), late.size(), DataType::kF32,
                           ReduceOp::kSum, o);
      const auto t0 = std::chrono::steady_clock::now();
      strata::Status st = w->Wait();
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      check(st.code() == absl::StatusCode::kDeadlineExceeded, "timeout code");
      check(waited < 2.5, "timeout within bound");
      const auto end =
          std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!w->IsCompleted() && std::chrono::steady_clock::now() < end) {
        std::this_thread::yield();
      }
      check(w->IsCompleted(), "completes once the late rank joins");
    }
    check(late[0] == static_cast<float>(n), "late all-reduce value");
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total == 0) std::printf("OK\n");
  return total == 0 ? 0 : 1;
}
