// Goodput accounting of the jobs (observe/goodput.h, docs/observe.md): each
// JobRuntime's ledger is written to the store ("goodput/<job>") at most every
// kSaveIntervalMs while its job is active and once at its end, and restored
// by Recover, so a coordinator restart keeps the accounting up to the last
// save (the time after it goes where the saved phase was heading). Also the
// per-job step histogram behind strata_job_step_duration_seconds. Event-loop
// thread only.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/jobs/job_table.h"
#include "coordinator/state/state_store.h"

namespace strata::coordinator {

class GoodputBook {
 public:
  static constexpr int64_t kSaveIntervalMs = 5000;

  // All must outlive the book.
  GoodputBook(const Clock* clock, StateStore* store, Logger logger)
      : clock_(clock), store_(store), logger_(std::move(logger)) {}

  // Gives the jobs in `table` their stored ledgers. A ledger that does not
  // parse, or of a job not in `stored_jobs`, is dropped with a warning (the
  // job's goodput then counts from the restart as start-up); ledgers of
  // stored jobs no longer held in memory stay in the store.
  Status Restore(JobTable& table, const std::set<std::string>& stored_jobs);

  // Rank 0's step `s` of the running attempt (the job moves in lock-step).
  static void OnRankZeroStep(JobRuntime& rt, const control::StepReport& s);

  // Writes the ledgers of active jobs when the interval has passed.
  void SaveDue(const JobTable& table);
  // Writes one job's ledger now (at its end).
  void Save(const JobRuntime& rt);

 private:
  void Write(const std::vector<StateStore::Mutation>& rows);

  const Clock* clock_;
  StateStore* store_;
  Logger logger_;
  int64_t saved_ms_ = 0;
};

}  // namespace strata::coordinator
