// strata-bench comm-hier: hierarchical vs flat-ring all-reduce on a
// simulated two-level cluster: two network namespaces ("nodes", made by
// bench/netns.sh) joined by a rate-limited veth link, two ranks in each.
// Inside a node ranks use shared memory, between nodes TCP bound to the
// veth interface. With two ranks per node the hierarchical algorithm sends
// S bytes per direction over the link against the flat ring's 1.5 S, so its
// ideal gain is 1.5x; the table reports busbw and the fraction of each
// algorithm's link-limited ideal.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/registry.h"
#include "comm/hybrid/hybrid_transport.h"
#include "comm/process_group.h"

#ifdef STRATA_BENCH_HAVE_MPI
#include <mpi.h>
#endif

namespace strata::bench {
namespace {

using comm::Algorithm;

int Child(int rank, const std::string& dir, const std::string& iface,
          const std::vector<size_t>& sizes, double link_gbit,
          const std::string& format) {
  const std::vector<int> nodes = {0, 0, 1, 1};
  auto store = comm::NewFileStore(dir);
  comm::TcpOptions tcp;
  tcp.bind = iface;
  auto t = comm::ConnectHybridTransport(*store, rank, nodes, tcp,
                                        comm::ShmOptions{});
  if (!t.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, t.status().ToString().c_str());
    return 1;
  }
  comm::GroupOptions opts;
  opts.node_of = nodes;
  opts.timeout = std::chrono::minutes(5);
  comm::ProcessGroup g(std::move(*t), opts);
  const double link = link_gbit * 1e9 / 8;  // bytes/s per direction
  double ring_time = 0;
  for (size_t bytes : sizes) {
    std::vector<float> buf(bytes / 4, 1.0f);
    for (Algorithm a : {Algorithm::kRing, Algorithm::kHierarchical}) {
      comm::OpOptions o;
      o.algorithm = a;
      o.synchronous = true;
      double best = 1e30;
      for (int i = 0; i < 3; ++i) {
        (void)g.Barrier(o)->Wait();
        const auto t0 = std::chrono::steady_clock::now();
        Status st = g.AllReduce(buf.data(), buf.size(), comm::DataType::kF32,
                                comm::ReduceOp::kSum, o)
                        ->Wait();
        if (!st.ok()) {
          std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
          return 1;
        }
        best = std::min(best, std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - t0)
                                  .count());
      }
      if (a == Algorithm::kRing) ring_time = best;
      if (rank != 0) continue;
      const double crossing = a == Algorithm::kRing ? 1.5 * bytes : 1.0 * bytes;
      const double ideal = crossing / link;
      const double algbw = bytes / best / 1e9, busbw = algbw * 1.5;
      if (format == "json") {
        std::printf(
            "{\"op\":\"all_reduce\",\"algo\":\"%s\",\"backend\":\"shm+tcp\","
            "\"ranks\":4,"
            "\"bytes\":%zu,\"time_s\":%.4f,\"algbw_gbps\":%.4f,\"busbw_gbps\":%"
            ".4f,"
            "\"fraction_of_ideal\":%.3f,\"speedup_vs_ring\":%.3f}\n",
            comm::AlgorithmName(a), bytes, best, algbw, busbw, ideal / best,
            ring_time / best);
      } else {
        std::printf(
            "%12zu  %-13s %9.3f s %9.4f %9.4f   %5.1f%% of ideal   x%.2f vs "
            "ring\n",
            bytes, comm::AlgorithmName(a), best, algbw, busbw,
            100 * ideal / best, ring_time / best);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

#ifdef STRATA_BENCH_HAVE_MPI
// Open MPI's MPI_Allreduce over the same link, ranks started by mpirun in
// the two namespaces (TCP between all ranks: vader would see one host and
// bypass the link).
int MpiChild(const std::vector<size_t>& sizes, const std::string& format) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (size_t bytes : sizes) {
    std::vector<float> buf(bytes / 4, 1.0f);
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()),
                    MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      best = std::min(best, MPI_Wtime() - t0);
    }
    if (rank != 0) continue;
    const double algbw = bytes / best / 1e9;
    if (format == "json") {
      std::printf(
          "{\"op\":\"all_reduce\",\"algo\":\"mpi\",\"backend\":\"mpi-tcp\","
          "\"ranks\":4,"
          "\"bytes\":%zu,\"time_s\":%.4f,\"algbw_gbps\":%.4f,\"busbw_gbps\":%."
          "4f}\n",
          bytes, best, algbw, algbw * 1.5);
    } else {
      std::printf("%12zu  %-13s %9.3f s %9.4f %9.4f\n", bytes, "mpi", best,
                  algbw, algbw * 1.5);
    }
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
#endif

int CommHierBench(int argc, char** argv) {
  CLI::App app{
      "strata-bench comm-hier: hierarchical vs ring over a slow inter-node "
      "link"};
  std::string format = "table", dir, iface;
  std::vector<size_t> sizes = {1u << 20, 16u << 20, 64u << 20};
  double link_gbit = 1.0;
  int rank = -1;
  bool mpi_child = false;
  app.add_option("--format", format)->check(CLI::IsMember({"table", "json"}));
  app.add_option("--sizes", sizes, "message sizes in bytes");
  app.add_option("--link-gbit", link_gbit, "rate set by bench/netns.sh up");
  app.add_option("--rank", rank)->group("");  // internal: child process
  app.add_option("--store", dir)->group("");
  app.add_option("--iface", iface)->group("");
  app.add_flag("--mpi-child", mpi_child)->group("");
  CLI11_PARSE(app, argc, argv);
  if (rank >= 0) return Child(rank, dir, iface, sizes, link_gbit, format);
#ifdef STRATA_BENCH_HAVE_MPI
  if (mpi_child) return MpiChild(sizes, format);
#endif

  if (std::system("ip netns list 2>/dev/null | grep -q strata-a") != 0) {
    std::fprintf(stderr,
                 "strata-bench comm-hier: namespaces missing; run "
                 "`bench/netns.sh up` as "
                 "root first (see bench/README.md)\n");
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  char tmpl[] = "/tmp/strata-hier-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  if (format == "table") {
    std::printf(
        "# all-reduce f32, 2 nodes x 2 ranks, shm inside, tcp over a %.1f "
        "Gbit/s veth\n",
        link_gbit);
    std::printf("%12s  %-13s %11s %9s %9s\n", "bytes", "algo", "time", "algbw",
                "busbw");
  }
  std::fflush(stdout);
  std::vector<pid_t> kids;
  for (int r = 0; r < 4; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      const std::string ns = r < 2 ? "strata-a" : "strata-b";
      const std::string dev = r < 2 ? "strata-va" : "strata-vb";
      std::vector<std::string> args = {
          "ip",       "netns",     "exec",        ns,
          self,       "comm-hier", "--rank",      std::to_string(r),
          "--store",  tmpl,        "--iface",     dev,
          "--format", format,      "--link-gbit", std::to_string(link_gbit),
          "--sizes"};
      for (size_t s : sizes) args.push_back(std::to_string(s));
      std::vector<char*> av;
      for (auto& a : args) av.push_back(a.data());
      av.push_back(nullptr);
      execvp("ip", av.data());
      _exit(127);
    }
    kids.push_back(pid);
  }
  int rc = 0;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  std::string cmd = std::string("rm -rf ") + tmpl;
  (void)!std::system(cmd.c_str());
#ifdef STRATA_BENCH_HAVE_MPI
  // The peer: mpirun runs inside strata-a; PMIx listens on the veth so the
  // ranks in strata-b can reach their launcher.
  std::string size_args;
  for (size_t s : sizes) size_args += " " + std::to_string(s);
  const std::string child = std::string(self) +
                            " comm-hier --mpi-child --format " + format +
                            " --sizes" + size_args;
  const std::string mpi =
      "ip netns exec strata-a env PMIX_MCA_ptl_tcp_remote_connections=1 "
      "PMIX_MCA_ptl_tcp_if_include=strata-va mpirun --allow-run-as-root "
      "--oversubscribe "
      "--mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca "
      "oob_tcp_if_include "
      "strata-va -np 2 " +
      child + " : -np 2 ip netns exec strata-b " + child;
  if (std::system(mpi.c_str()) != 0) {
    std::fprintf(stderr, "strata-bench comm-hier: the Open MPI run failed\n");
    rc = 1;
  }
#endif
  return rc;
}

}  // namespace
STRATA_BENCH("comm-hier",
             "hierarchical vs ring all-reduce across two netns nodes",
             CommHierBench);
}  // namespace strata::bench
