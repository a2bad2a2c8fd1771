// Hot spares (docs/fault.md "Hot spares"): idle registered workers held in
// reserve for a job (JobLaunch.spares) and the same-plan restart that puts
// one in place of a lost node. Pure functions of the job record and the
// workers as the registry lists them, so placement stays testable without
// a coordinator; JobManager (job_placement.cc) applies their results.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/control.pb.h"

namespace strata::coordinator {

// How a restarted attempt can run on its previous nodes, lost ones replaced
// by idle workers, with the previous plan unchanged.
struct SpareSwap {
  enum class Kind {
    kNone,   // not applicable: a first attempt, a re-plan is due, or too
             // few idle workers to fill the holes (fall back to re-planning)
    kWait,   // a previous node is alive and still stopping the failed
             // attempt: wait for it (it keeps its node index and local state)
    kReady,  // `nodes` is the attempt's node list in the previous order
  };
  Kind kind = Kind::kNone;
  std::vector<control::WorkerInfo> nodes;
  // (lost node name, spare node name) per replaced node, in node order.
  std::vector<std::pair<std::string, std::string>> swaps;
};

// `job` is PENDING after a failed attempt (its nodes/node_info/plan are the
// previous attempt's); `workers` is the registry's list; `idle` the workers
// placement may take now (alive, fit, not given to another job, holding
// nothing), `taken` the worker ids other jobs run on or hold as spares.
// A previous node is kept when idle, waited for when alive and still
// draining, and otherwise (lost, evicted, given away) replaced: first by the
// job's own reserved spares in reservation order, then by other idle
// workers. Not applicable when the job's node speeds were re-measured (a
// `rebalance` re-plans) or when fewer idle workers than holes exist.
SpareSwap PlanSpareSwap(const control::JobInfo& job,
                        const control::ListWorkersReply& workers,
                        const std::vector<control::WorkerInfo>& idle,
                        const std::set<std::string>& taken);

// Spares for lost nodes of a RUNNING attempt that is kept (in-place node
// replacement, docs/fault.md "Node loss in place"): one worker per entry of
// `lost` (node indexes into job.node_info), in that order, taken from
// `workers` that are alive, hold nothing, are neither a node of the attempt
// nor another job's (`taken`) nor evicted from this job, fit the job
// (`fits`, CheckNodeCapacity) and run as many ranks as the node they
// replace: the job's reserved spares first, then any other idle worker.
// Empty when there are fewer of them than lost nodes.
std::vector<control::WorkerInfo> PickInPlaceSpares(
    const control::JobInfo& job, const control::ListWorkersReply& workers,
    const std::set<std::string>& taken, const std::vector<int>& lost,
    const std::function<bool(const control::WorkerInfo&)>& fits);

// The job's spare reservation once the attempt runs on `nodes`: the
// previous reservation minus workers now in `nodes`, dead ones or ones
// another job took, topped up (in `idle` order) to launch.spares from
// `idle` workers not in `nodes` and not in `taken`.
std::vector<std::string> ReserveSpares(
    const control::JobInfo& job, const control::ListWorkersReply& workers,
    const std::vector<control::WorkerInfo>& idle,
    const std::vector<std::string>& nodes, const std::set<std::string>& taken);

// The worker ids other active jobs hold: the nodes of running attempts and
// every active job's reserved spares (`except` excluded).
// Filled by the caller from the JobTable; this merges one job's share.
void AddTaken(const control::JobInfo& other, std::set<std::string>* taken);

}  // namespace strata::coordinator
