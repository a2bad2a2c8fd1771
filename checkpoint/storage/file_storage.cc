// file:// storage: DIR/step-<12 digits>/<name>, metadata written with
// tmp + fsync + rename + directory fsync, data through the O_DIRECT writer and
// reader.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "checkpoint/internal/direct_reader.h"
#include "checkpoint/internal/direct_writer.h"
#include "checkpoint/internal/file_util.h"
#include "checkpoint/storage/storages.h"

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

class FileStorage final : public Storage {
 public:
  explicit FileStorage(std::string dir) : dir_(std::move(dir)) {}

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override {
    RETURN_IF_ERROR(internal::MakeDirs(StepPath(step)));
    ASSIGN_OR_RETURN(auto w, internal::DirectWriter::Create(Where(step, name)));
    return std::unique_ptr<DataSink>(
        std::make_unique<DirectSink>(std::move(w)));
  }

  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override {
    const std::string path = Where(step, name);
    std::shared_ptr<internal::DirectReader> reader;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& r = readers_[path];
      if (r == nullptr) {
        ASSIGN_OR_RETURN(r, internal::DirectReader::Open(path));
      }
      reader = r;
    }
    return reader->Read(offset, buf, n);
  }

  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override {
    RETURN_IF_ERROR(internal::MakeDirs(step < 0 ? dir_ : StepPath(step)));
    return internal::WriteFileAtomic(Where(step, name), bytes);
  }

  StatusOr<std::string> GetMeta(int64_t step,
                                const std::string& name) override {
    std::ifstream in(Where(step, name), std::ios::binary);
    if (!in) return absl::NotFoundError(Where(step, name) + " is missing");
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  }

  StatusOr<std::vector<int64_t>> Steps() override {
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr)
      return ErrnoToStatus(errno, "open checkpoint directory " + dir_);
    std::vector<int64_t> steps;
    while (dirent* e = readdir(d)) {
      int64_t step = 0;
      const std::string name = e->d_name;
      if (name.rfind("step-", 0) != 0 ||
          !absl::SimpleAtoi(name.substr(5), &step))
        continue;
      if (access((dir_ + "/" + name + "/manifest.pb").c_str(), F_OK) == 0)
        steps.push_back(step);
    }
    closedir(d);
    std::sort(steps.begin(), steps.end());
    return steps;
  }

  Status RemoveStep(int64_t step) override {
    unlink(Where(step, "manifest.pb").c_str());  // uncommit first
    {
      // Close the step's files (a reader still using one keeps it open).
      std::lock_guard<std::mutex> lock(mu_);
      const std::string prefix = StepPath(step) + "/";
      std::erase_if(readers_, [&](const auto& e) {
        return e.first.compare(0, prefix.size(), prefix) == 0;
      });
    }
    std::error_code ec;
    std::filesystem::remove_all(StepPath(step), ec);
    if (ec) {
      return absl::UnavailableError("could not remove " + StepPath(step) +
                                    ": " + ec.message());
    }
    return absl::OkStatus();
  }

  Status CollectGarbage(int64_t) override {
    return absl::OkStatus();
  }  // rank 0 removes dirs

  std::string Where(int64_t step, const std::string& name) const override {
    return (step < 0 ? dir_ : StepPath(step)) + "/" + name;
  }

 private:
  std::string StepPath(int64_t step) const { return StepDir(dir_, step); }

  const std::string dir_;
  std::mutex mu_;
  // Open data files, guarded by mu_.
  std::map<std::string, std::shared_ptr<internal::DirectReader>> readers_;
};

}  // namespace

std::string StepDir(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step-%012d", dir, step);
}

std::shared_ptr<Storage> NewFileStorage(const std::string& dir) {
  return std::make_shared<FileStorage>(dir);
}

}  // namespace strata::checkpoint
