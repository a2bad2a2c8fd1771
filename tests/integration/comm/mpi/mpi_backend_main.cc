// Run with `mpirun -np 4`: every operation and dtype of the MPI backend
// against values each rank computes itself, SendRecv, Abort from another
// thread, and the factory's MPI groups of a placement. Exit 0 on success.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/algorithms/algorithms.h"
#include "comm/backend_factory.h"
#include "comm/mpi/mpi_backend.h"

using namespace strata::comm;
using strata::Group;
using strata::Placement;
using strata::RankPlacement;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int failures = 0;
  // The aborted all-reduce's buffer: MPI may still write it when the last
  // rank joins later, so it lives until MPI_Finalize.
  std::vector<float> abandoned(1000, 1.0f);
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

    // SendRecv around a ring, 4 MiB each way (crossing, like the pipeline).
    {
      auto b2 = NewMpiBackend();
      check(b2.ok(), "second backend");
      const size_t big = 1 << 20;
      std::vector<float> out(big, static_cast<float>(r)), in(big, -1.0f);
      const int right = (r + 1) % n, left = (r + n - 1) % n;
      check((*b2)
                ->SendRecv(out.data(), big, right, in.data(), big, left,
                           DataType::kF32)
                ->Wait()
                .ok(),
            "sendrecv");
      check(in[0] == left && in[big - 1] == left, "sendrecv value");
      // A count of 0 disables that side (no message), as over a Transport:
      // the trainer's last exchange sends with nothing to receive.
      OpOptions quick;
      quick.timeout = std::chrono::seconds(5);
      check((*b2)
                ->SendRecv(out.data(), 0, right, in.data(), 0, left,
                           DataType::kF32, quick)
                ->Wait()
                .ok(),
            "sendrecv of nothing");
      check(
          (*b2)->SendRecv(out.data(), 1, r, in.data(), 1, left, DataType::kF32)
                  ->Wait()
                  .code() == absl::StatusCode::kInvalidArgument,
          "sendrecv to self is InvalidArgument");
    }

    // Abort from another thread: ranks 0..n-2 wait on an all-reduce the last
    // rank has not joined; Abort unblocks them with Aborted, later calls fail
    // with FailedPrecondition, and nobody calls MPI_Abort (the job lives on).
    {
      auto ab = NewMpiBackend();
      check(ab.ok(), "abort backend");
      if (r < n - 1) {
        auto w = (*ab)->AllReduce(abandoned.data(), abandoned.size(),
                                  DataType::kF32, ReduceOp::kSum);
        std::thread aborter([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          (*ab)->Abort();
        });
        const auto t0 = std::chrono::steady_clock::now();
        strata::Status st = w->Wait();
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        aborter.join();
        check(st.code() == absl::StatusCode::kAborted, "abort code");
        check(waited >= 0.25 && waited < 5, "abort unblocks the wait");
        check(w->IsCompleted(), "aborted work is completed");
        check((*ab)->Barrier()->Wait().code() ==
                  absl::StatusCode::kFailedPrecondition,
              "broken after abort");
      }
      // Every rank meets here (the aborted ranks through a separate
      // communicator), then the last rank completes the abandoned
      // all-reduce inside MPI: it was never cancelled, only given up.
      MPI_Barrier(MPI_COMM_WORLD);
      if (r == n - 1) {
        check((*ab)
                  ->AllReduce(abandoned.data(), abandoned.size(),
                              DataType::kF32, ReduceOp::kSum)
                  ->Wait()
                  .ok(),
              "the last rank's all-reduce completes");
        check(abandoned[0] == static_cast<float>(n), "abandoned value");
      }
    }

    // The factory: "mpi" groups of a tp=2 x dp=rest placement.
    if (n % 2 == 0) {
      Placement pl;
      for (int i = 0; i < n; ++i) {
        RankPlacement* p = pl.add_ranks();
        p->set_rank(i);
        p->set_node(0);
      }
      auto add = [&](const char* kind, int index, std::vector<int> ranks) {
        Group* grp = pl.add_groups();
        grp->set_kind(kind);
        grp->set_index(index);
        for (int m : ranks) grp->add_ranks(m);
      };
      for (int i = 0; i < n; ++i) {
        add("cp", i, {i});
        add("pp", i, {i});
      }
      for (int i = 0; i < n / 2; ++i) add("tp", i, {2 * i, 2 * i + 1});
      std::vector<int> even, odd;
      for (int i = 0; i < n; ++i) (i % 2 ? odd : even).push_back(i);
      add("dp", 1, odd);  // listed before dp 0: made in kind order anyway
      add("dp", 0, even);
      BackendOptions o;
      o.name = "mpi";
      o.rank = r;
      o.node_of.assign(n, 0);
      auto groups = NewPlanGroups(o, pl);
      check(groups.ok(), "factory mpi groups");
      if (groups.ok()) {
        auto& gs = **groups;
        check(gs.tp->size() == 2 && gs.tp->rank() == r % 2, "tp rank");
        check(gs.dp->size() == n / 2 && gs.dp->rank() == r / 2, "dp rank");
        check(gs.dp_index == r % 2, "dp index");
        int64_t v = r;
        check(gs.dp->AllReduce(&v, 1, DataType::kI64, ReduceOp::kSum)
                  ->Wait()
                  .ok(),
              "dp all-reduce");
        int64_t want = 0;
        for (int i = r % 2; i < n; i += 2) want += i;
        check(v == want, "dp all-reduce value");
      }
      o.node_of.assign(n + 1, 0);
      check(NewBackend(o).status().code() == absl::StatusCode::kInvalidArgument,
            "factory mpi world size mismatch");
    }
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (total == 0) std::printf("OK\n");
  return total == 0 ? 0 : 1;
}
