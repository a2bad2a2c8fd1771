// strata-bench ckpt: what a checkpoint costs training, next to its peers in
// the same run on the same bytes (4 ranks as threads, 1 GiB by default):
//   memcpy_s      copy of one rank's state into already-touched memory (the
//                 floor of an eager snapshot)
//   eager_stall_s time SaveAsync blocks when it copies before returning,
//                 per rank (staging buffers warm; median of 3 saves)
//   stall_s       training stall with the deferred snapshot strata-train
//                 uses: SaveAsync, then --compute-ms of forward/backward
//                 (a sleep: on a GPU node that work runs on the device and
//                 leaves the host cores to the copy), then WaitSnapshot;
//                 ranks one after another like the eager stall, slowest
//                 rank, median of 5 saves
//   snapshot_s    how long the deferred copy takes when fenced at once
//                 (copier and caller together; slowest rank): a forward/
//                 backward longer than this hides it completely
//   sync_save_s   the same save done synchronously (SaveAsync + Wait of
//                 all ranks; median of 3 saves)
//   torch_save_s  torch.save of the same number of bytes + fsync (Debian's
//                 python3-torch), when importable
//   persist_gbps  state bytes / sync_save_s
//   disk_write_gbps  the faster of `dd oflag=direct` and an fsync'd
//                 buffered write of the same size
//   reshard_read_amplification, load_gbps: save tp=2, load tp=4 on four
//                 concurrent ranks, page cache dropped first
//   disk_read_gbps  the faster of `dd iflag=direct` over the same data
//                 files and plain reads of them in parallel, cache dropped
// The loads and the disk reads alternate over --rounds rounds, two of each
// per round; each side reports its best (this VM's disk varies several-fold
// between runs).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/registry.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"

namespace strata::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
double Since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Runs a shell command and returns its wall time (or -1 on failure).
double TimeCommand(const std::string& cmd) {
  const auto t0 = SteadyClock::now();
  if (std::system(("(" + cmd + ") >/dev/null 2>&1").c_str()) != 0) return -1;
  return Since(t0);
}

// Evicts `files` from the page cache so the next read comes from the disk:
// fadvise(DONTNEED) needs no privileges for clean pages; as root the whole
// cache is dropped too.
void DropCache(const std::vector<std::string>& files) {
  (void)!std::system("sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null");
  for (const std::string& f : files) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)fdatasync(fd);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

checkpoint::ShardedTensor Rows(void* data, int64_t rows, int64_t cols,
                               int parts, int part) {
  return {"w",
          checkpoint::DType::kF32,
          {rows, cols},
          {rows / parts, cols},
          {part * rows / parts, 0},
          0,
          1,
          data};
}

std::unique_ptr<checkpoint::Checkpointer> NewCheckpointer(
    const std::string& dir, int rank, int world,
    std::shared_ptr<comm::Store> store, bool deferred) {
  checkpoint::CheckpointOptions o;
  o.uri = dir;
  o.rank = rank;
  o.world_size = world;
  o.store = std::move(store);
  o.deferred_snapshot = deferred;
  return std::make_unique<checkpoint::Checkpointer>(o);
}

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "strata-bench ckpt: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

