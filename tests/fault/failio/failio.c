// See failio.h for the contract (environment variables and limits).
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE
#include "failio.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { kOpWrite = 1, kOpSync = 2, kOpCreate = 4, kOpRename = 8 };

static const char* g_prefix;
static size_t g_prefix_len;
static int g_errno = EIO;
static int g_ops = kOpWrite | kOpSync;
static long long g_after_bytes;
static const char* g_trigger;
static int g_quiet;
static atomic_llong g_written;
static atomic_int g_reported;

static int ParseErrno(const char* s) {
  if (s == NULL || *s == '\0') return EIO;
  if (strcmp(s, "EIO") == 0) return EIO;
  if (strcmp(s, "ENOSPC") == 0) return ENOSPC;
  if (strcmp(s, "EDQUOT") == 0) return EDQUOT;
  if (strcmp(s, "EROFS") == 0) return EROFS;
  int n = atoi(s);
  return n > 0 ? n : EIO;
}

static int ParseOps(const char* s) {
  if (s == NULL || *s == '\0') return kOpWrite | kOpSync;
  int ops = 0;
  if (strstr(s, "write")) ops |= kOpWrite;
  if (strstr(s, "sync")) ops |= kOpSync;
  if (strstr(s, "create")) ops |= kOpCreate;
  if (strstr(s, "rename")) ops |= kOpRename;
  return ops;
}

__attribute__((constructor)) static void FailioInit(void) {
  g_prefix = getenv("STRATA_FAILIO_PATH");
  if (g_prefix != NULL && *g_prefix == '\0') g_prefix = NULL;
  g_prefix_len = g_prefix ? strlen(g_prefix) : 0;
  g_errno = ParseErrno(getenv("STRATA_FAILIO_ERRNO"));
  g_ops = ParseOps(getenv("STRATA_FAILIO_OPS"));
  const char* after = getenv("STRATA_FAILIO_AFTER_BYTES");
  g_after_bytes = after ? atoll(after) : 0;
  g_trigger = getenv("STRATA_FAILIO_TRIGGER");
  if (g_trigger != NULL && *g_trigger == '\0') g_trigger = NULL;
  g_quiet = getenv("STRATA_FAILIO_QUIET") != NULL;
}

static void* Next(const char* name) { return dlsym(RTLD_NEXT, name); }

typedef ssize_t (*WriteFn)(int, const void*, size_t);

static void Report(const char* op, const char* path) {
  if (g_quiet || atomic_exchange(&g_reported, 1)) return;
  char line[2 * PATH_MAX + 96];
  int n = snprintf(line, sizeof(line), "failio: %s %s -> %s\n", op, path,
                   strerror(g_errno));
  if (n <= 0) return;
  if (n > (int)sizeof(line)) n = sizeof(line);
  static WriteFn real_write;
  if (real_write == NULL) real_write = (WriteFn)Next("write");
  ssize_t ignored = real_write(2, line, (size_t)n);
  (void)ignored;
}

static int PathSelected(const char* path) {
  if (g_prefix == NULL || path == NULL) return 0;
  char abs[PATH_MAX];
  if (path[0] != '/') {  // relative: resolve against the working directory
    if (getcwd(abs, sizeof(abs)) == NULL) return 0;
    size_t len = strlen(abs);
    snprintf(abs + len, sizeof(abs) - len, "/%s", path);
    path = abs;
  }
  if (strncmp(path, g_prefix, g_prefix_len) != 0) return 0;
  if (g_trigger != NULL && access(g_trigger, F_OK) != 0) return 0;
  return 1;
}

// The path the kernel reports for `fd`; 0 when it cannot be read.
static int FdPath(int fd, char* path, size_t size) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, size - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return 1;
}

static int FdSelected(int fd, char* path, size_t size) {
  return g_prefix != NULL && FdPath(fd, path, size) && PathSelected(path);
}

// Decides whether a write of `bytes` to `fd` fails; counts the bytes that
// are let through against STRATA_FAILIO_AFTER_BYTES.
static int FailWrite(int fd, size_t bytes, const char* op) {
  if (!(g_ops & kOpWrite)) return 0;
  char path[PATH_MAX];
  if (!FdSelected(fd, path, sizeof(path))) return 0;
  long long before = atomic_fetch_add(&g_written, (long long)bytes);
  if (before + (long long)bytes <= g_after_bytes) return 0;
  Report(op, path);
  errno = g_errno;
  return 1;
}

static int FailSync(int fd, const char* op) {
  if (!(g_ops & kOpSync)) return 0;
  char path[PATH_MAX];
  if (!FdSelected(fd, path, sizeof(path))) return 0;
  if (atomic_load(&g_written) < g_after_bytes) return 0;
  Report(op, path);
  errno = g_errno;
  return 1;
}

static int FailPath(int op_bit, const char* path, const char* op) {
  if (!(g_ops & op_bit) || !PathSelected(path)) return 0;
  if (atomic_load(&g_written) < g_after_bytes) return 0;
  Report(op, path);
  errno = g_errno;
  return 1;
}

