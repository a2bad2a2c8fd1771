// Job events (docs/architecture.md: "every event is stored and shown by `strata
// events`"): submitted, placed, launched, rank_exited, worker_lost,
// attempt_failed, restarting, succeeded, failed, cancelled. Stored in the
// StateStore under "event/<job_id>/<seq, 12 digits>" with sync writes, so
// they survive a coordinator SIGKILL. Event-loop thread only.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/state/state_store.h"
#include "fault/event.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class EventLog {
 public:
  // `clock` and `store` must outlive the log.
  EventLog(const Clock* clock, StateStore* store);

  // Finds the highest stored sequence number.
  Status Recover();

  // Stores and logs (info) one event. Storage errors are logged, not
  // returned: losing an event must not stop the job it describes.
  void Record(const std::string& job_id, int attempt, const std::string& kind,
              const std::string& message);
  // An event about one rank (e.g. "in_place_restart"): rank, node, step
  // and evidence as their own fields.
  void Record(const std::string& job_id, int attempt, const std::string& kind,
              const std::string& message, int rank, const std::string& node,
              int64_t step, const std::string& evidence);
  // Several events of one kind outside any job (e.g. "worker_lost" for a
  // rack that went silent at once), stored in one synced write: one disk
  // flush on the event loop, not one per event.
  void RecordAll(const std::string& kind,
                 const std::vector<std::string>& messages);
  // The same for a fault finding: kind, step, rank, node, peer_node,
  // slowdown, section and evidence as their own fields.
  void Record(const std::string& job_id, int attempt,
              const fault::FaultEvent& finding, const std::string& message);

  // Events of `job_id` (all jobs when empty) with seq > after_seq, in order.
  StatusOr<control::EventsReply> List(const std::string& job_id,
                                      int64_t after_seq);

 private:
  // Numbers, times and logs `e`; its row for the store.
  StateStore::Mutation Stamp(control::Event e);
  void Store(control::Event e);

  const Clock* clock_;
  StateStore* store_;
  Logger logger_;
  int64_t last_seq_ = 0;
};

}  // namespace strata::coordinator
