// RocksDB's info log routed to a strata spdlog logger instead of the
// database directory's LOG file.
//
// Every strata RocksDB database (coordinator state, checkpoint catalog,
// rocksdb:// checkpoint storage) sets `options.info_log = NewRocksDbLog(...)`.
// Two reasons: RocksDB's messages land in the same stream as the module's own
// (with its level), and an I/O error while writing the LOG file must not take
// the process down — Debian's librocksdb 7.8 is built with assertions, and a
// failed LOG append followed by its periodic flush aborts in
// WritableFileWriter (`sync_without_flush_called_`). With this logger a full
// or failing disk reaches the caller as a rocksdb::Status instead.
//
// Recovery after a failed write: rocks_db.h.
#pragma once

#include <memory>

#include "common/logging.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"

namespace strata {

// Returns a rocksdb::Logger that forwards to `logger`: RocksDB's DEBUG and
// INFO become debug (RocksDB is chatty at INFO), WARN warn, ERROR error,
// FATAL and HEADER critical/debug. Thread-safe.
std::shared_ptr<rocksdb::Logger> NewRocksDbLog(Logger logger);

// `o` made safe on a full or failing disk, for every strata database: the
// info log goes to `logger` (NewRocksDbLog), never to a LOG file, and files
// are not preallocated. RocksDB fallocates a WAL of 1.1 write buffers (70
// MiB by default), which takes most of a small disk before any data, and
// closing a preallocated WAL frees space, so a still-full disk looks
// recovered.
rocksdb::Options FailSafeRocksDbOptions(rocksdb::Options o, Logger logger);

}  // namespace strata
