#include "checkpoint/internal/file_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace strata::checkpoint::internal {

Status FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open " + dir);
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return ErrnoToStatus(err, "fsync " + dir);
  return absl::OkStatus();
}

Status MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      const std::string p = dir.substr(0, i);
      if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
        return ErrnoToStatus(errno, "mkdir " + p);
    }
  }
  return absl::OkStatus();
}

Status WriteFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrnoToStatus(errno, "open " + tmp);
  auto fail = [&](const std::string& what) {
    Status st = ErrnoToStatus(errno, what + " " + tmp);
    close(fd);
    unlink(tmp.c_str());  // a partial file must not hold a full disk
    return st;
  };
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return fail("write");
    done += static_cast<size_t>(w);
  }
  if (fsync(fd) != 0) return fail("fsync");
  if (close(fd) != 0) {
    Status st = ErrnoToStatus(errno, "close " + tmp);
    unlink(tmp.c_str());
    return st;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = ErrnoToStatus(errno, "rename " + tmp);
    unlink(tmp.c_str());
    return st;
  }
  return FsyncDir(path.substr(0, path.find_last_of('/')));
}

Status ReadAt(int fd, const std::string& path, uint64_t offset, void* buf,
              size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, static_cast<char*>(buf) + done, n - done,
                      static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoToStatus(errno, "read " + path);
    if (r == 0) {
      return absl::DataLossError(absl::StrCat(path,
                                              " is truncated: wanted bytes [",
                                              offset, ", ", offset + n, ")"));
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

StatusOr<std::string> ReadFileNoFollow(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(path +
                                         " is a symlink; not followed");
  }
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      Status st = ErrnoToStatus(errno, "read " + path);
      close(fd);
      return st;
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  close(fd);
  return out;
}

namespace {

class FlockPin final : public StepPin {
 public:
  explicit FlockPin(int fd) : fd_(fd) {}
  ~FlockPin() override { close(fd_); }

 private:
  const int fd_;
};

int OpenLockFile(const std::string& path, bool create) {
  return open(path.c_str(),
              O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0),
              0644);
}

}  // namespace

StatusOr<std::unique_ptr<StepPin>> PinFile(const std::string& path,
                                           bool create) {
  // A remover holds the exclusive lock only while it unlinks: retry when
  // the file we locked was unlinked meanwhile (with `create` a new one is
  // made; without, the step is gone).
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = OpenLockFile(path, create);
    if (fd < 0) return ErrnoToStatus(errno, "open " + path);
    struct stat st {};
    if (flock(fd, LOCK_SH) != 0 || fstat(fd, &st) != 0) {
      Status s = ErrnoToStatus(errno, "lock " + path);
      close(fd);
      return s;
    }
    if (st.st_nlink > 0) return std::unique_ptr<StepPin>(new FlockPin(fd));
    close(fd);
    if (!create) break;
  }
  return absl::NotFoundError(path + " was removed");
}

StatusOr<int> LockExclusive(const std::string& path, bool create,
                            const std::string& what) {
  const int fd = OpenLockFile(path, create);
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(what + " is pinned by a reader");
    }
    return ErrnoToStatus(err, "lock " + path);
  }
  return fd;
}

}  // namespace strata::checkpoint::internal
