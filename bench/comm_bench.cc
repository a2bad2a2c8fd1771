// strata-bench comm: all-reduce bandwidth of strata next to Open MPI's
// MPI_Allreduce, in the same processes on the same buffers, like
// nccl-tests: algbw = S / t, busbw = algbw * 2(n-1)/n.
//
// Run as `strata-bench comm` (it re-launches itself under mpirun for 2 and
// 4 ranks) or directly under `mpirun -np N strata-bench comm`.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/registry.h"
#include "comm/process_group.h"
#include "comm/shm/shm_transport.h"
#include "comm/tcp/tcp_transport.h"

namespace strata::bench {
namespace {

using comm::Algorithm;

struct Row {
  std::string algo;
  double seconds;  // median block: seconds per call
  double vs_mpi;   // median over rounds of MPI's time / this time
};

int Relaunch(const std::string& self, const std::vector<int>& ranks,
             const std::string& mpi_copy, const std::string& args) {
  int rc = 0;
  for (int n : ranks) {
    // Open MPI as users run it (vader's default single-copy mechanism, CMA
    // here), or with single copy off (copy-in/copy-out, faster at 1-16 MiB
    // on this machine).
    const std::string env =
        mpi_copy == "none" ? "OMPI_MCA_btl_vader_single_copy_mechanism=none "
                           : "";
    std::string cmd = env + "mpirun --oversubscribe --allow-run-as-root -np " +
                      std::to_string(n) + " " + self + " comm" + args;
    rc |= std::system(cmd.c_str());
  }
  return rc == 0 ? 0 : 1;
}

int CommBench(int argc, char** argv) {
  CLI::App app{"strata-bench comm: all-reduce busbw, strata vs MPI_Allreduce"};
  std::string format = "table", transport = "shm";
  size_t min_bytes = 1 << 10, max_bytes = 256u << 20;
  std::vector<int> ranks = {2, 4};
  std::string mpi_copy = "default";
  size_t ring_kib = 0;  // 0: ShmOptions' default
  app.add_option("--format", format)->check(CLI::IsMember({"table", "json"}));
  app.add_option("--transport", transport)
      ->check(CLI::IsMember({"shm", "tcp"}));
  app.add_option("--min-bytes", min_bytes);
  app.add_option("--max-bytes", max_bytes);
  app.add_option("--ranks", ranks, "rank counts when launching mpirun itself");
  app.add_option("--mpi-single-copy", mpi_copy,
                 "Open MPI shared-memory single copy: default or none")
      ->check(CLI::IsMember({"default", "none"}));
  app.add_option("--shm-ring-kib", ring_kib,
                 "shm ring per ordered pair of ranks (KiB, a power of two; "
                 "0: the transport's default)");
  CLI11_PARSE(app, argc, argv);

  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    std::string args = " --format " + format + " --transport " + transport +
                       " --min-bytes " + std::to_string(min_bytes) +
                       " --max-bytes " + std::to_string(max_bytes) +
                       " --shm-ring-kib " + std::to_string(ring_kib);
    return Relaunch(self, ranks, mpi_copy, args);
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Rendezvous for strata through a file store in a fresh directory.
  char dir[256] = "/tmp/strata-bench-XXXXXX";
  if (rank == 0 && mkdtemp(dir) == nullptr) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
  auto store = comm::NewFileStore(dir);
  comm::ShmOptions shm;
  if (ring_kib > 0) shm.ring_bytes = ring_kib << 10;
  StatusOr<std::unique_ptr<comm::Transport>> t =
      transport == "shm"
          ? comm::ConnectShmTransport(*store, rank, size, shm)
          : comm::ConnectTcpTransport(*store, rank, size, comm::TcpOptions{});
  if (!t.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, t.status().ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  comm::ProcessGroup group(std::move(*t), comm::GroupOptions{});
  const double bus = 2.0 * (size - 1) / size;

  if (rank == 0 && format == "table") {
    const char* copy = std::getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
    std::printf(
        "# all-reduce f32 sum, %d ranks, strata transport %s, peer Open MPI "
        "(vader "
        "single copy: %s)\n",
        size, transport.c_str(), copy ? copy : "default");
    std::printf("%12s  %-20s %10s %10s %10s\n", "bytes", "algo", "time_us",
                "algbw", "busbw");
  }
  // Each size runs kRounds rounds; a round times a block of iterations of
  // every contender, starting with a different one each round. A contender's
  // figure is its median block, its ratio the median of the per-round
  // ratios MPI time / its time: a burst of load from outside slows the
  // blocks of one round, not one contender's whole measurement, as it would
  // if each ran all its iterations back to back.
  constexpr int kRounds = 7;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / 4;
    std::vector<float> buf(count, 1.0f);
    // About 1 GiB moved per size and contender, 100k iterations at most:
    // at 1 KiB a round's block is then ~14k calls, 7-10 ms, several
    // scheduler ticks (4 ms), so one preemption cannot double a block (with
    // 20k iterations a block lasted ~1.5 ms).
    const int iters = static_cast<int>(
        std::clamp<size_t>((size_t{1} << 30) / bytes, 4, 100000));
    const int per_round = std::max(1, iters / kRounds);
    std::vector<std::string> names = {"mpi"};
    std::vector<std::function<void()>> fns = {[&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count),
                    MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }};
    for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing,
                        Algorithm::kRecursiveDoubling, Algorithm::kShared}) {
      if (a == Algorithm::kRecursiveDoubling && bytes > (16u << 20)) continue;
      if (a == Algorithm::kShared && transport != "shm") continue;
      comm::OpOptions o;
      o.algorithm = a;
      o.synchronous = true;  // blocking, like MPI_Allreduce
      names.push_back(
          std::string("strata/") +
          (a == Algorithm::kAuto
               ? std::string("auto:") +
                     comm::AlgorithmName(group.ChooseAllReduce(bytes))
               : comm::AlgorithmName(a)));
      fns.push_back([&, o] {
        Status st = group
                        .AllReduce(buf.data(), count, comm::DataType::kF32,
                                   comm::ReduceOp::kSum, o)
                        ->Wait();
        if (!st.ok()) MPI_Abort(MPI_COMM_WORLD, 1);
      });
    }
    const size_t k = fns.size();
    for (auto& fn : fns) {  // warm-up: pages touched, rings and caches hot
      for (int w = 0; w < std::max(2, per_round / 5); ++w) fn();
    }
    // times[c][round]: the slowest rank's mean seconds per call in the block.
    std::vector<std::vector<double>> times(k);
    for (int round = 0; round < kRounds; ++round) {
      for (size_t j = 0; j < k; ++j) {
        const size_t c = (round + j) % k;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < per_round; ++i) fns[c]();
        double dt = (MPI_Wtime() - t0) / per_round, worst = 0;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times[c].push_back(worst);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::vector<Row> rows;
    for (size_t c = 0; c < k; ++c) {
      std::vector<double> ratio;
      for (int round = 0; round < kRounds; ++round) {
        ratio.push_back(times[0][round] / times[c][round]);
      }
      rows.push_back({names[c], median(times[c]), median(ratio)});
    }
    if (rank != 0) continue;
    for (const Row& r : rows) {
      const double algbw = bytes / r.seconds / 1e9;
      if (format == "json") {
        std::printf(
            "{\"op\":\"all_reduce\",\"algo\":\"%s\",\"backend\":\"%s\","
            "\"ranks\":%d,"
            "\"bytes\":%zu,\"time_us\":%.2f,\"algbw_gbps\":%.4f,\"busbw_gbps\":"
            "%.4f,"
            "\"speedup_vs_mpi\":%.3f}\n",
            r.algo.c_str(), r.algo == "mpi" ? "mpi" : transport.c_str(), size,
            bytes, r.seconds * 1e6, algbw, algbw * bus, r.vs_mpi);
      } else {
        std::printf("%12zu  %-20s %10.1f %10.3f %10.3f  x%.2f vs mpi\n", bytes,
                    r.algo.c_str(), r.seconds * 1e6, algbw, algbw * bus,
                    r.vs_mpi);
      }
    }
    std::fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    std::string cmd = std::string("rm -rf ") + dir;
    (void)!std::system(cmd.c_str());
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
STRATA_BENCH("comm",
             "all-reduce busbw: strata vs Open MPI (re-launches under mpirun)",
             CommBench);
}  // namespace strata::bench
