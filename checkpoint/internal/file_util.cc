#include "checkpoint/internal/file_util.h"

#include <fcntl.h>
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
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, "open " + tmp);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      Status st = ErrnoToStatus(errno, "write " + tmp);
      close(fd);
      return st;
    }
    done += static_cast<size_t>(w);
  }
  if (fsync(fd) != 0) {
    Status st = ErrnoToStatus(errno, "fsync " + tmp);
    close(fd);
    return st;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return ErrnoToStatus(errno, "rename " + tmp);
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

}  // namespace strata::checkpoint::internal
