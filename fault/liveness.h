// Liveness of the processes that report to the coordinator by heartbeat
// (workers, docs/control-plane.md): a peer silent for longer than
// `lost_after_ms` is lost. Time is the injected Clock's steady reading, so a
// wall-clock jump loses nobody. Silence is only the peer's fault while the
// watcher itself ran: after creation (a coordinator restart) and after
// GraceAfterPause() (its event loop was stopped), every peer gets a full
// window to report before it can be lost. Pure; one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"

namespace strata::fault {

class Liveness {
 public:
  // `clock` must outlive the tracker.
  Liveness(const Clock& clock, int64_t lost_after_ms);

  // A heartbeat (or registration) of `id`: alive from now, revived if lost.
  void Beat(const std::string& id);

  // Marks the alive peers silent for longer than lost_after_ms, counted from
  // their last beat or the last pause, whichever is later, as lost and
  // returns them (each once per loss). Costs O(beats that left the window
  // since the last call), not O(peers): the coordinator checks 20 times a
  // second with thousands of workers.
  std::vector<std::string> Check();

  bool Alive(const std::string& id) const;

  // The watcher did not run for a while (SIGSTOP, swapped out, a stalled
  // disk): beats may be waiting unread. Starts every window afresh now.
  void GraceAfterPause();
  // True within lost_after_ms of creation or of the last GraceAfterPause().
  bool Settling() const;

 private:
  struct Peer {
    int64_t last_beat_ms = 0;
    bool alive = true;
  };
  const Clock& clock_;
  int64_t lost_after_ms_;
  int64_t grace_from_ms_;
  std::unordered_map<std::string, Peer> peers_;
  // Every beat within the window, oldest first (steady time only grows):
  // Check pops the ones that left it and looks only at their peers. A
  // popped beat that is not its peer's last is stale and dropped.
  std::deque<std::pair<int64_t, std::string>> beats_;
};

}  // namespace strata::fault
