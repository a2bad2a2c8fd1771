// file:// storage: DIR/step-<12 digits>/<name>, metadata written with
// tmp + fsync + rename + directory fsync, data through the O_DIRECT writer and
// reader. Below DIR nothing is followed through a symlink: step directories
// are checked with lstat before use (a symlinked one is not a step) and
// files are opened with O_NOFOLLOW. A step's manifest doubles as its pin
// (StepPin): readers hold a shared flock on it, RemoveStep takes the
// exclusive one without waiting before it unlinks the manifest.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "checkpoint/internal/direct_reader.h"
#include "checkpoint/internal/direct_writer.h"
#include "checkpoint/internal/file_util.h"
#include "checkpoint/storage/storages.h"
#include "common/mutex.h"

namespace strata::checkpoint {
namespace {

class DirectSink final : public DataSink {
 public:
  explicit DirectSink(std::unique_ptr<internal::DirectWriter> w)
      : w_(std::move(w)) {}
  Status Append(const char* data, size_t n) override {
    return w_->Append(data, n);
  }
  Status Finish() override { return w_->Finish(); }
  uint64_t size() const override { return w_->size(); }

 private:
  std::unique_ptr<internal::DirectWriter> w_;
};

Status CheckName(const std::string& name) {
  if (ValidName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError("checkpoint entry name '" + name +
                                    "' is not a single path component");
}

class FileStorage final : public Storage {
 public:
  FileStorage(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {}

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override {
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(MakeStepDir(step));
    ASSIGN_OR_RETURN(auto w, internal::DirectWriter::Create(Where(step, name)));
    return std::unique_ptr<DataSink>(
        std::make_unique<DirectSink>(std::move(w)));
  }

  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override {
    RETURN_IF_ERROR(CheckName(name));
    const std::string path = Where(step, name);
    std::shared_ptr<internal::DirectReader> reader;
    {
      MutexLock lock(mu_);
      auto& r = readers_[path];
      if (r == nullptr) {
        if (Status st = CheckStepDir(step); !st.ok()) {
          readers_.erase(path);
          return absl::DataLossError(std::string(st.message()));
        }
        auto opened = internal::DirectReader::Open(path);
        if (!opened.ok()) {
          readers_.erase(path);
          return opened.status();
        }
        r = std::move(*opened);
      }
      reader = r;
    }
    return reader->Read(offset, buf, n);
  }

  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override {
    RETURN_IF_ERROR(CheckName(name));
    if (step < 0) {
      RETURN_IF_ERROR(internal::MakeDirs(dir_));
    } else {
      RETURN_IF_ERROR(MakeStepDir(step));
    }
    return internal::WriteFileAtomic(Where(step, name), bytes);
  }

  StatusOr<std::string> GetMeta(int64_t step,
                                const std::string& name) override {
    RETURN_IF_ERROR(CheckName(name));
    if (step >= 0) RETURN_IF_ERROR(CheckStepDir(step));
    auto bytes = internal::ReadFileNoFollow(Where(step, name));
    if (absl::IsNotFound(bytes.status()))
      return absl::NotFoundError(Where(step, name) + " is missing");
    return bytes;
  }

  StatusOr<std::vector<int64_t>> Steps() override {
    std::vector<int64_t> steps;
    for (int64_t step : ListStepDirs()) {
      struct stat st {};
      if (lstat(Where(step, "manifest.pb").c_str(), &st) == 0 &&
          S_ISREG(st.st_mode)) {
        steps.push_back(step);
      }
    }
    if (steps.empty() && access(dir_.c_str(), F_OK) != 0)
      return ErrnoToStatus(errno, "open checkpoint directory " + dir_);
    return steps;
  }

  StatusOr<std::unique_ptr<StepPin>> PinStep(int64_t step) override {
    if (Status st = CheckStepDir(step); !st.ok())
      return absl::NotFoundError(std::string(st.message()));
    auto pin = internal::PinFile(Where(step, "manifest.pb"), /*create=*/false);
    if (absl::IsNotFound(pin.status())) {
      return absl::NotFoundError(
          absl::StrFormat("no committed checkpoint at step %d (%s missing)",
                          step, Where(step, "manifest.pb")));
    }
    return pin;
  }

  Status RemoveStep(int64_t step) override {
    const std::string path = StepPath(step);
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
    if (!S_ISDIR(st.st_mode)) {
      // A symlink (or file) where a step belongs: drop the entry itself,
      // never what it points to.
      if (unlink(path.c_str()) != 0)
        return ErrnoToStatus(errno, "unlink " + path);
      return absl::OkStatus();
    }
    // Uncommit first, holding the exclusive lock: fails while pinned.
    auto lock = internal::LockExclusive(Where(step, "manifest.pb"),
                                        /*create=*/false,
                                        absl::StrFormat("step %d", step));
    if (lock.ok()) {
      unlink(Where(step, "manifest.pb").c_str());
      close(*lock);
    } else if (absl::IsFailedPrecondition(lock.status())) {
      return lock.status();
    }
    {
      // Close the step's files (a reader still using one keeps it open).
      MutexLock guard(mu_);
      const std::string prefix = path + "/";
      std::erase_if(readers_, [&](const auto& e) {
        return e.first.compare(0, prefix.size(), prefix) == 0;
      });
    }
    // remove_all never follows symlinks: it removes the links themselves.
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) {
      return absl::UnavailableError("could not remove " + path + ": " +
                                    ec.message());
    }
    return absl::OkStatus();
  }

  // This rank's files in step directories without a manifest (failed or
  // removed saves), other than `current`'s; a directory left empty goes too.
  Status CollectGarbage(int64_t current,
                        const std::set<int64_t>& failed) override {
    const std::string mine = absl::StrFormat("rank-%05d.", rank_);
    // A step newer than the newest commit may still be committing (rank 0
    // merges the ranks' indexes after they moved on): garbage only if this
    // rank's own save of it failed.
    const auto steps = ListStepDirs();
    int64_t newest = -1;
    for (int64_t step : steps) {
      struct stat st {};
      if (lstat(Where(step, "manifest.pb").c_str(), &st) == 0) {
        newest = std::max(newest, step);
      }
    }
    for (int64_t step : steps) {
      struct stat st {};
      if (step == current || (step > newest && !failed.contains(step)) ||
          lstat(StepPath(step).c_str(), &st) != 0 ||
          !S_ISDIR(st.st_mode) ||
          lstat(Where(step, "manifest.pb").c_str(), &st) == 0) {
        continue;
      }
      DIR* d = opendir(StepPath(step).c_str());
      if (d == nullptr) continue;
      std::vector<std::string> names;
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind(mine, 0) == 0 ||
            (rank_ == 0 && name == "manifest.pb.tmp")) {
          names.push_back(name);
        }
      }
      closedir(d);
      for (const std::string& name : names) {
        if (unlink(Where(step, name).c_str()) != 0 && errno != ENOENT)
          return ErrnoToStatus(errno, "unlink " + Where(step, name));
      }
      rmdir(StepPath(step).c_str());  // fails while other ranks' files remain
    }
    return absl::OkStatus();
  }

