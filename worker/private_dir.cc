#include "worker/private_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace strata::worker {

Status MakePrivateDir(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, "mkdir " + path);
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                        O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "work dir ", path, " is not a directory of its own (",
        std::strerror(errno), "; a symlink is refused): remove it or pass "
        "another --work-dir"));
  }
  struct stat st;
  Status s = absl::OkStatus();
  if (fstat(fd, &st) != 0) {
    s = ErrnoToStatus(errno, "stat " + path);
  } else if (st.st_uid != geteuid()) {
    s = absl::FailedPreconditionError(absl::StrCat(
        "refusing work dir ", path, ": owned by uid ", st.st_uid,
        ", not by this worker's uid ", geteuid(),
        "; another user could have planted files in it. Remove it or pass "
        "another --work-dir"));
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    s = absl::FailedPreconditionError(absl::StrCat(
        "refusing work dir ", path, ": writable by group or others (mode ",
        mode, "); remove it or pass another --work-dir"));
  } else if (fchmod(fd, 0700) != 0) {
    s = ErrnoToStatus(errno, "chmod 0700 " + path);
  }
  close(fd);
  return s;
}

Status WritePrivateFile(const std::string& path, const std::string& text,
                        int mode) {
  const std::string tmp = absl::StrCat(path, ".new.", getpid());
  unlink(tmp.c_str());  // ours from an earlier crash, or a planted one
  const int fd = open(tmp.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      mode);
  if (fd < 0) return ErrnoToStatus(errno, "create " + tmp);
  size_t done = 0;
  int err = 0;
  while (done < text.size() && err == 0) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (err == 0 && fchmod(fd, mode) != 0) err = errno;
  close(fd);
  if (err == 0 && rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    unlink(tmp.c_str());
    return ErrnoToStatus(err, "write " + path);
  }
  return absl::OkStatus();
}

namespace {

// Opens `path` without following a symlink and runs `f(fd, stat)`.
template <typename F>
Status WithNoFollow(const std::string& path, F f) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open ", path, " (", std::strerror(errno),
        "; a symlink is refused)"));
  }
  struct stat st;
  Status s = fstat(fd, &st) == 0 ? f(fd, st) : ErrnoToStatus(errno, "stat " + path);
  close(fd);
  return s;
}

}  // namespace

Status OpenToGroup(const std::string& path, gid_t gid) {
  return WithNoFollow(path, [&](int fd, const struct stat& st) -> Status {
    if (st.st_uid != geteuid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is owned by uid ", st.st_uid, ", not by this worker"));
    }
    const mode_t mode = S_ISDIR(st.st_mode) ? 0710 : 0640;
    if (fchown(fd, static_cast<uid_t>(-1), gid) != 0 || fchmod(fd, mode) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("chgrp ", gid, " ", path));
    }
    return absl::OkStatus();
  });
}

Status HandTo(const std::string& path, uid_t uid, gid_t gid) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  const int err = fchown(fd, uid, gid) == 0 ? 0 : errno;
  close(fd);
  if (err != 0) return ErrnoToStatus(err, absl::StrCat("chown ", uid, " ", path));
  return absl::OkStatus();
}

Status OpenDirToGroup(const std::string& path, gid_t gid) {
  RETURN_IF_ERROR(MakePrivateDir(path));
  return OpenToGroup(path, gid);
}

Status MakeDirFor(const std::string& path, uid_t uid, gid_t gid) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, "mkdir " + path);
  }
  return WithNoFollow(path, [&](int fd, const struct stat& st) -> Status {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(path + " is not a directory");
    }
    if (st.st_uid == geteuid() && st.st_uid != uid &&
        fchown(fd, uid, gid) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("chown ", uid, " ", path));
    }
    if (st.st_uid != geteuid() && st.st_uid != uid) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing ", path, ": owned by uid ", st.st_uid, ", not ", uid));
    }
    if (fchmod(fd, 0700) != 0) return ErrnoToStatus(errno, "chmod " + path);
    return absl::OkStatus();
  });
}

}  // namespace strata::worker
