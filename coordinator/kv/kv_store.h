// The coordinator-hosted rendezvous key-value store (docs/architecture.md, the
// server side of comm::Store for ranks started by strata workers). Values
// live in memory and in the StateStore under "kv/<key>" (unsynced writes:
// they survive a coordinator SIGKILL, not a machine crash), so ranks that
// rendezvoused before a coordinator restart still find their keys.
// Blocking Get/Wait are done by the client polling Missing() (see
// control/kv_client.h). Every change is written before it is applied to
// memory; a failed write changes nothing. Event-loop thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/state/state_store.h"

namespace strata::coordinator {

class KvStore {
 public:
  // Keys and values are limited so one client cannot exhaust memory.
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = 1 << 20;
  // All keys and values together (ResourceExhausted beyond).
  static constexpr size_t kMaxTotalBytes = size_t{256} << 20;

  explicit KvStore(StateStore* store);  // must outlive this
  Status Recover();

  Status Set(const std::string& key, const std::string& value);
  StatusOr<std::string> Get(const std::string& key) const;  // NotFound
  // Adds to the decimal integer under `key` (absent = 0), like c10d.
  StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  std::vector<std::string> Missing(const std::vector<std::string>& keys) const;
  Status Delete(const std::string& key);
  // Drops every key starting with `prefix` (a finished job's namespace), in
  // one atomic write; on error nothing is dropped.
  Status DeletePrefix(const std::string& prefix);
  size_t size() const { return values_.size(); }
  // Makes the stored keys equal to memory again (after a store reopen).
  Status Resync();

 private:
  StateStore* store_;
  std::map<std::string, std::string> values_;
  size_t total_bytes_ = 0;  // keys + values
};

}  // namespace strata::coordinator
