// Collective flight recorder: the last N operations of every process group
// of a rank, kept in a shared-memory file that another process (the node's
// worker, `strata` tools) can read while the rank is wedged — stopped,
// spinning or deadlocked — or after it died.
//
// Per operation: the group (name and members), its sequence number in the
// group, the op and its bytes, and three times on the wall clock (ns since
// the Unix epoch, so ranks on one node compare directly; across nodes the
// reader corrects clock offsets): entered (the caller submitted it),
// started (the first exchange with a peer completed: the peers are there)
// and finished, plus per-peer bytes and time in transfers. PyTorch's c10d
// flight recorder keeps similar entries in process memory and dumps them on
// a timeout; here they live in shared memory so that nothing in the wedged
// rank has to run for them to be read.
//
// Layout (versioned, `kFlightRecorderVersion`): a header, a table of group
// names, then a ring of `capacity` fixed-size records. Writers (each group's
// thread) claim a slot with an atomic counter and publish with a sequence
// lock (odd while being written); a reader copies a record and keeps it only
// if its lock word was even and unchanged. The file is created by the rank
// and removed by whoever cleans up the attempt (the worker), so it survives
// a crash for post-mortem reading.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::comm {

inline constexpr uint32_t kFlightRecorderVersion = 1;
inline constexpr int kFlightRecorderPeers = 4;    // per-peer slots per record
inline constexpr int kFlightRecorderGroups = 64;  // groups per rank

enum class FrState : uint8_t { kEntered = 1, kStarted, kFinished, kFailed };
const char* FrStateName(FrState s);

struct FrPeer {
  int32_t peer = -1;   // world rank when the group knows it, else group rank
  uint64_t bytes = 0;  // sent + received with this peer
  int64_t ns = 0;      // time inside transfers with this peer
};

// One operation as read back.
struct FrEntry {
  std::string group;
  uint64_t seq = 0;  // 1-based within the group
  std::string op;    // "all_reduce", "send", ...
  uint64_t bytes = 0;
  FrState state = FrState::kEntered;
  int64_t entered_ns = 0, started_ns = 0, finished_ns = 0;  // 0 if not yet
  std::vector<FrPeer> peers;
};

struct FrDump {
  int rank = -1;
  int pid = 0;
  std::string job_id;
  uint64_t recorded = 0;  // operations ever recorded (> entries: overwritten)
  std::vector<FrEntry> entries;  // oldest first, per group by seq
};

// `/dev/shm/strata-fr-<job>-<rank>-<pid>` (characters outside
// [A-Za-z0-9_.-] of the job id become '_'): the pid keeps two jobs with the
// same id on one host (two local clusters) apart; the worker knows each
// rank's pid. The one place the name is made.
std::string FlightRecorderPath(const std::string& job_id, int rank, int pid);

class FlightRecorder {
 public:
  // Creates (or replaces) the file at `path` with room for `capacity`
  // records. Thread-safe after construction.
  static StatusOr<std::shared_ptr<FlightRecorder>> Create(
      const std::string& path, const std::string& job_id, int rank,
      int capacity = 2048);
  ~FlightRecorder();  // unmaps; the file stays

  // Registers a group; returns its index for Begin(). Groups beyond
  // kFlightRecorderGroups share the last index. Thread-safe.
  int AddGroup(const std::string& name);

  // The record of one operation, written by the group's thread only.
  class Op {
   public:
    Op() = default;
    // Marks the first completed exchange (idempotent).
    void Started();
    // Adds a transfer with `peer` of `bytes` that took `ns`.
    void Transfer(int peer, uint64_t bytes, int64_t ns);
    void Finish(bool ok);
    bool active() const { return rec_ != nullptr; }

   private:
    friend class FlightRecorder;
    struct Record* rec_ = nullptr;
    bool started_ = false;
  };

  // Records that the caller entered operation `seq` of group `group`; an
  // inactive Op (nothing written) while paused.
  Op Begin(int group, uint64_t seq, const char* op, uint64_t bytes);

  // Paused, Begin writes nothing (a measuring knob: strata-bench observe
  // compares steps with and without the recorder in one run). Thread-safe.
  void SetPaused(bool paused) {
    paused_.store(paused, std::memory_order_relaxed);
  }
  bool paused() const { return paused_.load(std::memory_order_relaxed); }

  const std::string& path() const { return path_; }

 private:
  FlightRecorder(std::string path, void* base, size_t len);
  std::string path_;
  void* base_;
  size_t len_;
  std::mutex groups_mu_;  // serializes AddGroup
  std::atomic<bool> paused_{false};
};

// What a reader expects of a recorder it was sent to read (docs/security.md
// "Files"): the file's owner and the header's job, rank and pid.
struct FrExpect {
  std::string job_id;
  int rank = -1;
  int pid = 0;
  uid_t uid = 0;
};

// Reads the recorder at `path` without any help from its writer. Opens with
// O_NOFOLLOW|O_NONBLOCK, so a symlink or FIFO planted at the name neither
// redirects nor blocks the reader. NotFound when absent; FailedPrecondition
// when it is not a regular file, or (with `expect`) is owned by another uid
// or its header names another job, rank or pid; DataLoss when it is not a
// flight recorder of this version or is truncated.
StatusOr<FrDump> ReadFlightRecorder(const std::string& path,
                                    const FrExpect* expect = nullptr);

// Wall-clock nanoseconds since the Unix epoch.
int64_t WallNowNs();

}  // namespace strata::comm
