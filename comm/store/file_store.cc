// File store: key k lives in <dir>/<hex(k)>. Writers create a unique
// temporary file and rename() it into place (atomic on POSIX), so readers
// never see half a value. Waiters poll with a short back-off; that is fine
// for rendezvous (a few keys per rank), not for data.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/store.h"

namespace strata::comm {
namespace {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  Status Set(const std::string& key, const std::string& value) override {
    const std::string tmp =
        absl::StrCat(Path(key), ".tmp.", getpid(), ".",
                     std::hash<std::thread::id>()(std::this_thread::get_id()));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << value;
      if (!out.good()) return ErrnoToStatus(errno, "write " + tmp);
    }
    if (rename(tmp.c_str(), Path(key).c_str()) != 0) {
      return ErrnoToStatus(errno, "rename " + tmp);
    }
    return absl::OkStatus();
  }

  StatusOr<std::string> Get(const std::string& key, Duration timeout) override {
    RETURN_IF_ERROR(Wait({key}, timeout));
    return Read(key);
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    const std::string lock_path = dir_ + "/.lock";
    int fd = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoToStatus(errno, "open " + lock_path);
    flock(fd, LOCK_EX);
    int64_t value = 0;
    Status st;
    auto current = Read(key);
    if (current.ok() && !absl::SimpleAtoi(*current, &value)) {
      st = absl::FailedPreconditionError("store: key '" + key +
                                         "' holds a non-integer value");
    } else {
      value += delta;
      st = Set(key, std::to_string(value));
    }
    flock(fd, LOCK_UN);
    close(fd);
    if (!st.ok()) return st;
    return value;
  }

  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    const auto end = std::chrono::steady_clock::now() + timeout;
    int sleep_ms = 1;
    for (;;) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        struct stat st;
        if (stat(Path(k).c_str(), &st) != 0) missing.push_back(k);
      }
      if (missing.empty()) return absl::OkStatus();
      if (std::chrono::steady_clock::now() >= end) {
        return absl::DeadlineExceededError(
            "store: timed out waiting for keys: " +
            absl::StrJoin(missing, ", "));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      sleep_ms = std::min(sleep_ms * 2, 20);
    }
  }

  StatusOr<bool> Check(const std::string& key) override {
    struct stat st;
    return stat(Path(key).c_str(), &st) == 0;
  }

  Status Delete(const std::string& key) override {
    if (unlink(Path(key).c_str()) != 0 && errno != ENOENT) {
      return ErrnoToStatus(errno, "unlink");
    }
    return absl::OkStatus();
  }

 private:
  std::string Path(const std::string& key) const {
    return dir_ + "/" + absl::BytesToHexString(key);
  }
  StatusOr<std::string> Read(const std::string& key) const {
    std::ifstream in(Path(key), std::ios::binary);
    if (!in) return absl::NotFoundError("store: no key '" + key + "'");
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  }

  const std::string dir_;
};

}  // namespace

StatusOr<std::shared_ptr<Store>> NewFileStore(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, "mkdir " + dir);
  }
  return std::shared_ptr<Store>(std::make_shared<FileStore>(dir));
}

}  // namespace strata::comm