  std::string Where(int64_t step, const std::string& name) const override {
    return (step < 0 ? dir_ : StepPath(step)) + "/" + name;
  }

 private:
  std::string StepPath(int64_t step) const { return StepDir(dir_, step); }

  // The steps of the "step-<digits>" entries that are real directories.
  std::vector<int64_t> ListStepDirs() const {
    std::vector<int64_t> steps;
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr) return steps;
    while (dirent* e = readdir(d)) {
      int64_t step = 0;
      const std::string name = e->d_name;
      struct stat st {};
      if (name.rfind("step-", 0) == 0 &&
          absl::SimpleAtoi(name.substr(5), &step) && step >= 0 &&
          name == StepDir("", step).substr(1) &&
          lstat((dir_ + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        steps.push_back(step);
      }
    }
    closedir(d);
    std::sort(steps.begin(), steps.end());
    return steps;
  }

  // OK when the step directory is a real directory (or absent);
  // FailedPrecondition naming it when it is a symlink or a file.
  Status CheckStepDir(int64_t step) const {
    struct stat st {};
    if (lstat(StepPath(step).c_str(), &st) != 0 || S_ISDIR(st.st_mode))
      return absl::OkStatus();
    return absl::FailedPreconditionError(
        StepPath(step) + " is not a directory (a symlink?); not followed");
  }

  Status MakeStepDir(int64_t step) {
    RETURN_IF_ERROR(internal::MakeDirs(dir_));
    if (mkdir(StepPath(step).c_str(), 0755) != 0 && errno != EEXIST)
      return ErrnoToStatus(errno, "mkdir " + StepPath(step));
    return CheckStepDir(step);
  }

  const std::string dir_;
  const int rank_;
  Mutex mu_;
  // Open data files.
  std::map<std::string, std::shared_ptr<internal::DirectReader>> readers_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

bool ValidName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string StepDir(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step-%012d", dir, step);
}

std::shared_ptr<Storage> NewFileStorage(const std::string& dir, int rank) {
  return std::make_shared<FileStorage>(dir, rank);
}

}  // namespace strata::checkpoint