template <typename T>
void Check(const StatusOr<T>& s) {
  Check(s.status());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs fn(r) for every rank on its own thread.
template <typename Fn>
void OnRanks(int n, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

int CkptBench(int argc, char** argv) {
  CLI::App app{
      "strata-bench ckpt: checkpoint stall, persist and reshard-load costs"};
  std::string format = "table", dir = "/tmp/strata-ckpt-bench";
  std::vector<double> sizes_gib = {1.0};
  int compute_ms = 100, rounds = 5;
  app.add_option("--format", format)->check(CLI::IsMember({"table", "json"}));
  app.add_option("--gib", sizes_gib, "state sizes in GiB (e.g. 1 4)");
  app.add_option("--dir", dir, "where to write (the disk under test)");
  app.add_option("--compute-ms", compute_ms,
                 "forward+backward time between SaveAsync and the optimizer "
                 "step (deferred snapshot)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", rounds, "alternating load / disk-read rounds")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  constexpr int kRanks = 4;

  for (double gib : sizes_gib) {
    const size_t total = static_cast<size_t>(gib * (1ull << 30));
    const size_t per_rank = total / kRanks / 4 * 4;
    (void)!std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
    // Rank r holds rows [r R/4, (r+1) R/4) of "w" [R, 1024] — four TP
    // shards, so tp=2 and tp=4 loads both need resharding.
    const int64_t cols = 1024,
                  rows = static_cast<int64_t>(per_rank / 4 / cols) * kRanks;
    std::vector<std::vector<float>> state(kRanks), copy(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      state[r].assign(rows / kRanks * cols, static_cast<float>(r));
      copy[r].assign(state[r].size(), 0.f);  // pre-touched destination
    }
    const size_t state_bytes = rows * cols * 4;
    auto t0 = SteadyClock::now();
    for (int r = 0; r < kRanks; ++r)
      std::memcpy(copy[r].data(), state[r].data(), state[r].size() * 4);
    const double memcpy_s = Since(t0) / kRanks;
    copy.clear();

    // Eager snapshot: each rank's SaveAsync copies before returning (ranks'
    // stage 1 back to back on this thread, so each gets the memory
    // bandwidth a lone memcpy had).
    auto store = comm::NewInMemoryStore();
    std::vector<std::unique_ptr<checkpoint::Checkpointer>> eager;
    for (int r = 0; r < kRanks; ++r)
      eager.push_back(NewCheckpointer(dir, r, kRanks, store, false));
    auto save_eager = [&](int64_t step, double* stall, double* sync) {
      const auto s0 = SteadyClock::now();
      for (int r = 0; r < kRanks; ++r) {
        Check(eager[r]->SaveAsync(
            step, {Rows(state[r].data(), rows, cols, kRanks, r)}, {}));
      }
      *stall = Since(s0) / kRanks;
      const auto p0 = SteadyClock::now();
      for (auto& c : eager) Check(c->Wait());
      *sync = Since(p0) + *stall;
    };
    // The 1st save allocates staging buffers; medians of 3 steady saves
    // (a synchronous save is SaveAsync + Wait).
    std::vector<double> eager_stalls(4), syncs(4);
    for (int64_t step = 1; step < 5; ++step)
      save_eager(step, &eager_stalls[step - 1], &syncs[step - 1]);
    eager_stalls.erase(eager_stalls.begin());
    syncs.erase(syncs.begin());
    const double eager_stall = Median(eager_stalls);
    const double sync_save_s = Median(syncs);
    const double persist_gbps = state_bytes / sync_save_s / 1e9;
    eager.clear();

    // Deferred snapshot, measured like the eager one: ranks one after
    // another, each with the memory bandwidth a lone memcpy had (on a GPU
    // node each rank copies over its own PCIe link; here 4 ranks would
    // share 2 cores and one memory bus). Each rank saves its shard as a
    // checkpoint of its own, so it can finish its save (Wait) before the
    // next rank's window: a rank's window overlaps only its own persisting,
    // as in training, where all ranks save at once and each persists after
    // its copy, and never the persisting of ranks measured before it.
    std::vector<std::unique_ptr<checkpoint::Checkpointer>> deferred;
    for (int r = 0; r < kRanks; ++r) {
      deferred.push_back(NewCheckpointer(dir + "/deferred-" + std::to_string(r),
                                         0, 1, comm::NewInMemoryStore(), true));
    }
    auto shard = [&](int r) {  // rank r's rows as a tensor of their own
      return std::vector<checkpoint::ShardedTensor>{
          Rows(state[r].data(), rows / kRanks, cols, 1, 0)};
    };
    // The 1st save allocates staging buffers; then kStallSaves saves, each
    // counted by its slowest rank; the median of those is reported.
    constexpr int kStallSaves = 5;
    std::vector<double> stalls;
    for (int64_t step = 0; step <= kStallSaves; ++step) {
      double slowest = 0;
      for (int r = 0; r < kRanks; ++r) {
        const auto s0 = SteadyClock::now();
        Check(deferred[r]->SaveAsync(step, shard(r), {}));
        const double save_s = Since(s0);
        std::this_thread::sleep_for(std::chrono::milliseconds(compute_ms));
        const auto f0 = SteadyClock::now();
        deferred[r]->WaitSnapshot();
        slowest = std::max(slowest, save_s + Since(f0));
        Check(deferred[r]->Wait());
      }
      if (step > 0) stalls.push_back(slowest);
    }
    const double stall = Median(stalls);
    // The copy itself, for the record: fenced at once.
    double snapshot_s = 0;
    for (int r = 0; r < kRanks; ++r) {
      const auto s0 = SteadyClock::now();
      Check(deferred[r]->SaveAsync(kStallSaves + 1, shard(r), {}));
      deferred[r]->WaitSnapshot();
      snapshot_s = std::max(snapshot_s, Since(s0));
      Check(deferred[r]->Wait());
    }
    deferred.clear();
    state.clear();

    // Disk write references on the same number of bytes; fresh files each
    // time, as a checkpoint writes (overwriting allocated blocks is much
    // faster than allocating them).
    const std::string f = dir + "/dd.bin";
    const std::string count = std::to_string(state_bytes >> 20);
    double disk_write = 0;
    for (const char* flag : {"oflag=direct", "conv=fsync"}) {
      const double t = TimeCommand("rm -f " + f + "; dd if=/dev/zero of=" + f +
                                   " bs=1M count=" + count + " " + flag);
      if (t > 0) disk_write = std::max(disk_write, state_bytes / t / 1e9);
    }
    (void)!std::system(("rm -f " + f).c_str());
    // torch.save of the same bytes (4 float32 tensors), with fsync.
    const std::string py =
        "/usr/bin/python3 -c \"import torch,os,time;"
        "ts=[torch.ones(" +
        std::to_string(state_bytes / 4 / kRanks) +
        ") for _ in range(4)];"
        "t=time.time();f=open('" +
        dir +
        "/torch.pt','wb');torch.save(ts,f);f.flush();"
        "os.fsync(f.fileno());f.close();print(time.time()-t)\"";
    double torch_s = -1;
    if (FILE* p = popen((py + " 2>/dev/null").c_str(), "r")) {
      if (std::fscanf(p, "%lf", &torch_s) != 1) torch_s = -1;
      pclose(p);
    }
    (void)!std::system(("rm -f " + dir + "/torch.pt").c_str());

    // Resharding load tp=2 -> tp=4: save the tensor as two halves (step 100),
    // load it as four quarters on four concurrent ranks.
    {
      auto s2 = comm::NewInMemoryStore();
      OnRanks(2, [&](int h) {
        std::vector<float> half(rows / 2 * cols, static_cast<float>(h + 1));
        auto c = NewCheckpointer(dir, h, 2, s2, false);
        Check(c->SaveAsync(100, {Rows(half.data(), rows, cols, 2, h)}, {}));
        Check(c->Wait());
      });
    }
    const std::string step_dir = checkpoint::StepDir(dir, 100);
    const std::vector<std::string> files = {step_dir + "/rank-00000.data",
                                            step_dir + "/rank-00001.data"};
    std::vector<std::vector<float>> quarters(kRanks);
    for (auto& q : quarters) q.assign(rows / 4 * cols, 0.f);  // touched
    double load_gbps = 0, disk_read = 0, amplification = 0;
    auto load_once = [&] {
      DropCache(files);
      std::vector<checkpoint::LoadStats> stats(kRanks);
      const auto l0 = SteadyClock::now();
      OnRanks(kRanks, [&](int q) {
        std::vector<checkpoint::ShardedTensor> targets = {
            Rows(quarters[q].data(), rows, cols, kRanks, q)};
        Check(checkpoint::Load(dir, 100, targets, &stats[q]));
      });
      const double secs = Since(l0);
      uint64_t read = 0, needed = 0;
      for (const auto& s : stats) {
        read += s.bytes_read;
        needed += s.bytes_needed;
      }
      load_gbps = std::max(load_gbps, needed / secs / 1e9);
      amplification = static_cast<double>(read) / needed;
    };
    auto disk_once = [&](const std::string& cmd) {
      DropCache(files);
      const double t = TimeCommand(cmd);
      if (t > 0) disk_read = std::max(disk_read, state_bytes / t / 1e9);
    };
    // Each round: two disk reads (direct, parallel buffered) and two loads,
    // interleaved, so both sides get as many tries.
    for (int round = 0; round < rounds; ++round) {
      disk_once("dd if=" + files[0] +
                " of=/dev/null bs=1M iflag=direct && dd if=" + files[1] +
                " of=/dev/null bs=1M iflag=direct");
      load_once();
      disk_once("cat " + files[0] + " >/dev/null & cat " + files[1] +
                " >/dev/null; wait");
      load_once();
    }
    for (int q = 0; q < kRanks; ++q) {  // rows of half q/2 hold q/2 + 1
      if (quarters[q].front() != q / 2 + 1 || quarters[q].back() != q / 2 + 1) {
        std::fprintf(stderr, "strata-bench ckpt: quarter %d loaded wrong\n", q);
        return 1;
      }
    }

    if (format == "json") {
      std::printf(
          "{\"bench\":\"ckpt\",\"state_bytes\":%zu,\"stall_s\":%.6f,"
          "\"eager_stall_s\":%.5f,\"snapshot_s\":%.5f,\"compute_ms\":%d,"
          "\"sync_save_s\":%.4f,\"torch_save_s\":%.4f,\"memcpy_s\":%.5f,"
          "\"persist_gbps\":%.3f,\"disk_write_gbps\":%.3f,"
          "\"reshard_read_amplification\":%.4f,\"load_gbps\":%.3f,"
          "\"disk_read_gbps\":%.3f}\n",
          state_bytes, stall, eager_stall, snapshot_s, compute_ms, sync_save_s,
          torch_s, memcpy_s, persist_gbps, disk_write, amplification, load_gbps,
          disk_read);
      continue;
    }
    std::printf("state %.2f GiB over %d ranks (per rank %.0f MiB)\n",
                state_bytes / double(1 << 30), kRanks,
                state_bytes / double(1 << 20) / kRanks);
    std::printf(
        "  stall, deferred snapshot %9.6f s  (%.2fx the memcpy floor %.4f s; "
        "1/%.0f of the synchronous save %.3f s; 1/%.0f of torch.save)\n"
        "    overlapping %d ms of forward/backward; fenced at once the copy "
        "takes %.4f s\n",
        stall, stall / memcpy_s, memcpy_s, sync_save_s / stall, sync_save_s,
        torch_s / stall, compute_ms, snapshot_s);
    std::printf(
        "  stall, eager snapshot    %9.4f s  (%.2fx the memcpy floor; 1/%.0f "
        "of the synchronous save)\n",
        eager_stall, eager_stall / memcpy_s, sync_save_s / eager_stall);
    std::printf("  torch.save + fsync       %9.3f s\n", torch_s);
    std::printf(
        "  persist                  %9.3f GB/s (disk write %.3f GB/s: "
        "%.0f%%)\n",
        persist_gbps, disk_write, 100 * persist_gbps / disk_write);
    std::printf(
        "  reshard load tp2->tp4    %9.3f GB/s (disk read %.3f GB/s: %.0f%%), "
        "read amplification %.4f\n",
        load_gbps, disk_read, 100 * load_gbps / disk_read, amplification);
  }
  return 0;
}

}  // namespace
STRATA_BENCH(
    "ckpt",
    "checkpoint stall / persist / reshard-load vs memcpy, fsync, torch.save",
    CkptBench);
}  // namespace strata::bench
