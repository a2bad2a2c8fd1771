// The worker's memory tier (docs/checkpoint.md "Memory tier"): a directory
// on the node's tmpfs (strata-worker --mem-dir) that holds the in-memory
// checkpoints of the jobs this worker runs ranks of, plus the replicas its
// peers' ranks send it, and a TCP server (the replica endpoint, advertised
// in the worker's registration) that serves it to peer workers' ranks with
// the protocol of checkpoint/mem_wire.h.
//
// Contract:
// - Layout: DIR/<job id>/step-<12 digits>/<name>, the file:// layout, so a
//   rank's mem:// storage reads the local part as a file:// checkpoint. A
//   step is committed in this directory iff its manifest.pb is there.
// - Memory limit: the files under DIR plus the replicas being received
//   never exceed `limit_bytes`. A kPut or kAdmit that would exceed it is
//   refused with ResourceExhausted naming the worker, the bytes held, the
//   request and the limit, and logged (warn): the rank's save fails and
//   recovery uses the durable tier.
// - A replica is written to "<name>.part" and renamed when every byte is
//   in: a half-received replica is never visible under its name.
// - When a manifest arrives for step S of a job, that job's uncommitted
//   steps older than S are removed (failed saves' leftovers).
// - Sweep() removes the directories of jobs this worker holds no rank of
//   and that nobody wrote to for `retention_ms` (the job ended, or moved to
//   other nodes and took its state with it).
// Threading: one accept thread and one thread per connection (at most
// kMaxConnections; more are refused); all state behind mu_. Sweep is called
// from the worker's loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <set>
#include <vector>
#include <string>
#include <thread>

#include "checkpoint/mem_wire.h"
#include "proto/control.pb.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/status.h"

namespace strata::worker {

// `--mem-limit`: a fraction of host memory (0 < x <= 1), or a size with a
// unit (e.g. 512MiB, 2GiB, 64KiB). InvalidArgument naming the flag.
StatusOr<uint64_t> ParseMemLimit(const std::string& text,
                                 uint64_t host_memory_bytes);
// MemTotal of /proc/meminfo in bytes (0 when unreadable).
uint64_t HostMemoryBytes();

class ReplicaServer {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr int kTimeoutMs = 30000;

  ReplicaServer(std::string dir, uint64_t limit_bytes, std::string node,
                Logger logger);
  ~ReplicaServer();  // stops accepting, waits for connections
  ReplicaServer(const ReplicaServer&) = delete;
  ReplicaServer& operator=(const ReplicaServer&) = delete;

  // Creates DIR (private, 0700) and listens on bind_addr:port (0: any);
  // `advertised_host` names this node to peers. The error names the dir or
  // the address.
  Status Start(const std::string& bind_addr, int port,
               const std::string& advertised_host);
  // "host:port" peers reach the server at (after Start).
  const std::string& endpoint() const { return endpoint_; }
  const std::string& dir() const { return dir_; }
  // Bytes held under DIR (file sizes, rounded to blocks) plus in flight.
  uint64_t UsedBytes();
  // A refusal the coordinator should see as a job event ("mem_full",
  // "mem_dir"): queued for the next heartbeat (TakeNotices), at most one
  // per job and kind every kNoticeEveryMs (a full tier refuses every step).
  // Thread-safe.
  static constexpr int64_t kNoticeEveryMs = 30000;
  void Notice(const std::string& job, const std::string& kind,
              const std::string& message);
  std::vector<control::MemTierNotice> TakeNotices();
  // Removes idle jobs' directories (see the contract); returns how many.
  int Sweep(const std::set<std::string>& held_jobs, int64_t retention_ms);

 private:
  void AcceptLoop();
  void Serve(int fd, std::string peer);
  Status Handle(int fd, const std::string& peer);
  Status HandlePut(int fd, const checkpoint::mem::Request& r,
                   const std::string& peer);
  Status HandleGet(int fd, const checkpoint::mem::Request& r,
                   const std::string& peer);
  // Holds a shared flock on the step's manifest until the peer closes the
  // connection (Op::kPin); kDrop refuses a step so locked.
  Status HandlePin(int fd, const checkpoint::mem::Request& r,
                   const std::string& peer);
  // OK, or ResourceExhausted (logged) when `bytes` more would pass the
  // limit; on OK the bytes are reserved until Release.
  Status Reserve(const checkpoint::mem::Request& r, uint64_t bytes,
                 const std::string& peer);
  void Release(uint64_t bytes);
  void QueueNotice(const std::string& job, const std::string& kind,
                   const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string StepPath(const std::string& job, int64_t step) const;
  std::string EntryPath(const checkpoint::mem::Request& r) const;
  void DropUncommittedBefore(const std::string& job, int64_t step);

  const std::string dir_;
  const uint64_t limit_;
  const std::string node_;
  Logger logger_;
  std::string endpoint_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  Mutex mu_;
  std::condition_variable cv_;
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<control::MemTierNotice> notices_ ABSL_GUARDED_BY(mu_);
  // (job, kind) -> steady ms of its last notice.
  std::map<std::pair<std::string, std::string>, int64_t> noticed_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace strata::worker
