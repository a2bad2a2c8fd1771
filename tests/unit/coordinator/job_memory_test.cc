// A long-lived coordinator holds bounded memory (issue: a year-long
// coordinator): 2,000 short jobs driven through the Service as a worker
// would, with the retention keeping 50 ended jobs. After the first 100 the
// state is at its bound; after 2,000 the process's resident memory and the
// /metrics series must be within 10% of that. The per-job growth is printed
// (the figure docs/results.md extrapolates to 10,000 jobs), with how much
// of it the heap's live allocations, malloc's arena and RocksDB's caches
// account for. The process uses the coordinator's heap policy
// (server/heap_policy.h). STRATA_JOB_MEMORY_JOBS=10000 runs 10,000 jobs
// (about 3 minutes; not in the suite).
#include <malloc.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_split.h"
#include "coordinator/metrics/metrics_render.h"
#include "coordinator/server/heap_policy.h"
#include "tests/unit/coordinator/job_driver.h"

namespace strata::coordinator {
namespace {

constexpr int kWarmJobs = 100;
constexpr int kDefaultJobs = 2000;
constexpr int64_t kKeepEnded = 50;

// Resident set size of this process (bytes), from /proc/self/statm.
int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// glibc's heap: bytes in use by live allocations, and the arena holding
// them (in use + free chunks not returned to the system), mallinfo2(3).
struct Heap {
  int64_t in_use = 0, arena = 0;
};
Heap HeapNow() {
  const struct mallinfo2 m = mallinfo2();
  return {static_cast<int64_t>(m.uordblks + m.hblkhd),
          static_cast<int64_t>(m.arena + m.hblkhd)};
}

// Series in the exposition: lines that are not comments.
int Series(JobManager& jobs) {
  MetricsInput in;
  in.jobs = jobs.List(/*with_steps=*/true);
  in.step_seconds = jobs.StepHistograms();
  int n = 0;
  for (absl::string_view line : absl::StrSplit(RenderMetrics(in), '\n')) {
    if (!line.empty() && line[0] != '#') ++n;
  }
  return n;
}

TEST(JobMemoryTest, TwoThousandJobsHoldWhatTheFirstHundredHeld) {
  ConfigureHeap();  // as strata-coordinator's main() does first
  const char* env = std::getenv("STRATA_JOB_MEMORY_JOBS");
  const int kJobs = env != nullptr ? std::atoi(env) : kDefaultJobs;
  ASSERT_GT(kJobs, kWarmJobs);
  JobOptions options;
  options.default_worker_wait_ms = 10000;
  options.default_grace_ms = 100;
  options.retention.max_ended_jobs = kKeepEnded;
  ControlFixture f(options);
  JobDriver d(&f);
  for (int i = 0; i < kWarmJobs; ++i) {
    ASSERT_EQ(d.RunOne(i % 10 == 9 ? 1 : 0), i % 10 == 9 ? control::FAILED
                                                         : control::SUCCEEDED);
  }
  const int64_t rss_warm = RssBytes();
  const Heap heap_warm = HeapNow();
  const StateStore::Memory rocks_warm = f.store->MemoryUsage();
  const int series_warm = Series(*f.jobs);
  for (int i = kWarmJobs; i < kJobs; ++i) {
    ASSERT_EQ(d.RunOne(i % 10 == 9 ? 1 : 0), i % 10 == 9 ? control::FAILED
                                                         : control::SUCCEEDED);
  }
  const int64_t rss = RssBytes();
  const Heap heap = HeapNow();
  const StateStore::Memory rocks = f.store->MemoryUsage();
  const int series = Series(*f.jobs);
  const double per_job =
      static_cast<double>(rss - rss_warm) / (kJobs - kWarmJobs);
  std::printf(
      "after %d jobs: RSS %.1f MB, %d series; after %d: RSS %.1f MB, %d "
      "series; %.0f bytes per job\n",
      kWarmJobs, rss_warm / 1e6, series_warm, kJobs, rss / 1e6, series,
      per_job);
  auto per = [&](int64_t a, int64_t b) {
    return static_cast<double>(b - a) / (kJobs - kWarmJobs);
  };
  std::printf(
      "per job: heap in use %+.0f, heap arena %+.0f; RocksDB memtables %.0f "
      "-> %.0f KB, block cache %.0f -> %.0f KB, table readers %.0f -> %.0f "
      "KB\n",
      per(heap_warm.in_use, heap.in_use), per(heap_warm.arena, heap.arena),
      rocks_warm.memtables / 1e3, rocks.memtables / 1e3,
      rocks_warm.block_cache / 1e3, rocks.block_cache / 1e3,
      rocks_warm.table_readers / 1e3, rocks.table_readers / 1e3);
  EXPECT_EQ(f.jobs->List().jobs_size(), kKeepEnded);
  EXPECT_LE(rss, rss_warm * 1.10);
  EXPECT_LE(series, series_warm * 1.10);
  EXPECT_GE(series, series_warm * 0.90);
  // Every job is still found (from the store once it left memory).
  EXPECT_EQ(f.jobs->Get("job-1")->state(), control::SUCCEEDED);
  EXPECT_EQ(f.jobs->Get("job-10")->state(), control::FAILED);
}

}  // namespace
}  // namespace strata::coordinator
