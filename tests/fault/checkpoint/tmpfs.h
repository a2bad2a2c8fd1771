// A small tmpfs for the checkpoint fault tests: real ENOSPC from a real
// file system. Mounted by the test (needs CAP_SYS_ADMIN; the test skips
// otherwise), filled with a filler file up to a chosen free space, freed by
// removing the filler, unmounted at the end.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace strata::checkpoint::fault {

class SmallTmpfs {
 public:
  // Mounts a tmpfs of `bytes` at a fresh directory; ok() tells whether it
  // worked.
  explicit SmallTmpfs(uint64_t bytes) {
    char tmpl[] = "/tmp/ckpt_fault_XXXXXX";
    dir_ = mkdtemp(tmpl);
    const std::string opts = "size=" + std::to_string(bytes);
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    rmdir(dir_.c_str());
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& dir() const { return dir_; }

  uint64_t FreeBytes() const {
    struct statvfs s{};
    statvfs(dir_.c_str(), &s);
    return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  }
  // Writes filler until at most `leave` bytes are free.
  void Fill(uint64_t leave) {
    const int fd = open((dir_ + "/filler").c_str(),
                        O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char> block(4096, 'x');
    while (FreeBytes() > leave) {
      if (write(fd, block.data(), block.size()) <= 0) break;
    }
    close(fd);
  }
  void Free() { unlink((dir_ + "/filler").c_str()); }

 private:
  std::string dir_;
  bool mounted_ = false;
};

}  // namespace strata::checkpoint::fault
