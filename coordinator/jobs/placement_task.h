// The expensive half of placing an attempt, as a pure function of a
// snapshot, so that it may run off the event loop (docs/control-plane.md
// "Placement off the event loop"). For the 16,384-rank job on 4,096 nodes
// planning, building the RUNNING record (4,096 node entries, 16,384 rank
// entries), serialising it (2 MB) and preparing the attempt's launch orders
// held the loop for one 55-90 ms step (docs/results.md "Coordinator at
// scale"); the loop now takes the snapshot, a PlacementWorker computes the
// PlacedAttempt, and the loop applies it in one short step (JobManager::
// ApplyPlacement: re-check, one store write, swap the record in).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/jobs/job_runtime.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"

namespace strata::coordinator {

// What the placement of one attempt is decided on, copied on the loop.
struct PlacementSnapshot {
  // The PENDING record without the previous attempt's per-node and
  // per-rank lists and plan (LightCopy): what Placed() keeps of it.
  control::JobInfo job;
  std::vector<control::WorkerInfo> nodes;  // in node order
  std::vector<std::string> spares;         // reserved at launch
  // Set: run this plan (a same-plan spare swap); unset: plan the attempt.
  std::optional<Plan> plan;
  google::protobuf::Map<std::string, double> node_speed;
  double compute_scale = 1.0;
  int per_node = 1;  // ranks per node
  int port = 0;      // MASTER_PORT
  int64_t now_ms = 0;  // start_unix_ms of the attempt: when it was decided
  // Not used by the computation; recorded as events when applied: (lost
  // node, spare) of a same-plan spare swap.
  std::vector<std::pair<std::string, std::string>> swaps;
};

// What the loop applies: the RUNNING record, its serialised bytes (the
// value stored as "job/<id>"), and the attempt's AttemptIndex; or why the
// attempt cannot be planned (the job is failed with it).
struct PlacedAttempt {
  Status status = absl::OkStatus();
  control::JobInfo record;
  std::string bytes;
  AttemptIndex index;
};

// `job` without nodes, node_info, ranks and plan: the fields Placed()
// replaces, which are the ones that grow with the job. O(1) in the job's
// size (the lists are swapped out and back, not copied).
control::JobInfo LightCopy(control::JobInfo& job);

// Plans (unless a plan is given), checks the launch order's size, builds
// the RUNNING record, serialises it and prepares its AttemptIndex. Pure;
// any thread.
PlacedAttempt ComputePlacement(const PlacementSnapshot& in);

// One placement handed to a PlacementWorker. `out` may be read only once
// done() (acquire); until then only the worker thread touches it.
struct PlacementTask {
  explicit PlacementTask(PlacementSnapshot s) : in(std::move(s)) {}
  PlacementSnapshot in;
  PlacedAttempt out;
  std::atomic<bool> finished{false};
  bool done() const { return finished.load(std::memory_order_acquire); }
};

// One thread that runs ComputePlacement for tasks handed to it, in order.
// A task the loop abandons (the job was cancelled meanwhile) is still
// computed and then dropped with its last reference. The destructor waits
// for the task under way and drops the queued ones.
class PlacementWorker {
 public:
  using Task = PlacementTask;

  PlacementWorker();
  ~PlacementWorker();
  PlacementWorker(const PlacementWorker&) = delete;
  PlacementWorker& operator=(const PlacementWorker&) = delete;

  std::shared_ptr<Task> Start(PlacementSnapshot snapshot);
  // Returns once every task started so far is done (tests).
  void Drain();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;  // a task is being computed
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace strata::coordinator
