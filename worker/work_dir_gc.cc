#include "worker/work_dir_gc.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata::worker {
namespace {

namespace fs = std::filesystem;

bool IsJobName(const std::string& name) {
  if (name.size() <= 4 || name.rfind("job-", 0) != 0) return false;
  return std::all_of(name.begin() + 4, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// Modification time in ms since the epoch, without following a symlink;
// 0 if it cannot be read.
int64_t MtimeMs(const fs::path& p) {
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) return 0;
  return int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// The newest mtime of `dir` and of its entries two levels deep
// (<job>/attempt-<a>/rank-<r>.stdout), never following symlinks.
int64_t NewestMs(const fs::path& dir) {
  int64_t newest = MtimeMs(dir);
  std::error_code ec;
  for (fs::directory_iterator a(dir, ec), end; !ec && a != end;
       a.increment(ec)) {
    newest = std::max(newest, MtimeMs(a->path()));
    if (!a->is_directory(ec) || a->is_symlink(ec)) continue;
    std::error_code ec2;
    for (fs::directory_iterator f(a->path(), ec2); !ec2 && f != end;
         f.increment(ec2)) {
      newest = std::max(newest, MtimeMs(f->path()));
    }
  }
  return newest;
}

}  // namespace

WorkDirGc::WorkDirGc(const Clock* clock, std::string work_dir,
                     const RankRunner* runner, WorkDirGcOptions options,
                     Logger logger)
    : clock_(clock),
      work_dir_(std::move(work_dir)),
      runner_(runner),
      options_(options),
      logger_(std::move(logger)) {}

int WorkDirGc::Tick() {
  const int64_t now = clock_->SteadyNowMs();
  if (swept_ && now - last_sweep_ms_ < options_.sweep_interval_ms) return 0;
  swept_ = true;
  last_sweep_ms_ = now;
  return Sweep();
}

int WorkDirGc::Sweep() {
  std::set<std::string> held;
  for (const auto& r : runner_->Reports()) held.insert(r.job_id());
  struct Ended {
    int64_t newest_ms;
    std::string name;
  };
  std::vector<Ended> ended;
  std::error_code ec;
  for (fs::directory_iterator e(work_dir_, ec), end; !ec && e != end;
       e.increment(ec)) {
    const std::string name = e->path().filename().string();
    struct stat st;
    if (!IsJobName(name) || held.contains(name) ||
        lstat(e->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      continue;
    }
    ended.push_back({NewestMs(e->path()), name});
  }
  if (ec) {
    logger_->warn("work dir {}: cannot list it: {}", work_dir_, ec.message());
    return 0;
  }
  // Newest first: the ones past max_ended_jobs are the oldest.
  std::sort(ended.begin(), ended.end(), [](const Ended& a, const Ended& b) {
    return a.newest_ms > b.newest_ms;
  });
  const int64_t now = clock_->NowMs();
  int removed = 0;
  for (size_t i = 0; i < ended.size(); ++i) {
    const int64_t age_ms = now - ended[i].newest_ms;
    const bool too_old = age_ms > options_.retention_ms;
    const bool too_many = static_cast<int64_t>(i) >= options_.max_ended_jobs;
    if (!too_old && !too_many) continue;
    const fs::path dir = fs::path(work_dir_) / ended[i].name;
    std::error_code rm;
    fs::remove_all(dir, rm);
    if (rm) {
      logger_->warn("work dir: cannot remove {} (ended job): {}", dir.string(),
                    rm.message());
      continue;
    }
    ++removed;
    logger_->info(
        "work dir: removed {} (ended job, last written {} s ago; {})",
        dir.string(), age_ms / 1000,
        too_old ? absl::StrCat("retention ", options_.retention_ms / 1000, " s")
                : absl::StrCat("more than ", options_.max_ended_jobs,
                               " ended job dirs"));
  }
  return removed;
}

}  // namespace strata::worker
