// Rendezvous key-value store (docs/comm.md): how ranks of a job find each
// other and agree on small facts (addresses, commit votes, counters).
//
// Contract shared by every implementation (in-memory, file, TCP server,
// coordinator-hosted):
// - Keys are arbitrary byte strings; values are byte strings.
// - Set overwrites; Get blocks until the key exists or the timeout passes;
//   Wait blocks until every key exists; Add atomically adds to a decimal
//   integer stored under the key (absent = 0) and returns the new value.
// - Timeouts are wall-clock durations; expiry gives DeadlineExceeded naming
//   the missing keys. An unreachable server gives Unavailable.
// - Implementations are thread-safe: any thread may call any method.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::comm {

class Store {
 public:
  using Duration = std::chrono::milliseconds;
  static constexpr Duration kDefaultTimeout = std::chrono::seconds(300);

  virtual ~Store() = default;

  virtual Status Set(const std::string& key, const std::string& value) = 0;
  virtual StatusOr<std::string> Get(const std::string& key,
                                    Duration timeout) = 0;
  virtual StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  virtual Status Wait(const std::vector<std::string>& keys,
                      Duration timeout) = 0;
  // Returns whether `key` is present without blocking.
  virtual StatusOr<bool> Check(const std::string& key) = 0;
  virtual Status Delete(const std::string& key) = 0;
};

// Process-local store for ranks run as threads (tests, single-node tools).
std::shared_ptr<Store> NewInMemoryStore();

// A directory of files, one per key, shared by processes on one host or a
// shared file system (gloo FileStore). Set writes a temporary file and
// renames it; Add takes an flock on the directory's lock file.
StatusOr<std::shared_ptr<Store>> NewFileStore(const std::string& dir);

// TCP store: a server thread owning an in-memory store, for a launcher or
// rank 0 to host; clients from any process. Wire format in docs/comm.md.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
  virtual void Stop() = 0;
};
StatusOr<std::unique_ptr<TcpStoreServer>> StartTcpStoreServer(
    const std::string& bind_addr, int port);
StatusOr<std::shared_ptr<Store>> ConnectTcpStore(
    const std::string& host, int port,
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Prepends "<prefix>/" to every key so groups and jobs share one store
// without colliding (c10d PrefixStore).
std::shared_ptr<Store> NewPrefixStore(std::string prefix,
                                      std::shared_ptr<Store> base);

}  // namespace strata::comm