static size_t IovBytes(const struct iovec* iov, int n) {
  size_t total = 0;
  for (int i = 0; i < n; ++i) total += iov[i].iov_len;
  return total;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static WriteFn real;
  if (!real) real = (WriteFn)Next("write");
  if (FailWrite(fd, count, "write")) return -1;
  return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = Next("pwrite");
  if (FailWrite(fd, count, "pwrite")) return -1;
  return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  static ssize_t (*real)(int, const void*, size_t, off64_t);
  if (!real) real = Next("pwrite64");
  if (FailWrite(fd, count, "pwrite")) return -1;
  return real(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  static ssize_t (*real)(int, const struct iovec*, int);
  if (!real) real = Next("writev");
  if (FailWrite(fd, IovBytes(iov, iovcnt), "writev")) return -1;
  return real(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec* iov, int iovcnt, off_t offset) {
  static ssize_t (*real)(int, const struct iovec*, int, off_t);
  if (!real) real = Next("pwritev");
  if (FailWrite(fd, IovBytes(iov, iovcnt), "pwritev")) return -1;
  return real(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec* iov, int iovcnt, off64_t offset) {
  static ssize_t (*real)(int, const struct iovec*, int, off64_t);
  if (!real) real = Next("pwritev64");
  if (FailWrite(fd, IovBytes(iov, iovcnt), "pwritev")) return -1;
  return real(fd, iov, iovcnt, offset);
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
  static int (*real)(int, int, off_t, off_t);
  if (!real) real = Next("fallocate");
  if (FailWrite(fd, 0, "fallocate")) return -1;
  return real(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off64_t offset, off64_t len) {
  static int (*real)(int, int, off64_t, off64_t);
  if (!real) real = Next("fallocate64");
  if (FailWrite(fd, 0, "fallocate")) return -1;
  return real(fd, mode, offset, len);
}

int posix_fallocate(int fd, off_t offset, off_t len) {
  static int (*real)(int, off_t, off_t);
  if (!real) real = Next("posix_fallocate");
  if (FailWrite(fd, 0, "posix_fallocate")) return errno;  // returns the error
  return real(fd, offset, len);
}

int posix_fallocate64(int fd, off64_t offset, off64_t len) {
  static int (*real)(int, off64_t, off64_t);
  if (!real) real = Next("posix_fallocate64");
  if (FailWrite(fd, 0, "posix_fallocate")) return errno;
  return real(fd, offset, len);
}

int ftruncate(int fd, off_t length) {
  static int (*real)(int, off_t);
  if (!real) real = Next("ftruncate");
  if (FailWrite(fd, 0, "ftruncate")) return -1;
  return real(fd, length);
}

int ftruncate64(int fd, off64_t length) {
  static int (*real)(int, off64_t);
  if (!real) real = Next("ftruncate64");
  if (FailWrite(fd, 0, "ftruncate")) return -1;
  return real(fd, length);
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = Next("fsync");
  if (FailSync(fd, "fsync")) return -1;
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = Next("fdatasync");
  if (FailSync(fd, "fdatasync")) return -1;
  return real(fd);
}

// open and openat take a mode only with O_CREAT or O_TMPFILE.
static mode_t ModeArg(int flags, va_list ap) {
  return (flags & (O_CREAT | __O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

// The open family: fail a create under the prefix, else call `real`.
typedef int (*OpenFn)(const char*, int, ...);
typedef int (*OpenAtFn)(int, const char*, int, ...);

static int Open(OpenFn real, const char* path, int flags, mode_t mode) {
  if ((flags & O_CREAT) && FailPath(kOpCreate, path, "open")) return -1;
  return real(path, flags, mode);
}

// openat with a directory fd: the path is resolved against that directory.
static int AtSelected(int op_bit, int dirfd, const char* path, const char* op) {
  if (path[0] == '/' || dirfd == AT_FDCWD) return FailPath(op_bit, path, op);
  char dir[PATH_MAX], full[2 * PATH_MAX + 2];
  if (!FdPath(dirfd, dir, sizeof(dir))) return 0;
  snprintf(full, sizeof(full), "%s/%s", dir, path);
  return FailPath(op_bit, full, op);
}

static int OpenAt(OpenAtFn real, int dirfd, const char* path, int flags,
                  mode_t mode) {
  if ((flags & O_CREAT) && AtSelected(kOpCreate, dirfd, path, "openat"))
    return -1;
  return real(dirfd, path, flags, mode);
}

// Each symbol reads its optional mode argument, then shares the above.
#define FAILIO_MODE(flags, mode)    \
  va_list ap;                       \
  va_start(ap, flags);              \
  mode_t mode = ModeArg(flags, ap); \
  va_end(ap)

int open(const char* path, int flags, ...) {
  static OpenFn real;
  if (!real) real = (OpenFn)Next("open");
  FAILIO_MODE(flags, mode);
  return Open(real, path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  static OpenFn real;
  if (!real) real = (OpenFn)Next("open64");
  FAILIO_MODE(flags, mode);
  return Open(real, path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  static OpenAtFn real;
  if (!real) real = (OpenAtFn)Next("openat");
  FAILIO_MODE(flags, mode);
  return OpenAt(real, dirfd, path, flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  static OpenAtFn real;
  if (!real) real = (OpenAtFn)Next("openat64");
  FAILIO_MODE(flags, mode);
  return OpenAt(real, dirfd, path, flags, mode);
}

int creat(const char* path, mode_t mode) {
  static int (*real)(const char*, mode_t);
  if (!real) real = Next("creat");
  if (FailPath(kOpCreate, path, "creat")) return -1;
  return real(path, mode);
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*);
  if (!real) real = Next("rename");
  if (FailPath(kOpRename, to, "rename")) return -1;
  return real(from, to);
}

int renameat(int olddirfd, const char* from, int newdirfd, const char* to) {
  static int (*real)(int, const char*, int, const char*);
  if (!real) real = Next("renameat");
  if (AtSelected(kOpRename, newdirfd, to, "renameat")) return -1;
  return real(olddirfd, from, newdirfd, to);
}

int renameat2(int olddirfd, const char* from, int newdirfd, const char* to,
              unsigned int flags) {
  static int (*real)(int, const char*, int, const char*, unsigned int);
  if (!real) real = Next("renameat2");
  if (AtSelected(kOpRename, newdirfd, to, "renameat2")) return -1;
  return real(olddirfd, from, newdirfd, to, flags);
}
