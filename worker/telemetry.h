// The worker's end of rank telemetry (docs/architecture.md): a ZeroMQ PULL
// socket bound at an ipc:// endpoint exported to ranks as STRATA_TELEMETRY.
// Ranks PUSH one serialized control.StepReport per step; the worker agent
// takes them (StepSource: every step, bounded per rank) and forwards them
// with its next heartbeat. One thread; not thread-safe.
//
// Who may report (docs/security.md "Telemetry"): libzmq records the
// connecting process's SO_PEERCRED (uid, gid, pid) for an ipc connection and
// hands it out as each message's "Peer-Address" property. A report is
// forwarded only when that pid is a rank this worker started (`SetRanks`)
// or a descendant of one (/proc/<pid>/status PPid, at most
// kMaxLineage generations up), and only under that rank's job and rank: a
// report claiming another job or rank, from an unknown pid or without
// credentials is dropped, counted and logged (the pid and the claimed
// identity; once per pid and claim). Frames that do not parse or exceed
// 64 KiB are dropped and counted.
//
// Arrival evidence: before forwarding, the sink reads the reporting
// process's flight recorder (worker/flight_reader.h; owned by the peer's
// uid, header naming the job, rank and pid) and replaces the report's
// recorded_ops / recorded_share with its own reading over the last
// kRecordWindowNs of its clock; whatever the rank put there is discarded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/logging.h"
#include "common/status.h"
#include "proto/control.pb.h"
#include "worker/rank_runner.h"
#include "worker/step_source.h"

namespace strata::worker {

class TelemetrySink : public StepSource {
 public:
  static constexpr int kMaxLineage = 16;
  // Collectives finished this long before a read count for recorded_share
  // (long enough to hold several steps, short enough to follow a slowdown
  // within a few of them).
  static constexpr int64_t kRecordWindowNs = 5'000'000'000;

  explicit TelemetrySink(zmq::context_t* context);
  Status Bind(const std::string& endpoint);

  // The ranks this worker started (their job, attempt, rank, pid and
  // state). Must outlive the sink. Until set, every report is refused.
  void SetRanks(const RankRunner* ranks) { ranks_ = ranks; }

  // Reads every pending frame (without blocking), then returns the reports
  // received since the last call (StepSource).
  std::vector<control::StepReport> TakeChanged() override;
  uint64_t dropped() const { return dropped_; }
  // Reports refused for who sent them (a subset of dropped()), and the
  // newest refusal as logged.
  uint64_t refused() const { return refused_; }
  const std::string& last_refusal() const { return last_refusal_; }

 private:
  struct Peer {
    pid_t pid = 0;
    uid_t uid = 0;
  };
  struct Queue {
    std::deque<control::StepReport> reports;
    Peer peer;  // the newest sender
  };
  void Drain();
  // The running rank `pid` is, or descends from; null if none.
  const control::RankReport* RankOf(
      pid_t pid, const std::vector<control::RankReport>& ranks) const;
  void Refuse(const Peer& peer, const control::StepReport& claimed,
              const std::string& why);
  void AttachRecord(const Peer& peer, std::deque<control::StepReport>& q);

  zmq::socket_t socket_;
  const RankRunner* ranks_ = nullptr;
  std::map<std::pair<std::string, int>, Queue> changed_;
  uint64_t dropped_ = 0, refused_ = 0;
  std::string last_refusal_;
  // (pid, claimed job, claimed rank) already logged; bounded.
  std::set<std::tuple<pid_t, std::string, int>> logged_;
  Logger logger_;
};

}  // namespace strata::worker
