// strata-bench ckpt: what a checkpoint costs training, next to its peers in
// the same run on the same bytes (4 ranks as threads, 1 GiB by default):
//   memcpy_s      copy of the state into already-touched memory (the floor)
//   stall_s       time SaveAsync blocks (staging buffers warm: 2nd save)
//   sync_save_s   the same save done synchronously (SaveAsync + Wait)
//   torch_save_s  torch.save of the same number of bytes + fsync (Debian's
//                 python3-torch), when importable
//   persist_gbps  state bytes / background persist time
//   disk_write_gbps  the faster of `dd oflag=direct` and an fsync'd
//                 buffered write of the same size
//   reshard_read_amplification, load_gbps: save tp=2 (x dp=2), load tp=4
//   disk_read_gbps  `dd iflag=direct` of the written data
#include <fcntl.h>
#include <unistd.h>

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

namespace strata::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Runs a shell command and returns its wall time (or -1 on failure).
double TimeCommand(const std::string& cmd) {
  const auto t0 = Clock::now();
  if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) return -1;
  return Since(t0);
}

int CkptBench(int argc, char** argv) {
  CLI::App app{
      "strata-bench ckpt: checkpoint stall, persist and reshard-load costs"};
  std::string format = "table", dir = "/tmp/strata-ckpt-bench";
  std::vector<double> sizes_gib = {1.0};
  app.add_option("--format", format)->check(CLI::IsMember({"table", "json"}));
  app.add_option("--gib", sizes_gib, "state sizes in GiB (e.g. 1 4)");
  app.add_option("--dir", dir, "where to write (the disk under test)");
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
    auto t0 = Clock::now();
    for (int r = 0; r < kRanks; ++r)
      std::memcpy(copy[r].data(), state[r].data(), state[r].size() * 4);
    const double memcpy_s = Since(t0);

    auto store = comm::NewInMemoryStore();
    std::vector<std::unique_ptr<checkpoint::Checkpointer>> ckpts;
    std::vector<checkpoint::ShardedTensor> shards(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      checkpoint::CheckpointOptions o;
      o.uri = dir;
      o.rank = r;
      o.world_size = kRanks;
      o.store = store;
      ckpts.push_back(std::make_unique<checkpoint::Checkpointer>(o));
      shards[r] = {"w",
                   checkpoint::DType::kF32,
                   {rows, cols},
                   {rows / kRanks, cols},
                   {r * rows / kRanks, 0},
                   0,
                   1,
                   state[r].data()};
    }
    auto save_all = [&](int64_t step, double* stall, double* persist) {
      const auto s0 = Clock::now();
      for (int r = 0; r < kRanks; ++r) {  // each rank's stage 1, back to back
        if (!ckpts[r]->SaveAsync(step, {shards[r]}, {}).ok()) std::exit(1);
      }
      *stall =
          Since(s0) / kRanks;  // per-rank blocking time (ranks run in parallel)
      const auto p0 = Clock::now();
      for (auto& c : ckpts) {
        if (!c->Wait().ok()) std::exit(1);
      }
      *persist = Since(p0) + *stall;
    };
    double stall = 0, persist = 0;
    save_all(1, &stall, &persist);  // first save: allocates staging buffers
    const double sync_save_s = persist;
    save_all(2, &stall, &persist);  // steady state
    const double persist_gbps = state_bytes / persist / 1e9;

    // Disk references on the same number of bytes.
    const std::string f = dir + "/dd.bin";
    const size_t mib = state_bytes >> 20;
    // Fresh files each time, as a checkpoint writes (overwriting allocated
    // blocks is much faster than allocating them).
    double dd =
        TimeCommand("rm -f " + f + "; dd if=/dev/zero of=" + f +
                    " bs=1M count=" + std::to_string(mib) + " oflag=direct");
    double buffered =
        TimeCommand("rm -f " + f + "; dd if=/dev/zero of=" + f +
                    " bs=1M count=" + std::to_string(mib) + " conv=fsync");
    double disk_write = 0;
    for (double t : {dd, buffered}) {
      if (t > 0) disk_write = std::max(disk_write, state_bytes / t / 1e9);
    }
    double disk_read_t =
        TimeCommand("dd if=" + f + " of=/dev/null bs=1M iflag=direct");
    const double disk_read =
        disk_read_t > 0 ? state_bytes / disk_read_t / 1e9 : 0;
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

    // Resharding load tp=2 -> tp=4: save the tensor as two halves (step 3),
    // load it as four quarters after dropping the page cache.
    std::vector<checkpoint::ShardedTensor> halves(2);
    for (int h = 0; h < 2; ++h) {
      halves[h] = {"w",
                   checkpoint::DType::kF32,
                   {rows, cols},
                   {rows / 2, cols},
                   {h * rows / 2, 0},
                   0,
                   1,
                   nullptr};
    }
    {
      std::vector<float> half0(rows / 2 * cols, 1.f),
          half1(rows / 2 * cols, 2.f);
      halves[0].data = half0.data();
      halves[1].data = half1.data();
      auto s2 = comm::NewInMemoryStore();
      std::vector<std::thread> th;
      for (int h = 0; h < 2; ++h) {
        th.emplace_back([&, h] {
          checkpoint::CheckpointOptions o;
          o.uri = dir;
          o.rank = h;
          o.world_size = 2;
          o.store = s2;
          checkpoint::Checkpointer c(o);
          if (!c.SaveAsync(3, {halves[h]}, {}).ok() || !c.Wait().ok())
            std::exit(1);
        });
      }
      for (auto& t : th) t.join();
    }
    (void)!std::system("sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null");
    checkpoint::LoadStats stats;
    std::vector<float> quarter(rows / 4 * cols);
    const auto l0 = Clock::now();
    for (int q = 0; q < 4; ++q) {
      checkpoint::ShardedTensor t{"w",
                                  checkpoint::DType::kF32,
                                  {rows, cols},
                                  {rows / 4, cols},
                                  {q * rows / 4, 0},
                                  0,
                                  1,
                                  quarter.data()};
      std::vector<checkpoint::ShardedTensor> targets = {t};
      if (!checkpoint::Load(dir, 3, targets, &stats).ok()) std::exit(1);
    }
    const double load_gbps = stats.bytes_needed / Since(l0) / 1e9;
    const double amplification =
        static_cast<double>(stats.bytes_read) / stats.bytes_needed;

    if (format == "json") {
      std::printf(
          "{\"bench\":\"ckpt\",\"state_bytes\":%zu,\"stall_s\":%.5f,\"sync_"
          "save_s\":%.4f,"
          "\"torch_save_s\":%.4f,\"memcpy_s\":%.5f,\"persist_gbps\":%.3f,"
          "\"disk_write_gbps\":%.3f,\"reshard_read_amplification\":%.4f,"
          "\"load_gbps\":%.3f,\"disk_read_gbps\":%.3f}\n",
          state_bytes, stall, sync_save_s, torch_s, memcpy_s, persist_gbps,
          disk_write, amplification, load_gbps, disk_read);
    } else {
      std::printf("state %.2f GiB over %d ranks\n",
                  state_bytes / double(1 << 30), kRanks);
      std::printf(
          "  stall per checkpoint   %8.4f s   (%.2fx the memcpy floor %.4f s; "
          "1/%.0f of "
          "the synchronous save %.3f s)\n",
          stall, stall / (memcpy_s / kRanks), memcpy_s / kRanks,
          sync_save_s / stall, sync_save_s);
      std::printf("  torch.save + fsync     %8.3f s\n", torch_s);
      std::printf(
          "  persist                %8.3f GB/s (disk: %.3f GB/s, %.0f%%)\n",
          persist_gbps, disk_write, 100 * persist_gbps / disk_write);
      std::printf(
          "  reshard load tp2->tp4  %8.3f GB/s (disk read %.3f GB/s), read "
          "amplification "
          "%.4f\n",
          load_gbps, disk_read, amplification);
    }
  }
  return 0;
}

}  // namespace
STRATA_BENCH(
    "ckpt",
    "checkpoint stall / persist / reshard-load vs memcpy, fsync, torch.save",
    CkptBench);
}  // namespace strata::bench
