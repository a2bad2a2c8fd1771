// libstrata_failio.so: injects real I/O errors into an unmodified process.
//
// Preload it (LD_PRELOAD=.../libstrata_failio.so) and describe the fault in
// the environment; every call that is not selected behaves exactly as libc.
//
//   STRATA_FAILIO_PATH     required; only files whose path (as the kernel
//                          reports it in /proc/self/fd, or as passed to
//                          open/rename) starts with this prefix are affected.
//   STRATA_FAILIO_ERRNO    EIO (default), ENOSPC, EDQUOT, EROFS or a number.
//   STRATA_FAILIO_OPS      comma list of: write (write, pwrite, writev,
//                          pwritev, fallocate, posix_fallocate, ftruncate),
//                          sync (fsync, fdatasync; not sync_file_range, a
//                          writeback hint RocksDB probes and asserts on),
//                          create (open/openat/creat with O_CREAT),
//                          rename (rename, renameat, renameat2). Default "write,sync".
//   STRATA_FAILIO_AFTER_BYTES  let this many bytes of selected writes
//                          succeed first (counted per process; default 0).
//   STRATA_FAILIO_TRIGGER  if set, fail only while this file exists, so a
//                          test can start and end the fault in a running
//                          process (like a disk filling up and being freed).
//   STRATA_FAILIO_QUIET    if set, do not report the first injected failure
//                          on stderr ("failio: write PATH -> EIO").
//
// Limits: glibc's stdio (fwrite/fflush) writes through internal calls that a
// preload cannot see; C++ streams, RocksDB's posix environment and plain
// write/pwrite calls are all seen. Calls through io_uring are not seen.
// The library is test tooling; it is never linked into strata.
//
// RocksDB under injection: a failed write of RocksDB's own LOG file aborts
// the process (Debian's librocksdb is built with assertions), so every strata
// database routes its info log through common/rocksdb_log.h instead; see
// there also for how a database recovers once the fault ends.
#ifndef STRATA_TESTS_FAULT_FAILIO_FAILIO_H_
#define STRATA_TESTS_FAULT_FAILIO_FAILIO_H_
#endif  // STRATA_TESTS_FAULT_FAILIO_FAILIO_H_
